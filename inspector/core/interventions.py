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
    module: str

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def edit_output(self, output: torch.Tensor, run_id: int) -> torch.Tensor | None:
        """A new output, or None to leave it."""
        return None

    def edit_gradient(self, grad: torch.Tensor) -> torch.Tensor | None:
        """A new gradient for the module's output, or None to leave it."""
        return None

    @property
    def edits_gradient(self) -> bool:
        return type(self).edit_gradient is not Intervention.edit_gradient


def _channel_mask(x: torch.Tensor, channels: Sequence[int], value: float) -> torch.Tensor:
    if x.ndim < 2:
        raise ValueError(f"output of shape {tuple(x.shape)} has no channel dimension")
    bad = [c for c in channels if not -x.shape[1] <= c < x.shape[1]]
    if bad:
        raise ValueError(f"channels {bad} out of range for {x.shape[1]} channels")
    mask = torch.ones(x.shape[1], dtype=x.dtype, device=x.device)
    mask[list(channels)] = value
    return mask.view(1, -1, *([1] * (x.ndim - 2)))


@dataclass(frozen=True)
class ZeroChannels(Intervention):
    channels: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"zero channels {list(self.channels)} of {self.module}"

    def edit_output(self, output, run_id):
        return output * _channel_mask(output, self.channels, 0.0)


@dataclass(frozen=True)
class ScaleChannels(Intervention):
    channels: tuple[int, ...] = ()
    factor: float = 1.0

    def describe(self) -> str:
        return f"scale channels {list(self.channels)} of {self.module} by {self.factor:g}"

    def edit_output(self, output, run_id):
        return output * _channel_mask(output, self.channels, self.factor)


@dataclass(frozen=True)
class Clamp(Intervention):
    min: float | None = None
    max: float | None = None

    def describe(self) -> str:
        return f"clamp {self.module} to [{self.min}, {self.max}]"

    def edit_output(self, output, run_id):
        return output.clamp(self.min, self.max)


@dataclass(frozen=True)
class AddNoise(Intervention):
    std: float = 0.1
    seed: int | None = None  # None: a different draw each run; else reproducible

    def describe(self) -> str:
        return f"add Gaussian noise (std {self.std:g}) to {self.module}"

    def edit_output(self, output, run_id):
        gen = torch.Generator(device=output.device)
        gen.manual_seed(self.seed if self.seed is not None else run_id)
        noise = torch.randn(output.shape, generator=gen, device=output.device, dtype=output.dtype)
        return output + self.std * noise


@dataclass(frozen=True)
class ScaleGradient(Intervention):
    factor: float = 1.0

    def describe(self) -> str:
        return f"scale the gradient into {self.module} by {self.factor:g}"

    def edit_gradient(self, grad):
        return grad * self.factor


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
