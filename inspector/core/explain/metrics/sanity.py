"""The model-randomisation sanity check (Adebayo et al. 2018): the map made again as the
model's weights are randomised, from the top down, cumulatively; a map that stays the same
while the weights it claims to explain are destroyed explains nothing.

Everything happens on a deep copy of the model: the loaded model, its modes, its hooks and
torch's global random state are left as they were.

Units, the steps of the cascade: the model's children that hold parameters, in forward
order (the module tree's, else their registration order); a unit holding more than half of
the model's parameters is split into its children, again until none does (so that no step
destroys most of the model at once); parameters a split module holds itself (a class
token) form a unit of their own, before its children. At most MAX_STEPS units: the lowest
ones are merged into the last. The cascade randomises the top unit, then the next one too,
and so on down to the first.

Randomising a unit re-draws every parameter in it: by its module's own reset_parameters
where it has one (PyTorch's initialisation; a BatchNorm also forgets its running
statistics), else from N(0, 0.02^2). Step k is seeded with seed + k, inside a forked RNG.

Reusing the forward: at a step whose lowest randomised unit lies in top-level child u, the
top-level children run before u (and before `replay_before`'s, the CAM layer's, since the
CAM's graph starts there) compute what they computed before: when the tree shows each was
called once and returned one tensor, and the model holds no parameter of its own, they are
replaced in the copy by Replay modules returning their cached outputs. Gradient
attributions need the graph down to the input and Score-CAM masks the input: the caller
passes replay_before=None for those.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from inspector.core.explain.metrics.similarity import spearman, ssim
from inspector.core.hookset import HookSet, ModelState
from inspector.core.models.tree import REUSED, TUPLE_OUTPUT

MAX_STEPS = 32
DRAW_STD = 0.02  # parameters of modules without reset_parameters


class CannotCopy(ValueError):
    """The model cannot be deep-copied: the sanity check, which randomises a copy, cannot run."""


@dataclass(frozen=True)
class SanityStep:
    layer: str  # the unit randomised at this step, with every unit above it
    spearman: float | None  # None: the new map is constant (no rank order)
    ssim: float


@dataclass(frozen=True)
class Unit:
    label: str
    parts: tuple[tuple[str, bool], ...]  # (module name, its own parameters only)

    @property
    def top_level(self) -> set[str]:
        return {name.split(".")[0] for name, _ in self.parts}


def _count(module: nn.Module, own: bool = False) -> int:
    return sum(p.numel() for p in module.parameters(recurse=not own))


def randomisation_units(model: nn.Module, tree=None, most: int = MAX_STEPS) -> list[Unit]:
    """The cascade's units, top (the output's side) first."""
    order = {name: i for i, name in enumerate(getattr(tree, "order", None) or ())}
    total = _count(model)

    def position(item: tuple[int, tuple[str, nn.Module]]):
        registered, (name, _) = item
        return (order.get(name, len(order)), registered)

    def expand(name: str, module: nn.Module) -> list[Unit]:
        kids = [(f"{name}.{n}" if name else n, m) for n, m in module.named_children()
                if _count(m)]
        if name and (not kids or _count(module) <= total / 2):
            return [Unit(name, ((name, False),))]
        units = [Unit(f"{name or '(model)'} (its own parameters)", ((name, True),))] \
            if _count(module, own=True) else []
        for _, (kid_name, kid) in sorted(enumerate(kids), key=position):
            units += expand(kid_name, kid)
        return units

    units = list(reversed(expand("", model)))
    if len(units) > most:
        rest = units[most - 1:]
        merged = tuple(part for unit in rest for part in unit.parts)
        units = [*units[: most - 1], Unit(f"{rest[0].label} and the {len(rest) - 1} units "
                                          f"below it", merged)]
    return units


def randomise(model: nn.Module, unit: Unit, seed: int) -> None:
    """Re-draw every parameter of `unit` in `model` (see the module docstring)."""
    cuda = sorted({p.device.index or 0 for p in model.parameters() if p.is_cuda})
    with torch.random.fork_rng(devices=cuda), torch.no_grad():
        torch.manual_seed(seed)
        for name, own in unit.parts:
            target = model.get_submodule(name) if name else model
            for module in ([target] if own else target.modules()):
                reset = getattr(module, "reset_parameters", None)
                if callable(reset) and not own:
                    reset()
                    continue
                for p in module.parameters(recurse=False):
                    p.normal_(0.0, DRAW_STD)


class Replay(nn.Module):
    """Stands in for a top-level child whose output cannot have changed: returns (a copy
    of) the output it gave for this input, whatever it is called with."""

    def __init__(self, output: torch.Tensor) -> None:
        super().__init__()
        self.output = output

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.output.clone()  # the next module may work in place


def _replayable(model: nn.Module, tree, before: str | None) -> list[str]:
    """The top-level children that may be replayed, in forward order (see the docstring)."""
    if tree is None or before is None or _count(model, own=True):
        return []
    stop = before.split(".")[0]
    order = [n for n in tree.order if n and "." not in n]
    if stop not in order:
        return []
    names = []
    for name in order[: order.index(stop)]:
        info = tree.modules.get(name)
        if info is None or len(info.calls) != 1 or info.hazards & {TUPLE_OUTPUT, REUSED}:
            break  # what comes after an unusual child is not replayed either
        names.append(name)
    return names


def _outputs(model: nn.Module, x: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """The outputs of the top-level children `names` for x, detached copies."""
    outputs: dict[str, torch.Tensor] = {}
    if not names:
        return outputs
    with HookSet() as hooks, torch.no_grad(), ModelState(model, training=False):
        for name in names:
            hooks.forward(model.get_submodule(name),
                          lambda _m, _a, out, name=name: outputs.__setitem__(
                              name, out.detach().clone()))
        model(x)
    return outputs


def sanity_check(model: nn.Module, x: torch.Tensor,
                 explain: Callable[[nn.Module], Mapping[Any, np.ndarray]],
                 originals: Mapping[Any, np.ndarray], *, tree=None, seed: int = 0,
                 replay_before: str | None = None,
                 wrap: Callable[[nn.Module], AbstractContextManager] | None = None,
                 advance: Callable[[int], None] | None = None,
                 units: list[Unit] | None = None) -> dict[Any, list[SanityStep]]:
    """Per map key, one SanityStep per unit, top down: the map `explain(copy)` makes once
    that unit and those above it are random, against `originals` (the maps of the model as
    it is), both (H, W) in [0, 1]. `wrap(copy)` is entered around the cascade (the run's
    edits on the copy); `advance(n)` is told of each step's n maps (progress, cancel)."""
    try:
        twin = copy.deepcopy(model)
    except Exception as e:  # noqa: BLE001 - a model deepcopy cannot copy
        raise CannotCopy(f"the sanity check randomises a copy of the model, and this model "
                         f"cannot be copied ({type(e).__name__}: {e})") from e
    units = units if units is not None else randomisation_units(model, tree)
    steps: dict[Any, list[SanityStep]] = {key: [] for key in originals}
    with wrap(twin) if wrap is not None else nullcontext():
        replayable = _replayable(twin, tree, replay_before)
        cached = _outputs(twin, x, replayable)
        real = {name: twin.get_submodule(name) for name in replayable}
        for k, unit in enumerate(units):
            for name, child in real.items():
                setattr(twin, name, child)
            randomise(twin, unit, seed + k)
            # The children replayed come before the earliest one randomised so far: this
            # unit's (those above it run later). A child not replayable runs after them all.
            lowest = min((replayable.index(t) for t in unit.top_level if t in replayable),
                         default=len(replayable))
            for name in replayable[:lowest]:
                setattr(twin, name, Replay(cached[name]))
            maps = explain(twin)
            for key, original in originals.items():
                steps[key].append(SanityStep(unit.label, spearman(original, maps[key]),
                                             ssim(original, maps[key], 1.0)))
            if advance is not None:
                advance(len(originals))
    return steps


def flagged(steps: list[SanityStep], threshold: float) -> bool:
    """Whether the map still ranks the pixels as the original did with every unit random
    (Spearman at least `threshold`; a map that turned into its opposite has changed)."""
    last = steps[-1].spearman if steps else None
    return last is not None and last >= threshold
