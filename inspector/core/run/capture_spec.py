"""What to capture in a run: which modules, which hook kinds, what to keep or preview."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from torch import nn

from inspector.core.records.kinds import GRADIENT_KINDS, KINDS, OUTPUT
from inspector.core.stats.previews import PREVIEW_ELEMENTS, PREVIEW_SIZE


@dataclass(frozen=True)
class CaptureSpec:
    """What to capture in a run.

    modules: module name -> the kinds to capture there (subset of frames.KINDS).
    preview: modules whose tensors also get a small array for display.
    keep: modules whose output and output gradient are kept (detached device copies) in
          `Capture.kept` after the run: what a CAM method needs.
    full: modules whose whole tensors travel in the frames (export).
    preview_channels, preview_size, preview_elements: how previews are reduced (see
          core.stats.previews): the first `preview_channels` channels (None: all of them), each
          averaged down to a side of at most `preview_size` so that all hold about
          `preview_elements` values.
    """

    modules: Mapping[str, frozenset[str]] = field(default_factory=dict)
    preview: frozenset[str] = frozenset()
    keep: frozenset[str] = frozenset()
    full: frozenset[str] = frozenset()
    preview_channels: int | None = None
    preview_size: int = PREVIEW_SIZE
    preview_elements: int = PREVIEW_ELEMENTS
    stats: bool = True

    def __post_init__(self) -> None:
        mods = {name: frozenset(kinds) for name, kinds in dict(self.modules).items()}
        for name, kinds in mods.items():
            unknown = kinds - set(KINDS)
            if unknown:
                raise ValueError(f"unknown capture kind(s) {sorted(unknown)} for '{name}'")
        object.__setattr__(self, "modules", mods)
        for attr in ("preview", "keep", "full"):
            object.__setattr__(self, attr, frozenset(getattr(self, attr)))

    @classmethod
    def for_modules(
        cls, names: Iterable[str], kinds: Iterable[str] = (OUTPUT,), **kw: Any
    ) -> CaptureSpec:
        kinds = frozenset(kinds)
        return cls(modules={n: kinds for n in names}, **kw)

    @classmethod
    def leaves(cls, model: nn.Module, kinds: Iterable[str] = (OUTPUT,), **kw: Any) -> CaptureSpec:
        """Every leaf module (no children) with the given kinds."""
        return cls.for_modules(leaf_names(model), kinds, **kw)

    def kinds_for(self, name: str) -> frozenset[str]:
        return self.modules.get(name, frozenset())

    @property
    def needs_grad(self) -> bool:
        return bool(self.keep) or self.captures_gradients

    @property
    def captures_gradients(self) -> bool:
        """Whether a module's gradient (input or output) is asked for: a backward pass down
        to the model input then, since any captured module may lie anywhere on the way."""
        gradients = frozenset(GRADIENT_KINDS)
        return any(k & gradients for k in self.modules.values())

    def without_gradients(self) -> CaptureSpec:
        """The same capture with no gradient kinds (a run that computes no gradients)."""
        gradients = frozenset(GRADIENT_KINDS)
        kept = {n: k - gradients for n, k in self.modules.items()}
        return replace(self, modules={n: k for n, k in kept.items() if k})

    def names(self) -> set[str]:
        return set(self.modules) | set(self.preview) | set(self.keep) | set(self.full)

    def with_(self, **changes: Any) -> CaptureSpec:
        return replace(self, **changes)


def leaf_names(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if n and next(m.children(), None) is None]
