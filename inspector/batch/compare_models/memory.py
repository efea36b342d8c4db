"""What comparing two models costs in memory, said before model B loads (the window's File ▸
Compare with model…): B's weights, a copy of A (the comparison's hooks must not touch the
window's own model), and what a batch adds while it runs; and what the machine has free.

Estimates, and said as such: a model's weights from its file's size (or, for a catalog name,
from building it on PyTorch's "meta" device, which allocates nothing); a batch's peak from
the probe forward's output sizes (no-grad forwards hold a few outputs at a time: the largest
three are counted) plus the Gram matrices of both; for model B of another architecture, the output
sizes of a forward on the meta device (a torchvision name at 224 x 224; unknown for others).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MB = 1 << 20


def model_bytes(model) -> int:
    """The parameters and buffers of a loaded model."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def spec_weights_bytes(spec) -> int | None:
    """What a ModelSpec's weights will take once loaded, before loading it: its weights file's
    size, else a torchvision model built on the meta device; None when it cannot be told."""
    weights = spec.checkpoint or spec.pickle
    if weights:
        try:
            return Path(weights).stat().st_size
        except OSError:
            return None
    if not spec.name or spec.factory:
        return None
    try:
        import torch
        import torchvision

        with torch.device("meta"):
            model = torchvision.models.get_model(spec.name, weights=None)
        return model_bytes(model)
    except Exception:  # noqa: BLE001 - not a torchvision name (a family's own): unknown
        return None


def output_sizes(tree) -> list[int]:
    """The per-image sizes of a probed tree's module outputs."""
    return [_numel(info.output_shape) for info in tree.modules.values() if info.output_shape]


def batch_bytes(batch: int, sizes_a: Sequence[int], layers_a: int, sizes_b: Sequence[int] = (),
                layers_b: int = 0) -> int:
    """About what one batch of `batch` images adds: the larger of the two forwards' three
    largest outputs (float32; no-grad forwards hold a few at a time, and the models run one
    after the other) and both sides' Gram matrices (float64, a few copies; `layers_b` 0 when
    B is A itself and the Grams are shared)."""
    peak = max(sum(sorted(s, reverse=True)[:3]) for s in (sizes_a, sizes_b))
    return 4 * batch * peak + 3 * 8 * (layers_a + layers_b) * batch * batch


def spec_output_sizes(spec, side: int = 224) -> list[int] | None:
    """The per-image output sizes of a torchvision model's leaf modules on a side x side
    input, from a forward on the meta device (shapes only, nothing allocated); None when the
    spec is not a torchvision name or its forward does not run there."""
    if not spec.name or spec.factory:
        return None
    try:
        import torch
        import torchvision

        with torch.device("meta"):
            model = torchvision.models.get_model(spec.name, weights=None).eval()
        sizes: list[int] = []

        def record(_module, _inputs, output) -> None:
            if isinstance(output, torch.Tensor) and output.dim() > 0:
                sizes.append(output[0].numel())

        for module in model.modules():
            if not any(True for _ in module.children()):
                module.register_forward_hook(record)  # the model is thrown away after
        with torch.no_grad():
            model(torch.empty(1, 3, side, side, device="meta"))
        return sizes
    except Exception:  # noqa: BLE001 - not a torchvision name, or no meta forward: unknown
        return None


def _numel(shape) -> int:
    n = 1
    for s in shape[1:]:  # the probe ran a batch of one
        n *= int(s)
    return n


def available_bytes() -> int | None:
    """The memory the system can give without swapping (Linux MemAvailable), else None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class MemoryCost:
    """The estimate, in bytes (None: unknown)."""

    weights_a: int
    weights_b: int | None
    batch: int  # both models' part of a batch, or A's alone where B's is unknown
    available: int | None
    batch_b_known: bool = True

    @property
    def total(self) -> int | None:
        if self.weights_b is None or not self.batch_b_known:
            return None
        return self.weights_a + self.weights_b + self.batch

    @property
    def fits(self) -> bool | None:
        """Whether both models and a batch fit in what is free now (None: unknown)."""
        if self.total is None or self.available is None:
            return None
        return self.total < self.available

    def describe(self, name_b: str, batch_size: int) -> str:
        b = ("weights of a size unknown until it loads" if self.weights_b is None
             else f"{_mb(self.weights_b)} of weights")
        text = (f"Model B ({name_b}): {b}; a copy of model A: "
                f"{_mb(self.weights_a)}; a batch of {batch_size} images adds about "
                f"{_mb(self.batch)} while it runs"
                + ("." if self.batch_b_known else
                   " for model A, plus model B's part, unknown until B loads."))
        if self.available is not None:
            text += f" Free now: {_mb(self.available)}."
        if self.fits is False:
            text += " That is more than is free: choose a smaller batch, or close other programs."
        return text


def _mb(n: int) -> str:
    return f"{n / MB:,.0f} MB" if n >= MB else f"{n / 1024:,.0f} KB"
