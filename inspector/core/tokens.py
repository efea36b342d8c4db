"""Turn a layer's output into a spatial (B, C, h, w) map, whatever layout the model uses.

CAM methods and activation mosaics need channels on dim 1 and a 2-D grid after it. Models
give their layers' outputs in three layouts:
- (B, C, h, w): convolutions (channels first, PyTorch's default);
- (B, h, w, C): channels last, as in torchvision's Swin and ConvNeXt blocks;
- (B, N, D) tokens, as in ViT: N = extra tokens (class, distillation, registers: always
  first) + a patch grid of gh * gw tokens; also sequence-first (N, B, D).

Which layout a tensor has is inferred from its shape and the model input's size: a patch
grid covers the input with the same stride along both axes (224 x 224 with 14 x 14 patches:
16 and 16), so the candidate whose strides agree best wins. No model needs a hand-written
reshape function, and a shape that fits none of these is reported, not guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

NCHW = "nchw"
NHWC = "nhwc"
TOKENS = "tokens"

# Extra tokens looked for before the patch grid: class + distillation + up to 4 registers
# (DINOv2 with registers has 1 + 4) leaves margin.
MAX_EXTRA_TOKENS = 8
# A grid covers the input with (nearly) the same stride along both axes: a patch size, or a
# CNN's downsampling factor. Padding and odd sizes make them differ a little (a 10 x 13 grid
# over 300 x 400: 30 and 30.8), a layout read the wrong way round by much more.
MAX_STRIDE_RATIO = 1.3
STRIDE_SLACK = 1.0  # pixels, or 10% of the stride when that is more


@dataclass(frozen=True)
class Layout:
    """How to read a tensor as (B, C, h, w)."""

    kind: str  # NCHW, NHWC or TOKENS
    grid: tuple[int, int]  # (h, w)
    extra: int = 0  # TOKENS: leading tokens dropped (class, registers)
    seq_first: bool = False  # TOKENS: (N, B, D) rather than (B, N, D)


def _mismatch(grid: tuple[int, int], input_hw: tuple[int, int] | None) -> float | None:
    """How far the grid's strides over the input are from equal (0 = equal); None: too far."""
    gh, gw = grid
    if gh < 1 or gw < 1:
        return None
    if input_hw is None:
        mismatch = abs(math.log(gh / gw))  # no input size: trust only near-square grids
    else:
        h, w = input_hw
        if gh > h or gw > w:
            return None  # a grid finer than the input is not a downsampled image
        sh, sw = h / gh, w / gw
        if abs(sh - sw) > max(STRIDE_SLACK, 0.1 * max(sh, sw)):
            return None
        mismatch = abs(math.log(sh / sw))
    return mismatch if mismatch <= math.log(MAX_STRIDE_RATIO) else None


def _whole_strides(grid: tuple[int, int], input_hw: tuple[int, int] | None) -> bool:
    """Whether the input's size over the grid's is a whole number along both axes (within
    a pixel's rounding: a convolution's output of an odd size)."""
    if input_hw is None:
        return False
    strides = (input_hw[0] / grid[0], input_hw[1] / grid[1])
    return all(s >= 1 and abs(s - round(s)) <= max(0.05, 0.02 * s) for s in strides)


def token_grid(
    n_tokens: int, input_hw: tuple[int, int] | None, max_extra: int = MAX_EXTRA_TOKENS
) -> tuple[int, tuple[int, int]] | None:
    """(extra tokens, (gh, gw)) for a sequence of n_tokens, or None when no grid fits.

    The grid whose strides agree best wins, then the fewest extra tokens: 197 = 1 + 14 x 14.
    """
    best: tuple[float, int, tuple[int, int]] | None = None
    for extra in range(0, min(max_extra, n_tokens - 2) + 1):
        n = n_tokens - extra
        for gh in range(1, math.isqrt(n) + 1):
            if n % gh:
                continue
            for grid in ((gh, n // gh), (n // gh, gh)):
                m = _mismatch(grid, input_hw)
                if m is not None and (best is None or (m, extra) < best[:2]):
                    best = (m, extra, grid)
    return None if best is None else (best[1], best[2])


def detect_layout(
    shape: tuple[int, ...], input_hw: tuple[int, int] | None, batch_size: int | None = None
) -> Layout | None:
    """The layout of a tensor of `shape` in a model whose input is input_hw; None: not spatial."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 4:
        _, a, b, c = shape
        first = _mismatch((b, c), input_hw)
        last = _mismatch((a, b), input_hw)
        if first is None and last is None:
            return None
        # Equal fits (a 7 x 7 x 7 tensor) stay channels-first, PyTorch's own convention;
        # so does a channels-first reading whose strides are whole numbers, as a
        # convolution's are: a (1, 96, 128, 170) map of a 512 x 683 input is 96 channels at
        # stride 4, though 96 x 128 strides (5.33, 5.34) agree a little better.
        if last is not None and (first is None or last < first) \
                and not (first is not None and _whole_strides((b, c), input_hw)):
            return Layout(NHWC, (a, b))
        return Layout(NCHW, (b, c))
    if len(shape) == 3:
        seq_first = batch_size is not None and shape[0] != batch_size and shape[1] == batch_size
        n = shape[0] if seq_first else shape[1]
        found = token_grid(n, input_hw)
        if found is None:
            return None
        extra, grid = found
        return Layout(TOKENS, grid, extra, seq_first)
    return None


def to_spatial(t: torch.Tensor, layout: Layout) -> torch.Tensor:
    """(B, C, h, w) view or copy of t read with `layout`."""
    if layout.kind == NCHW:
        return t
    if layout.kind == NHWC:
        return t.permute(0, 3, 1, 2)
    if layout.seq_first:
        t = t.transpose(0, 1)
    b, _, d = t.shape
    gh, gw = layout.grid
    return t[:, layout.extra :].reshape(b, gh, gw, d).permute(0, 3, 1, 2)


def spatialize(
    t: torch.Tensor, input_hw: tuple[int, int] | None, name: str = "", batch_size: int | None = None
) -> tuple[torch.Tensor, Layout]:
    """(B, C, h, w) for t and the layout read; ValueError naming the module when there is none."""
    layout = detect_layout(tuple(t.shape), input_hw, batch_size)
    if layout is None:
        where = f"'{name}' " if name else ""
        raise ValueError(
            f"the output of {where}has shape {list(t.shape)}, which is not a spatial map "
            f"(B, C, h, w), a channels-last (B, h, w, C) map or a (B, tokens, D) patch grid "
            f"for an input of {input_hw}: choose another layer"
        )
    return to_spatial(t, layout), layout


def is_channels_last(shape: tuple[int, ...], input_hw: tuple[int, int] | None) -> bool:
    """Whether a 4-D tensor of `shape` is a channels-last (B, h, w, C) map for an input of
    input_hw. Without the input's size, no: a (1, 32, 30, 40) map of a 240 x 320 image would
    read as a 32 x 30 grid of 40 channels, and channels first is PyTorch's default."""
    if len(shape) != 4 or input_hw is None:
        return False
    layout = detect_layout(shape, input_hw)
    return layout is not None and layout.kind == NHWC


def image_size(value: object) -> tuple[int, int] | None:
    """(H, W) of the first image in a model's arguments: the last two dims of the first
    floating-point tensor of 3 or more dims, looked for in nested tuples, lists and dicts
    (a (B, 3, H, W) batch, a detection model's list of (3, H, W) images, HF's
    pixel_values=...); None when there is none."""
    if isinstance(value, torch.Tensor):
        if value.ndim >= 3 and value.is_floating_point():
            return int(value.shape[-2]), int(value.shape[-1])
        return None
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, (tuple, list, dict)):
        for item in items:
            found = image_size(item)
            if found is not None:
                return found
    return None
