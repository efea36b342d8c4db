"""Interventions: edit what flows through a module, for one run.

Each intervention is a small frozen record that knows how to change a module's output (a
forward hook returning a new output) or the gradient that flows back into it (a tensor hook
returning a new gradient). `hooks.Capture` installs them for a run and removes them with
every other handle, so nothing is left on the model afterwards.

Outputs are never edited in place: the hook returns a new tensor, so a reference that
another hook or the module kept to the original stays what it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Intervention:
    module: str  # qualified name as in model.named_modules(); "" is the model itself

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def edit_input(self, x: torch.Tensor, run_id: int) -> torch.Tensor | None:
        """A new first input for the module (a forward pre-hook), or None to leave it."""
        return None

    def edit_output(self, output: torch.Tensor, run_id: int) -> torch.Tensor | None:
        """A new output, or None to leave it."""
        return None

    def edit_gradient(self, grad: torch.Tensor) -> torch.Tensor | None:
        """A new gradient for the module's output, or None to leave it."""
        return None

    @property
    def where(self) -> str:
        """The module in words, for descriptions: "" is the model's own output."""
        return self.module or "the model output"

    @property
    def edits_input(self) -> bool:
        return type(self).edit_input is not Intervention.edit_input

    @property
    def edits_gradient(self) -> bool:
        return type(self).edit_gradient is not Intervention.edit_gradient


def channel_dim(shape: Sequence[int], dim: int | None = None) -> int:
    """The channel dimension of an output of this shape, as a non-negative index.

    `dim` when given (a channels-last (B, H, W, C) output names -1: its shape alone does not
    say so; the UI and the CLI fill it from the layout core.tokens detected). Otherwise dim 1
    for (B, C) and (B, C, H, W), the last dim for (B, T, C) token outputs.
    """
    ndim = len(shape)
    if ndim < 2:
        raise ValueError(f"output of shape {tuple(shape)} has no channel dimension")
    if dim is None:
        dim = -1 if ndim == 3 else 1
    if not -ndim <= dim < ndim or dim % ndim == 0:
        raise ValueError(f"dim {dim} is not a channel dimension of shape {tuple(shape)}")
    return dim % ndim


def check_channels(shape: Sequence[int], channels: Sequence[int], dim: int | None = None) -> None:
    """Raise ValueError naming the channels that an output of this shape does not have."""
    d = channel_dim(shape, dim)
    bad = [c for c in channels if not 0 <= c < shape[d]]
    if bad:
        raise ValueError(f"channels {bad} out of range: the output has {shape[d]} channels "
                         f"(0..{shape[d] - 1}) on dim {d}")


def _channel_mask(
    x: torch.Tensor, channels: Sequence[int], value: float, dim: int | None, keep: bool = False
) -> torch.Tensor:
    """A mask broadcasting over `x`: `value` at `channels` (or, with keep, everywhere else),
    1 elsewhere."""
    d = channel_dim(x.shape, dim)
    check_channels(x.shape, channels, dim)
    n = x.shape[d]
    if keep:
        mask = torch.full((n,), value, dtype=x.dtype, device=x.device)
        mask[list(channels)] = 1.0
    else:
        mask = torch.ones(n, dtype=x.dtype, device=x.device)
        mask[list(channels)] = value
    return mask.view([n if i == d else 1 for i in range(x.ndim)])


@dataclass(frozen=True)
class ZeroChannels(Intervention):
    channels: tuple[int, ...] = ()
    dim: int | None = None  # see channel_dim

    def describe(self) -> str:
        return f"zero channels {list(self.channels)} of {self.where}"

    def edit_output(self, output, run_id):
        return output * _channel_mask(output, self.channels, 0.0, self.dim)


@dataclass(frozen=True)
class KeepChannels(Intervention):
    """Zero every channel but these."""

    channels: tuple[int, ...] = ()
    dim: int | None = None

    def describe(self) -> str:
        return f"keep only channels {list(self.channels)} of {self.where}"

    def edit_output(self, output, run_id):
        return output * _channel_mask(output, self.channels, 0.0, self.dim, keep=True)


@dataclass(frozen=True)
class ScaleChannels(Intervention):
    """Multiply these channels (no channels: the whole output) by `factor`."""

    channels: tuple[int, ...] = ()
    factor: float = 1.0
    dim: int | None = None

    def describe(self) -> str:
        if not self.channels:
            return f"scale {self.where} by {self.factor:g}"
        return f"scale channels {list(self.channels)} of {self.where} by {self.factor:g}"

    def edit_output(self, output, run_id):
        if not self.channels:
            return output * self.factor
        return output * _channel_mask(output, self.channels, self.factor, self.dim)


@dataclass(frozen=True)
class Clamp(Intervention):
    min: float | None = None
    max: float | None = None

    def describe(self) -> str:
        if self.max is None:
            return f"clamp {self.where} to at least {self.min:g}"
        if self.min is None:
            return f"clamp {self.where} to at most {self.max:g}"
        return f"clamp {self.where} to [{self.min:g}, {self.max:g}]"

    def edit_output(self, output, run_id):
        return output.clamp(self.min, self.max)


@dataclass(frozen=True)
class AddNoise(Intervention):
    std: float = 0.1
    seed: int | None = None  # None: a different draw each run; else reproducible

    def describe(self) -> str:
        seed = "" if self.seed is None else f", seed {self.seed}"
        return f"add Gaussian noise (std {self.std:g}{seed}) to {self.where}"

    def edit_output(self, output, run_id):
        # Drawn on the CPU, so that a seed gives the same noise on every device.
        gen = torch.Generator()
        gen.manual_seed(self.seed if self.seed is not None else run_id)
        noise = torch.randn(output.shape, generator=gen, dtype=torch.float32)
        return output + (self.std * noise).to(device=output.device, dtype=output.dtype)


@dataclass(frozen=True)
class ReplaceWithMean(Intervention):
    """Each channel replaced by its mean over the positions (spatial or token) of each
    sample: what a channel says stays, where it says it goes. An output without positions
    (B, C) is replaced by its mean over the channels."""

    dim: int | None = None

    def describe(self) -> str:
        return f"replace {self.where} by its mean"

    def edit_output(self, output, run_id):
        d = channel_dim(output.shape, self.dim)
        positions = [i for i in range(1, output.ndim) if i != d] or [d]
        return output.mean(dim=positions, keepdim=True).expand_as(output)


@dataclass(frozen=True)
class ScaleGradient(Intervention):
    factor: float = 1.0

    def describe(self) -> str:
        return f"scale the gradient into {self.where} by {self.factor:g}"

    def edit_output(self, output, run_id):
        # The gradient hook goes on a copy, not on the module's own output: that tensor may
        # also be the output of modules inside this one (a Sequential returns its last
        # child's), whose capture hooks on it were registered first and so would see the
        # gradient before the scaling. Through the copy, every module upstream, inner ones
        # too, sees the scaled gradient.
        return output.clone() if output.requires_grad else None

    def edit_gradient(self, grad):
        return grad * self.factor


@dataclass(frozen=True)
class Occlude(Intervention):
    """Fill a rectangle of the model input (in input pixels, x0 y0 inclusive, x1 y1
    exclusive) with `value`: 0 is the data set's mean colour for a normalised input. A
    forward pre-hook on `module` ("" : the model itself)."""

    box: tuple[int, int, int, int] = (0, 0, 0, 0)
    value: float = 0.0

    def describe(self) -> str:
        x0, y0, x1, y1 = self.box
        return f"occlude input pixels x {x0}..{x1}, y {y0}..{y1}"

    def edit_input(self, x, run_id):
        if x.ndim != 4:
            raise ValueError(f"occlusion needs an image input (B, C, H, W), got {tuple(x.shape)}")
        x0, y0, x1, y1 = self.box
        h, w = x.shape[-2:]
        if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
            raise ValueError(f"occlusion box {list(self.box)} is not inside the {w} x {h} input")
        keep = torch.ones((1, 1, h, w), dtype=x.dtype, device=x.device)
        keep[..., y0:y1, x0:x1] = 0
        return x * keep + self.value * (1 - keep)


@dataclass(frozen=True)
class InterventionSet:
    """The interventions of one run, grouped by module (several may act on one module)."""

    items: tuple[Intervention, ...] = field(default_factory=tuple)

    def for_module(self, name: str) -> list[Intervention]:
        return [i for i in self.items if i.module == name]

    def modules(self) -> set[str]:
        return {i.module for i in self.items}

    def describe(self) -> tuple[str, ...]:
        return tuple(i.describe() for i in self.items)


@dataclass(frozen=True)
class ProjectOut(Intervention):
    """Remove a direction of the channel space (a concept: core.explain.concepts) from the
    output at every position: a <- a - (a . u) u, with u = vector / |vector|."""

    vector: tuple[float, ...] = ()
    dim: int | None = None  # see channel_dim
    # Which concept, for its description ("concept 3 of cat.png"): two removals of one
    # layer are told apart by it. Not part of what the edit does: equal edits stay equal.
    label: str = field(default="", compare=False)

    def describe(self) -> str:
        if self.label:
            return f"remove {self.label} ({len(self.vector)} channels) from {self.where}"
        return f"remove a {len(self.vector)}-channel concept direction from {self.where}"

    def edit_output(self, output, run_id):
        d = channel_dim(output.shape, self.dim)
        if output.shape[d] != len(self.vector):
            raise ValueError(f"a direction of {len(self.vector)} channels for an output of "
                             f"{output.shape[d]} channels on dim {d}")
        u = torch.tensor(self.vector, dtype=output.dtype, device=output.device)
        u = (u / u.norm().clamp(min=1e-12)).view([-1 if i == d else 1
                                                    for i in range(output.ndim)])
        return output - (output * u).sum(dim=d, keepdim=True) * u
