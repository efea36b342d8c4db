"""How big a tensor's preview is: every channel, each averaged down until all fit a budget.

A preview is what a frame carries for display (stats.preview computes it in the hook). Of
a (C, H, W) output it keeps every channel, so the window can page through all of them, and
shrinks each channel's picture by averaging f x f cells until C pictures hold at most
`elements` values (a side of at most `size`). The budget is what the old cap of 64 channels
of 64 x 64 cost, so frames grow no larger than before: resnet50's layer1 (256 x 56 x 56)
comes as 256 x 28 x 28 (784 KiB), its layer4 (2048 x 7 x 7) whole (392 KiB). Past
`elements / MIN_SIDE**2` channels (16384) a picture keeps MIN_SIDE x MIN_SIDE and the
budget gives way: every channel stays reachable. A channels-last (H, W, C) output is
previewed as the (C, H, W) it stands for (core.run.capture reads it so; the frame says so).

No torch here: the window estimates what previews cost before the engine has loaded
(ui.run.capture_choice).
"""

from __future__ import annotations

import math

PREVIEW_SIZE = 64  # the longest side of one channel's picture
PREVIEW_ELEMENTS = 64 * 64 * 64  # values in one (C, H, W) preview, about (1 MiB of float32)
MIN_SIDE = 4  # a channel's picture is never averaged below this (unless it is smaller)


def pool_factor(channels: int, height: int, width: int, size: int = PREVIEW_SIZE,
                elements: int = PREVIEW_ELEMENTS) -> int:
    """f: each channel is shown as means of f x f cells (1: as it is). The smallest whole
    f for which one side is at most `side` (one f for both: the picture keeps its aspect)."""
    side = min(size, max(MIN_SIDE, math.isqrt(elements // max(channels, 1))))
    if height <= side and width <= side:
        return 1
    return max(-(-height // side), -(-width // side))


def preview_shape(shape: tuple[int, ...], size: int = PREVIEW_SIZE,
                  elements: int = PREVIEW_ELEMENTS,
                  channels: int | None = None) -> tuple[int, ...]:
    """The shape of the preview of a (C, H, W) item (no batch dimension); other ranks as
    they are (stats.preview reduces tokens and long vectors on rules of its own).
    `channels`: keep only the first so many (None: all)."""
    if len(shape) != 3:
        return tuple(shape)
    c, h, w = shape
    if channels is not None:
        c = min(c, channels)
    f = pool_factor(c, h, w, size, elements)
    return (c, -(-h // f), -(-w // f))
