"""Activation patching between two inputs: where in the model does the information that
decides image B's class live?

For each module in forward order, the run on image B gets that module's output from the run
on image A (TransformerLens's "denoising" patch: clean A into corrupted B), and the explained
class's logit and probability are recorded. The curve says from which module on B's run has
become A's. Two things it always shows: a module whose output is the only path to the logits
(a block's output, the pooling, the head) recovers A's value exactly, since the rest of the
run is then A's; a module inside a branch (a residual block's convolutions) carries part of
it. A module that runs several times per forward is patched at every call, each from the
same call of A.

It is one batched forward per chunk of modules: rows [A, B, B, ..., B], and module i's
forward hook writes row 2 + i of its output from row 0, which is A's output at that same
point of the same forward. Row 1 stays B's unpatched run. The write is in place (a copy of
the output would cost about 1.3x the forward instead of 1.1x), except where the output is
its input unchanged (nn.Identity, Dropout in eval, Flatten: a view), which another consumer
(a skip connection) may still read: that output is copied first. The model runs in eval mode
and its rows must not mix (no batch statistics): row 1 is checked against a run of B alone.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from inspector.core.edits.hooks import install_cancel_check, install_edits
from inspector.core.edits.interventions import Intervention, InterventionSet
from inspector.core.explain.cam.targets import logits_of
from inspector.core.hookset import HookSet, ModelState, RunCancelled
from inspector.core.models.tree import NEVER_CALLED, TUPLE_OUTPUT, ModuleTree

CHUNK = 64  # modules patched per forward (rows: 2 more)
ROW_TOLERANCE = 1e-4  # |row 1 - B alone| allowed, relative to 1 + max |logit|
SAME_LOGIT = 1e-6  # |A - B| below this (relative): "recovered" is not defined


@dataclass(frozen=True)
class PatchSweep:
    """The sweep's result. logit[i], prob[i]: the target class's logit and probability of B's
    run with modules[i] patched from A (nan where it could not be patched, see notes);
    clean_*: A's run, corrupted_*: B's run."""

    modules: tuple[str, ...]
    logit: tuple[float, ...]
    prob: tuple[float, ...]
    target: int
    clean_logit: float
    clean_prob: float
    corrupted_logit: float
    corrupted_prob: float
    notes: tuple[str, ...] = ()

    def recovered(self) -> list[float] | None:
        """(patched - B) / (A - B) of the logit per module: 0 no effect, 1 A's value; None
        when A and B give the class about the same logit (the ratio would be noise)."""
        gap = self.clean_logit - self.corrupted_logit
        if abs(gap) <= SAME_LOGIT * (1 + abs(self.clean_logit)):
            return None
        return [(v - self.corrupted_logit) / gap for v in self.logit]

    def entries(self) -> list[dict]:
        """summary.json's "patch_sweep": one {"module", "logit", "prob"} per module."""
        return [{"module": m, "logit": _num(v), "prob": _num(p)}
                for m, v, p in zip(self.modules, self.logit, self.prob, strict=True)]

    def reference(self, source: str) -> dict:
        """summary.json's "patch_reference": what the sweep's numbers are relative to."""
        return {"source": source, "class": self.target, "logit_a": _num(self.clean_logit),
                "prob_a": _num(self.clean_prob), "logit_b": _num(self.corrupted_logit),
                "prob_b": _num(self.corrupted_prob), "notes": list(self.notes)}


def _num(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def sweep_modules(tree: ModuleTree, depth: int | None = None) -> tuple[list[str], list[str]]:
    """The modules a sweep patches, in forward order: the leaves, or with `depth` the modules
    at that depth (1: the model's children); and notes on those left out (never called, or
    returning a tuple)."""
    if depth is not None and depth < 1:
        raise ValueError(f"the sweep depth counts from 1 (the model's children), not {depth}")
    order = [n for n in tree.order if n] + [n for n in tree.modules if n and n not in tree.order]
    chosen = [n for n in order
              if (tree[n].is_leaf if depth is None else tree[n].depth == depth)]
    never = [n for n in chosen if NEVER_CALLED in tree[n].hazards]
    tuples = [n for n in chosen if TUPLE_OUTPUT in tree[n].hazards and n not in never]
    notes = []
    if never:
        notes.append(f"{len(never)} module(s) never called, not patched: {', '.join(never[:5])}")
    if tuples:
        notes.append(f"{len(tuples)} module(s) returning a tuple, not patched: "
                     f"{', '.join(tuples[:5])}")
    modules = [n for n in chosen if n not in never and n not in tuples]
    if not modules:
        where = "leaves" if depth is None else f"modules at depth {depth}"
        raise ValueError(f"the model has no {where} with one output tensor to patch")
    return modules, notes


def patch_sweep(model: nn.Module, a: torch.Tensor, b: torch.Tensor, modules: Sequence[str],
                target: int | None = None, chunk: int = CHUNK,
                edits: Iterable[Intervention] = (), cancel: threading.Event | None = None,
                notes: Iterable[str] = ()) -> PatchSweep:
    """Patch each of `modules` from image A (a, (1, C, H, W) model input) into the run on
    image B (b); `target`: the class (None: B's top class); `edits`: applied in every row."""
    found = dict(model.named_modules())
    unknown = [m for m in modules if m not in found]
    if unknown:
        raise KeyError(f"no module named {', '.join(map(repr, unknown))} in the model")
    if a.shape != b.shape:
        raise ValueError(f"images A and B give model inputs of different shapes "
                         f"({list(a.shape)} and {list(b.shape)})")
    edits = InterventionSet(tuple(edits))
    logits, skipped = [], []
    with ModelState(model, training=False), torch.no_grad():
        alone = _forward(model, b, found, edits, cancel)
        for start in range(0, len(modules), max(1, chunk)):
            part = list(modules[start:start + chunk])
            x = torch.cat([a, b, b.expand(len(part), *b.shape[1:])])
            with HookSet() as hooks:
                for i, name in enumerate(part):
                    _patch_hooks(hooks, found[name], name, 2 + i, len(part) + 2, skipped)
                out = _forward(model, x, found, edits, cancel, hooks)
            if start == 0:
                _check_rows(out[1], alone[0])
            logits.append(out if start == 0 else out[2:])
    rows = torch.cat(logits).double()
    target = int(rows[1].argmax()) if target is None else int(target)
    if not 0 <= target < rows.shape[1]:
        raise ValueError(f"target class {target} out of range 0..{rows.shape[1] - 1}")
    probs = rows.softmax(1)[:, target]
    values = rows[:, target]
    lost = set(skipped)
    logit = tuple(math.nan if m in lost else float(v) for m, v in zip(modules, values[2:]))
    prob = tuple(math.nan if m in lost else float(p) for m, p in zip(modules, probs[2:]))
    extra = [f"{m}: its output has no batch dimension to patch per image" for m in
             dict.fromkeys(skipped)]
    return PatchSweep(tuple(modules), logit, prob, target, float(values[0]), float(probs[0]),
                      float(values[1]), float(probs[1]), (*notes, *extra))


def _forward(model, x, found, edits: InterventionSet, cancel, hooks: HookSet | None = None):
    own = HookSet() if hooks is None else None
    use = hooks if hooks is not None else own
    try:
        install_edits(use, found, edits, 0)
        if cancel is not None:
            if cancel.is_set():
                raise RunCancelled()
            for mod in found.values():
                if next(mod.children(), None) is None:
                    install_cancel_check(use, mod, cancel)
        return logits_of(model(x)).detach().flatten(1).float()
    finally:
        if own is not None:
            own.remove()


def _check_rows(row: torch.Tensor, alone: torch.Tensor) -> None:
    diff = float((row - alone).abs().max())
    if diff > ROW_TOLERANCE * (1 + float(alone.abs().max())):
        raise ValueError(f"the model's images in a batch are not independent (image B's logits "
                         f"differ by {diff:.3g} from a run of B alone): a patch sweep needs a "
                         f"model whose batch rows do not mix")


def _patch_hooks(hooks: HookSet, module: nn.Module, name: str, row: int, rows: int,
                 skipped: list[str]) -> None:
    inputs: list[list[tuple[int, int]]] = []  # per call in progress: (storage, version)

    def pre(mod, args):
        inputs.append([(t.untyped_storage().data_ptr(), t._version)
                       for t in args if isinstance(t, torch.Tensor)])

    def post(mod, args, out):
        seen = inputs.pop() if inputs else []
        if not isinstance(out, torch.Tensor):
            return None
        dim = 0 if out.shape[0] == rows else 1 if out.ndim > 1 and out.shape[1] == rows else None
        if dim is None:
            skipped.append(name)
            return None
        ptr = out.untyped_storage().data_ptr()
        # The output is an input the module did not overwrite (Identity, a view): others may
        # still read that tensor, so the patch goes into a copy.
        alias = any(ptr == p and out._version == v for p, v in seen)
        copied = alias or 0 in out.stride()
        target = out.clone() if copied else out
        target.select(dim, row).copy_(target.select(dim, 0))
        return target if copied else None

    hooks.forward_pre(module, pre)
    hooks.forward(module, post)

