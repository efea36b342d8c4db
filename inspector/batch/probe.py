"""Per-channel figures of a batch, reduced on the device in the forward hooks.

For each chosen layer a forward hook turns the output into a (B, C, positions) view and keeps
only its maximum over positions, where that maximum is, and its mean: (B, C) tensors. The
whole activation is never kept, so memory does not depend on the layer's size beyond the
forward itself. The same forward gives the predicted class and its Grad-CAM at the CAM layer
(`core.explain.cam.compute_cams`: autograd only from that layer up, through the few modules above
it); everything below the CAM layer runs under torch.no_grad().

How channels are read from a layer's output:
- (B, C, h, w), (B, C, ...) and (B, C): channels first, positions are the rest;
- (B, h, w, C) (Swin, ConvNeXt blocks) and (B, N, D) tokens (ViT): channels last;
  a (B, C, L) output whose L fits no patch grid (a 1-D convolution) stays channels first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from inspector.core.explain.cam.compute import compute_cams
from inspector.core.explain.cam.methods import normalize_maps
from inspector.core.explain.cam.targets import logits_of
from inspector.core.hookset import tensor_leaves
from inspector.core.tokens import NHWC, TOKENS, detect_layout


@dataclass(frozen=True)
class LayerPlan:
    """How to read one layer: which dim holds the channels, and which call to read."""

    name: str
    channels: int
    channels_last: bool  # (B, ..., C)
    seq_first: bool  # (N, B, D) tokens
    calls: int  # calls per forward; the last one is read, as `analyse` does

    def view(self, t: torch.Tensor) -> torch.Tensor:
        """(B, C, positions), a view where the layout allows it."""
        if self.seq_first:
            return t.permute(1, 2, 0)
        if t.ndim == 2:
            return t[:, :, None]
        if self.channels_last:
            return t.flatten(1, -2).transpose(1, 2)
        return t.flatten(2)


def plan_layers(tree, names: list[str], input_hw: tuple[int, int]) -> dict[str, LayerPlan]:
    """Plans from the module tree's probe forward (batch of 1); ValueError naming the layer
    when its output has no channels to rank."""
    plans = {}
    for name in names:
        info = tree.modules[name]
        if not info.calls:
            raise ValueError(f"layer '{name}' never runs in the model's forward")
        shape = info.output_shape
        if not shape or len(shape) < 2:
            raise ValueError(
                f"layer '{name}' returns {'no tensor' if not shape else f'shape {list(shape)}'}: "
                f"no channels to rank; choose another layer (see `network-inspector tree`)"
            )
        layout = detect_layout(shape, input_hw, batch_size=1) if len(shape) in (3, 4) else None
        last = layout is not None and layout.kind in (NHWC, TOKENS)
        seq_first = layout is not None and layout.seq_first
        plans[name] = LayerPlan(name, int(shape[-1] if last else shape[1]), last, seq_first,
                                len(info.calls))
    return plans


@dataclass
class BatchStats:
    """What one batch gives; tensors on the model's device unless said otherwise."""

    maxima: dict[str, torch.Tensor]  # layer -> (B, C) float32
    argmax: dict[str, torch.Tensor]  # layer -> (B, C) int64, a flat index over positions
    means: dict[str, torch.Tensor]  # layer -> (B, C) float32
    predicted: torch.Tensor  # (B,) int64, on the CPU
    cams: torch.Tensor | None  # (B, h, w) Grad-CAM per image in [0, 1], on the CPU


class Probe:
    """`with Probe(model, plans, cam_layer) as probe: stats = probe.run(x)`.

    The hooks live as long as the `with`; they are removed in `finally`, also when a forward
    raises.
    """

    def __init__(self, model: nn.Module, plans: dict[str, LayerPlan], cam_layer: str | None):
        self.model = model
        self.plans = plans
        self.cam_layer = cam_layer
        self._handles: list = []
        self._calls: dict[str, int] = {}
        self._out: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def __enter__(self) -> Probe:
        modules = dict(self.model.named_modules())
        try:
            for name in self.plans:
                self._handles.append(modules[name].register_forward_hook(self._hook(name)))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str):
        plan = self.plans[name]

        def hook(module, args, output):
            self._calls[name] += 1
            if self._calls[name] != plan.calls:
                return None
            t = next(t for _, t in tensor_leaves(output))
            v = plan.view(t.detach())
            values, where = v.max(dim=2)
            mean = torch.mean(v, dim=2, dtype=torch.float32)
            self._out[name] = (values.float(), where, mean)
            return None

        return hook

    def run(self, x: torch.Tensor) -> BatchStats:
        self._calls = dict.fromkeys(self.plans, 0)
        self._out = {}
        cams = None
        with torch.no_grad():
            if self.cam_layer is not None:
                result = compute_cams(self.model, x, ["gradcam"], self.cam_layer)
                predicted = torch.tensor(result.targets, dtype=torch.int64)
                raw = result.raw["gradcam"]
                cams = normalize_maps(raw, tuple(raw.shape[-2:]))
            else:
                self.model.eval()
                predicted = logits_of(self.model(x)).detach().flatten(1).argmax(1).cpu()
        missing = [n for n in self.plans if n not in self._out]
        if missing:
            raise RuntimeError(f"layer '{missing[0]}' did not run in this forward")
        return BatchStats(
            maxima={n: o[0] for n, o in self._out.items()},
            argmax={n: o[1] for n, o in self._out.items()},
            means={n: o[2] for n, o in self._out.items()},
            predicted=predicted,
            cams=cams,
        )
