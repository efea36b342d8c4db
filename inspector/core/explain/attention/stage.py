"""The attention part of a Session run (core.run.stages, core.run.session): what the run asks
of attention, its capture around the forward and backward, and what is made of it after.

    ask_of(request)   the attention maps in the CAM list and RunRequest.attention, or None:
                      then nothing is installed and the fused kernels run untouched
    AttentionRun      entered inside the run's Capture (its hooks come after the edits', so
                      what it reads is what flows on); `before_backward` takes LeGrad's
                      per-block gradients; `roots` are where the run's backward must reach for
                      gradient rollout (the leaf at the first attention, when there is one)
    explain()         after the backward: CamFrames of the maps (RunOutcome.cams and .grids),
                      the AttentionFrame of the explorer, the logit lens (a LensFrame and
                      RunOutcome.logit_lens), the attention kept whole (RunOutcome.attention)

A model the methods do not apply to (a CNN, Swin's windows, a non-softmax attention) gets one
note in RunOutcome.notes, and no map: not an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from inspector.core.explain.attention.capture import AttentionCapture
from inspector.core.explain.attention.explorer import mean_attention_distance
from inspector.core.explain.attention.find import (
    NO_ATTENTION,
    describe_blocks,
    find_attention,
    legrad_blocks,
)
from inspector.core.explain.attention.heads import HeadMissing
from inspector.core.explain.attention.lens import lens_logits_by_block, lens_top
from inspector.core.explain.attention.methods import gradrollout, legrad, legrad_gradients, rollout
from inspector.core.explain.attention.options import LEGRAD_BLOCKS, AttentionOptions
from inspector.core.explain.cam.methods import normalize_maps
from inspector.core.explain.catalog import ATTENTION_CAMS, CAM_METHODS, cam_method
from inspector.core.models.base import CLASSIFICATION
from inspector.core.records.frames import AttentionFrame, CamFrame, LensFrame, Prediction

# The explorer's frame holds every query's attention up to this size (float16); beyond it,
# the class token's row only.
ATTENTION_FRAME_BYTES = 64 * 2**20
LENS_TOP_SHOWN = 3  # classes per block in the window's Depth tab


@dataclass(frozen=True)
class AttentionAsk:
    """The attention maps of a run's CAM list, (method, layer), and its attention options."""

    methods: tuple[tuple[str, str | None], ...]
    options: AttentionOptions

    @property
    def needs_grad(self) -> bool:
        return any(CAM_METHODS[m].needs_grad for m, _ in self.methods)


def is_attention_map(method: str) -> bool:
    try:
        return cam_method(method) in ATTENTION_CAMS
    except ValueError:  # an unknown method: said where the CAMs are computed
        return False


def ask_of(request) -> AttentionAsk | None:
    """What `request` (core.run.request.RunRequest) asks of attention; None: nothing."""
    methods = tuple((cam_method(m), layer) for m, layer in request.cams if is_attention_map(m))
    options = request.attention
    if not methods and (options is None or not options.asks_beyond_maps):
        return None
    return AttentionAsk(methods, options or AttentionOptions())


class AttentionRun:
    """One run's attention (see the module docstring); a no-op for `ask` None."""

    def __init__(self, run, ask: AttentionAsk | None) -> None:
        self.run, self.ask = run, ask
        self.cap: AttentionCapture | None = None
        self.found = None
        self.methods: tuple[tuple[str, str | None], ...] = ask.methods if ask else ()
        self.legrad: tuple[int, ...] = ()
        self.lens = ask.options.lens if ask else 0
        self._legrad_grads: list[torch.Tensor] | None = None

    # -- around the forward and backward ----------------------------------------------------
    def __enter__(self) -> AttentionRun:
        if self.ask is None:
            return self
        run, notes = self.run, self.run.outcome.notes
        self.found = found = find_attention(run.loaded.model)
        if found is None:
            notes.append(NO_ATTENTION)
            self.methods, self.lens = (), 0
            return self
        if run.loaded.task != CLASSIFICATION:
            if self.lens or any(m == "legrad" for m, _ in self.methods):
                notes.append(f"LeGrad and the logit lens read a classifier's head: not for a "
                             f"{run.loaded.task} model")
            self.methods = tuple((m, layer) for m, layer in self.methods if m != "legrad")
            self.lens = 0
        for method, layer in self.methods:
            if method == "legrad":
                self.legrad = legrad_blocks(found, layer, LEGRAD_BLOCKS)
        options = self.ask.options
        names = set(m for m, _ in self.methods)
        if names & {"rollout", "gradrollout"} or options.explorer:
            only = None
        else:
            only = {found.attention[i] for i in self.legrad} | set(options.keep)
        blocks = set(found.blocks[i] for i in self.legrad) | (set(found.blocks) if self.lens else set())
        self.cap = AttentionCapture(run.loaded.model, found,
                                    grad=bool(names & {"gradrollout", "legrad"}), only=only,
                                    keep_blocks=[b for b in found.blocks if b in blocks])
        self.cap.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cap is not None:
            self.cap.__exit__(*exc)

    @property
    def roots(self) -> list[torch.Tensor]:
        """Where the run's backward must reach for gradient rollout's gradients."""
        cap = self.cap
        wanted = any(m == "gradrollout" for m, _ in self.methods)
        return [cap.leaf] if wanted and cap is not None and cap.leaf is not None else []

    def before_backward(self) -> None:
        """LeGrad's gradients, one per block of its own score (the graph is kept for the
        run's backward)."""
        run = self.run
        if self.legrad and self.cap is not None and isinstance(run.target, int):
            with run.timed("legrad"):
                self._legrad_grads = legrad_gradients(self.cap, self.legrad, [run.target])

    # -- after ------------------------------------------------------------------------------
    def explain(self) -> None:
        """The maps, the explorer's frame, the lens and the kept attention (see the module
        docstring)."""
        if self.cap is not None:
            with self.run.timed("attention"):
                self._explain()

    def _explain(self) -> None:
        cap, run = self.cap, self.run
        if self.lens:
            self._lens()
        if not cap.names:
            return
        hw = (int(run.x.shape[-2]), int(run.x.shape[-1]))
        why = cap.check(int(run.x.shape[0]), hw)
        if why:
            run.outcome.notes.append(why)
            if self.ask.options.explorer:
                run.put(AttentionFrame(run.run_id, (), np.zeros((0, 0, 0, 0), np.float16),
                                       np.zeros((0, 0), np.float32), 0, (0, 0),
                                       budget_note=why))
            return
        prefix, grid = cap.layout(hw)
        if run.target is not None:
            for method, layer in self.methods:
                self._map(method, layer, prefix, grid, hw)
        if self.ask.options.explorer:
            run.put(self._explorer_frame(prefix, grid))
        for name in self.ask.options.keep:
            last = [c for c in cap.captured if c.name == name]
            if last:
                # A copy: the captured tensor is the model's own intermediate.
                probs = last[-1].probs[0].detach().float().cpu()
                run.outcome.attention[name] = probs.numpy().copy()

    def _map(self, method: str, layer: str | None, prefix: int, grid, hw) -> None:
        cap, found, run = self.cap, self.found, self.run
        every = describe_blocks(found, range(len(found.attention)))
        options = self.ask.options
        if method == "rollout":
            raw = rollout(cap.probs(), fusion=options.fusion, discard=options.discard,
                          prefix=prefix, class_token=found.class_token)
            where = f"{every}, {options.describe_rollout()}"
        elif method == "gradrollout":
            missing = [c.name for c in cap.captured if c.grad is None]
            if missing:
                run.outcome.notes.append(f"Gradient rollout: no gradient of the score reached "
                                         f"the attention of {missing[0]}, so there is no map")
                return
            raw = gradrollout(cap.probs(), [c.grad for c in cap.captured], prefix=prefix,
                              class_token=found.class_token)
            where = every
        else:
            if self._legrad_grads is None:
                run.outcome.notes.append("LeGrad: its gradients were not computed in this run")
                return
            raw = legrad(self._legrad_grads, prefix=prefix)
            where = describe_blocks(found, self.legrad)
        on_grid = raw[:1].reshape(1, *grid).float()
        cam = normalize_maps(on_grid, hw)[0].cpu().numpy()
        run.outcome.cams[(method, layer)] = cam
        run.outcome.grids[method] = on_grid[0].cpu().numpy()
        run.put(CamFrame(run.run_id, method, where, run.target, cam))

    def _explorer_frame(self, prefix: int, grid) -> AttentionFrame:
        cap, found = self.cap, self.found
        probs = [c.probs[0].detach().float() for c in cap.captured]  # (heads, N, N) each
        distance = np.stack([mean_attention_distance(p.cpu().numpy(), prefix, grid)
                             for p in probs]).astype(np.float32)
        stacked = torch.stack(probs)
        size = stacked.numel() * 2
        note = ""
        if size > ATTENTION_FRAME_BYTES:
            rows = (stacked[:, :, :1] if found.class_token
                    else stacked[:, :, prefix:].mean(dim=2, keepdim=True))
            note = (f"every query's attention is {size / 2**20:.0f} MB for this model and "
                    f"input, over the {ATTENTION_FRAME_BYTES // 2**20} MB a run sends: only "
                    f"the class token's row came")
            stacked = rows
        return AttentionFrame(
            self.run.run_id, tuple(c.name for c in cap.captured),
            stacked.to(torch.float16).cpu().numpy(), distance, prefix, tuple(grid),
            class_token=found.class_token, all_queries=not note, budget_note=note)

    def _lens(self) -> None:
        run, cap = self.run, self.cap
        logits = run.outcome.logits
        try:
            blocks, lens = lens_logits_by_block(run.loaded.model, self.found, cap.block_outputs,
                                                logits.to(run.loaded.device))
        except Exception as e:  # noqa: BLE001 - a head of an unexpected shape: no lens, said so
            reason = str(e) if isinstance(e, (ValueError, HeadMissing)) else (
                f"its head does not take a block's tokens ({type(e).__name__}: {e})")
            run.outcome.notes.append(f"No logit lens: {reason}")
            return
        first = lens[:, 0]  # the run's one image
        label = run.loaded.label
        run.outcome.logit_lens = lens_top(blocks, first, label, self.lens)
        probs = first.softmax(dim=-1)
        target = run.target if isinstance(run.target, int) else int(logits[0].argmax())
        top_p, top_i = probs.topk(min(LENS_TOP_SHOWN, probs.shape[-1]), dim=-1)
        top = tuple(tuple(Prediction(int(i), label(int(i)), float(p), float(first[b, i]))
                          for p, i in zip(ps.tolist(), idx.tolist(), strict=True))
                    for b, (ps, idx) in enumerate(zip(top_p, top_i, strict=True)))
        how = (f"each block's tokens through the model's own final norm and head "
               f"({self.found.family}); the last block's is the model's output")
        run.put(LensFrame(run.run_id, tuple(blocks), target,
                          probs[:, target].numpy().astype(np.float32), top, how, label(target)))

    def release(self) -> None:
        """Let go of the run's tensors and their graph."""
        if self.cap is not None:
            self.cap.release()
        self._legrad_grads = None
