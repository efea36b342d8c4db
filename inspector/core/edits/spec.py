"""Edits written as text, `MODULE:OP[=ARGS]`, as `analyse --edit` takes them.

    layer4.1.conv2:zero=3,17     zero output channels 3 and 17
    layer4:keep=3                zero every channel but 3
    layer4:scale=0.5             scale the whole output; scale=0.5,3,17: only channels 3, 17
    layer4:clamp=-1,1            clamp (an empty side is open: clamp=0,)
    layer4:noise=0.1,7           add Gaussian noise, std 0.1, seed 7 (no seed: a new draw a run)
    layer4:mean                  replace the output by its mean over positions
    layer4:grad-scale=0.5        multiply the gradient flowing back into layer4's output
    layer4:project=0.1;0.7;...   remove a direction of the channel space (a concept): one
                                 value per channel, separated by ';'
    input:occlude=10,20,60,80    fill input pixels x 10..60, y 20..80 (x1, y1 exclusive)
    :occlude=10,20,60,80         the same (an empty MODULE is the model itself)
    layer3:patch=other.png       replace layer3's output by its output on other.png
                                 (activation patching; core.edits.patching)

`parse_edit` reads one spec without a model (a wrong spec is refused before anything
loads); `check_edits` then checks the edits against the loaded model's module tree (what its
probe forward recorded), before any image is read, and fills in what only the model tells:
the channel dimension of channels-last outputs. `format_edit` writes an edit back as a spec.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from inspector.core.edits.interventions import (
    AddNoise,
    Clamp,
    Intervention,
    KeepChannels,
    Occlude,
    ProjectOut,
    ReplaceWithMean,
    ScaleChannels,
    ScaleGradient,
    ZeroChannels,
    channel_dim,
    check_channels,
)
from inspector.core.edits.patching import PatchFrom, ReplaceOutput
from inspector.core.models.tree import NEVER_CALLED, TUPLE_OUTPUT, ModuleTree
from inspector.core.tokens import NHWC, detect_layout

INPUT_NAMES = ("", "input")  # what MODULE may be for occlude: the model input
SYNTAX = "MODULE:OP[=ARGS]"


class EditSpecError(ValueError):
    """A spec that cannot be read, or an edit the model cannot take; one line, naming it."""


# -- reading ----------------------------------------------------------------------------------


def _ints(text: str, what: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"{what} must be whole numbers, got '{part}'") from None
        out.append(value)
    return out


def _float(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{what} must be a number, got '{text.strip()}'") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got '{text.strip()}'")
    return value


def _channels(text: str) -> tuple[int, ...]:
    if not text.strip():
        raise ValueError("name at least one channel")
    channels = _ints(text, "channels")
    negative = [c for c in channels if c < 0]
    if negative:
        raise ValueError(f"channels count from 0, got {negative}")
    return tuple(dict.fromkeys(channels))  # a channel named twice is edited once


def _args(args: str | None, op: str, usage: str) -> str:
    if args is None or not args.strip():
        raise ValueError(f"{op} needs arguments: {usage}")
    return args


def _zero(module, args):
    return ZeroChannels(module, channels=_channels(_args(args, "zero", "zero=3,17")))


def _keep(module, args):
    return KeepChannels(module, channels=_channels(_args(args, "keep", "keep=3")))


def _scale(module, args):
    factor, _, channels = _args(args, "scale", "scale=0.5 or scale=0.5,3,17").partition(",")
    return ScaleChannels(module, channels=_channels(channels) if channels else (),
                         factor=_float(factor, "the factor"))


def _clamp(module, args):
    parts = _args(args, "clamp", "clamp=-1,1 (clamp=0, for no upper bound)").split(",")
    if len(parts) != 2:
        raise ValueError("clamp takes MIN,MAX (leave one side empty for no bound)")
    lo, hi = (None if not p.strip() else _float(p, "a bound") for p in parts)
    if lo is None and hi is None:
        raise ValueError("clamp needs at least one bound")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"clamp's minimum {lo:g} is above its maximum {hi:g}")
    return Clamp(module, min=lo, max=hi)


def _noise(module, args):
    parts = _args(args, "noise", "noise=STD or noise=STD,SEED").split(",")
    if len(parts) > 2:
        raise ValueError("noise takes STD[,SEED]")
    std = _float(parts[0], "the standard deviation")
    if std < 0:
        raise ValueError(f"the standard deviation cannot be negative, got {std:g}")
    seed = _ints(parts[1], "the seed")[0] if len(parts) == 2 else None
    return AddNoise(module, std=std, seed=seed)


def _mean(module, args):
    if args is not None:
        raise ValueError("mean takes no arguments")
    return ReplaceWithMean(module)


def _grad_scale(module, args):
    return ScaleGradient(module, factor=_float(_args(args, "grad-scale", "grad-scale=0.5"),
                                               "the factor"))


def _occlude(module, args):
    if module not in INPUT_NAMES:
        raise ValueError(f"occlude edits the model input: write input:occlude=... or "
                         f":occlude=..., not {module}:occlude")
    parts = _args(args, "occlude", "occlude=X0,Y0,X1,Y1").split(",")
    if len(parts) not in (4, 5):
        raise ValueError("occlude takes X0,Y0,X1,Y1 (input pixels; x1, y1 exclusive) and "
                         "optionally the fill value")
    x0, y0, x1, y1 = _ints(",".join(parts[:4]), "the box's corners")
    if not (0 <= x0 < x1 and 0 <= y0 < y1):
        raise ValueError(f"the box {[x0, y0, x1, y1]} is empty or negative: need "
                         f"0 <= X0 < X1 and 0 <= Y0 < Y1")
    value = _float(parts[4], "the fill value") if len(parts) == 5 else 0.0
    return Occlude("", box=(x0, y0, x1, y1), value=value)


def _patch(module, args):
    source = _args(args, "patch", "patch=IMAGE (the image whose output replaces this run's)")
    return PatchFrom(module, source=source.strip())


def _project(module, args):
    text = _args(args, "project", "one value per channel, separated by ';'")
    vector = tuple(_float(v, "a direction's value") for v in text.split(";"))
    if not any(vector):
        raise ValueError("a direction of zeros removes nothing")
    return ProjectOut(module, vector)


OPS: dict[str, Callable[[str, str | None], Intervention]] = {
    "zero": _zero,
    "keep": _keep,
    "scale": _scale,
    "clamp": _clamp,
    "noise": _noise,
    "mean": _mean,
    "grad-scale": _grad_scale,
    "occlude": _occlude,
    "patch": _patch,
    "project": _project,
}


def _split(spec: str) -> tuple[str, str, str | None]:
    """(module, op, args or None), splitting at the last ':' that a known op follows: module
    names may hold dots (and, rarely, colons), op names never hold a ':'."""
    pos = len(spec)
    while (pos := spec.rfind(":", 0, pos)) >= 0:
        op, eq, args = spec[pos + 1:].partition("=")
        if op.strip() in OPS:
            return spec[:pos].strip(), op.strip(), args if eq else None
    if ":" not in spec:
        raise ValueError(f"expected {SYNTAX}")
    tail = spec.rsplit(":", 1)[1].partition("=")[0].strip()
    close = difflib.get_close_matches(tail, list(OPS), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ValueError(f"unknown operation '{tail}'{hint}; one of {', '.join(OPS)}")


def parse_edit(spec: str) -> Intervention:
    """The intervention a `MODULE:OP[=ARGS]` spec names; EditSpecError saying what is wrong.

    Nothing is checked against a model here (see check_edits). `input` and an empty MODULE
    name the model input for occlude; for the other ops an empty MODULE is the model itself
    (its output: the logits).
    """
    try:
        module, op, args = _split(spec.strip())
        return OPS[op](module, args)
    except ValueError as e:
        raise EditSpecError(f"bad edit '{spec}': {e}") from None


# -- writing ----------------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:g}" if float(x) == float(f"{x:g}") else repr(float(x))


def format_edit(edit: Intervention) -> str:
    """The spec that parse_edit reads back as `edit` (its `dim`, which check_edits fills in
    from the model, aside): for summaries, the window's edit list, scripts."""
    m = edit.module
    chans = ",".join(str(c) for c in getattr(edit, "channels", ()))
    if isinstance(edit, ZeroChannels):
        return f"{m}:zero={chans}"
    if isinstance(edit, KeepChannels):
        return f"{m}:keep={chans}"
    if isinstance(edit, ScaleChannels):
        return f"{m}:scale={_num(edit.factor)}" + (f",{chans}" if chans else "")
    if isinstance(edit, Clamp):
        lo = "" if edit.min is None else _num(edit.min)
        hi = "" if edit.max is None else _num(edit.max)
        return f"{m}:clamp={lo},{hi}"
    if isinstance(edit, AddNoise):
        seed = "" if edit.seed is None else f",{edit.seed}"
        return f"{m}:noise={_num(edit.std)}{seed}"
    if isinstance(edit, ReplaceWithMean):
        return f"{m}:mean"
    if isinstance(edit, ScaleGradient):
        return f"{m}:grad-scale={_num(edit.factor)}"
    if isinstance(edit, ProjectOut):
        return f"{m}:project=" + ";".join(_num(v) for v in edit.vector)
    if isinstance(edit, Occlude):
        box = ",".join(str(v) for v in edit.box)
        value = f",{_num(edit.value)}" if edit.value else ""
        return f"input:occlude={box}{value}"
    if isinstance(edit, (PatchFrom, ReplaceOutput)):
        return f"{m}:patch={edit.source}"
    raise TypeError(f"no spec for {type(edit).__name__}")


# -- checking against a model -------------------------------------------------------------------

# Edits whose `channels` or `dim` read the channel dimension of the module's output.
_CHANNEL_EDITS = (ZeroChannels, KeepChannels, ScaleChannels, ReplaceWithMean, ProjectOut)


def _uses_channels(edit: Intervention) -> bool:
    if isinstance(edit, ScaleChannels):
        return bool(edit.channels)
    return isinstance(edit, _CHANNEL_EDITS)


def check_edits(
    edits: Iterable[Intervention], tree: ModuleTree, input_size: Sequence[int] | None
) -> tuple[Intervention, ...]:
    """The edits, checked against the model whose probe built `tree` (input_size: the model
    input's (H, W)), with `dim=-1` filled in for channel edits of channels-last (B, H, W, C)
    outputs. Raises EditSpecError naming the first edit that cannot work: an unknown module
    (with close names), a module whose output is not one tensor or that never runs, a channel
    out of range, a channel edit on an output without channels, an occlusion box outside
    the input."""
    hw = tuple(input_size) if input_size is not None else None
    return tuple(_check(edit, tree, hw) for edit in edits)


def _check(edit: Intervention, tree: ModuleTree, hw: tuple[int, ...] | None) -> Intervention:
    def refuse(why: str) -> EditSpecError:
        return EditSpecError(f"edit '{format_edit(edit)}': {why}")

    if isinstance(edit, Occlude):
        if hw is not None:
            h, w = hw
            x0, y0, x1, y1 = edit.box
            if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
                raise refuse(f"the box {list(edit.box)} is not inside the model input of "
                             f"{w} x {h} pixels (x1, y1 at most {w}, {h})")
        return edit
    if edit.module not in tree:
        close = difflib.get_close_matches(edit.module, [n for n in tree.modules if n], n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise refuse(f"no module named '{edit.module}' in this model{hint}; see "
                     f"`network-inspector tree`")
    info = tree[edit.module]
    where = f"'{edit.module}'" if edit.module else "the model's output"
    if NEVER_CALLED in info.hazards:
        raise refuse(f"{where} is never called in a forward, so nothing would change")
    if TUPLE_OUTPUT in info.hazards:
        raise refuse(f"{where} returns a tuple, list or dict: edits need one output tensor")
    if isinstance(edit, PatchFrom):
        if not os.path.isfile(edit.source):
            raise refuse(f"{edit.source}: no such file")
        from inspector.core.inputs.images import ImageLoadError, check_image

        try:  # its header: cheap on the GUI thread, and every run that patches would fail
            check_image(edit.source)
        except ImageLoadError as e:
            raise refuse(str(e)) from None
    shape = info.output_shape
    if not _uses_channels(edit):
        return edit
    if shape is None:
        raise refuse(f"{where} has no tensor output")
    dim = edit.dim
    layout = detect_layout(shape, hw) if dim is None and len(shape) == 4 else None
    if layout is not None and layout.kind == NHWC:
        dim = -1  # channels last: the shape alone says dim 1, the layout says otherwise
    try:
        channel_dim(shape, dim)
        if isinstance(edit, ProjectOut):
            n = shape[channel_dim(shape, dim)]
            if n != len(edit.vector):
                raise ValueError(f"the direction has {len(edit.vector)} values for {n} "
                                 f"channels")
        elif not isinstance(edit, ReplaceWithMean):
            check_channels(shape, edit.channels, dim)
    except ValueError as e:
        raise refuse(f"{where} outputs {list(shape)}: {e}") from None
    return edit if dim == edit.dim else replace(edit, dim=dim)
