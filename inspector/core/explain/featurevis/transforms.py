"""Lucid's standard transforms (lucid/optvis/transform.py standard_transforms), in its order:

    pad 12 with grey (0.5) -> jitter 8 -> scale by one of 0.90, 0.92 .. 1.10
    -> rotate by one of -10 .. 10 degrees (0 five times more often) -> jitter 4

Lucid resamples at each of these; here the chain is one affine map per image and one
bilinear resample (`F.affine_grid` + `F.grid_sample`) straight to the model input's size.
Beyond the grey pad the border is repeated (it is the same grey). Every step's draws come
from each image's own generator (`TransformDraws`), so an image's picture does not depend on
the other images of its batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

PAD = 12
JITTER_1, JITTER_2 = 8, 4
SCALES = tuple(1 + (i - 5) / 50.0 for i in range(11))
ANGLES = tuple(range(-10, 11)) + 5 * (0,)  # degrees
_DRAW_SALT = 0x5DEECE66D  # the draws' generator differs from the spectrum's of one seed


# Steps drawn at a time: 256 x 6 int64 per image (12 KiB), however many steps a run has.
DRAW_CHUNK = 256
# What each step draws: the first jitter's x and y, the scale's and the angle's index, the
# second jitter's x and y (each from 0 to its bound, exclusive).
BOUNDS = (JITTER_1 + 1, JITTER_1 + 1, len(SCALES), len(ANGLES), JITTER_2 + 1, JITTER_2 + 1)


class TransformDraws:
    """Every step's transform of every image, drawn DRAW_CHUNK steps at a time as the steps
    come (forward only), not all `steps` before the first: a billion steps once allocated
    12 GB here. The values are those of drawing everything at once from each image's own
    generator, quantity after quantity (every step's first jitter x, then every step's y,
    ...): each quantity's generator starts where the previous quantity's `steps` draws end
    (torch's randint draws the same values in chunks as in one call)."""

    def __init__(self, seeds: Sequence[int], steps: int) -> None:
        self.steps = steps
        self._generators: list[list[torch.Generator]] = []
        for s in seeds:
            g = torch.Generator().manual_seed(int(s) ^ _DRAW_SALT)
            quantities = []
            for bound in BOUNDS:
                start = torch.Generator()
                start.set_state(g.get_state())
                quantities.append(start)
                _skip(g, bound, steps)  # past this quantity's draws
            self._generators.append(quantities)
        self._first = 0  # the step of self._rows[:, 0]
        self._rows = np.zeros((len(self._generators), 0, 6), np.int64)

    def row(self, step: int) -> np.ndarray:
        """(n, 6): step `step`'s draws of every image; steps come in order."""
        if not 0 <= step < self.steps or step < self._first:
            raise ValueError(f"step {step}: the draws go forward from {self._first} to "
                             f"{self.steps - 1}")
        while step >= self._first + self._rows.shape[1]:
            self._first += self._rows.shape[1]
            count = min(DRAW_CHUNK, self.steps - self._first)
            self._rows = np.stack(
                [np.stack([_draw(g, b, count) for g, b in zip(quantities, BOUNDS)], axis=1)
                 for quantities in self._generators]) if self._generators else \
                np.zeros((0, count, 6), np.int64)
        return self._rows[:, step - self._first]

    def thetas(self, step: int, h: int, w: int) -> torch.Tensor:
        """(n, 2, 3) for F.affine_grid, for pictures of h x w (before the pad)."""
        hp, wp = h + 2 * PAD, w + 2 * PAD
        out = [theta(hp, wp, ax, ay, SCALES[si], math.radians(ANGLES[ai]), bx, by)
               for ax, ay, si, ai, bx, by in self.row(step)]
        return torch.tensor(np.stack(out), dtype=torch.float32)


def _skip(g: torch.Generator, bound: int, count: int) -> None:
    """Move `g` past `count` draws, keeping none (settings.MAX_STEPS bounds the count)."""
    for i in range(0, count, DRAW_CHUNK):
        torch.randint(0, bound, (min(DRAW_CHUNK, count - i),), generator=g)


def _draw(g: torch.Generator, bound: int, count: int) -> np.ndarray:
    """`count` draws from 0 to `bound` (exclusive), DRAW_CHUNK at a time."""
    parts = [torch.randint(0, bound, (min(DRAW_CHUNK, count - i),), generator=g).numpy()
             for i in range(0, count, DRAW_CHUNK)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def theta(hp: int, wp: int, a_x: float, a_y: float, s: float, angle: float, b_x: float,
          b_y: float) -> np.ndarray:
    """The 2 x 3 map from the output's normalised coordinates to the padded picture's
    (hp x wp): crop at (a_x, a_y) to (hp - 8, wp - 8), scale by s, rotate by `angle`
    (radians) about the centre, crop at (b_x, b_y) by 4 more."""
    h1, w1 = hp - JITTER_1, wp - JITTER_1
    h2, w2 = s * h1, s * w1
    h3, w3 = h2 - JITTER_2, w2 - JITTER_2
    out_to_pixels = np.array([[w3 / 2, 0, w3 / 2 + b_x], [0, h3 / 2, h3 / 2 + b_y], [0, 0, 1.0]])
    c, sn = math.cos(-angle), math.sin(-angle)
    rotate = (np.array([[1, 0, w2 / 2], [0, 1, h2 / 2], [0, 0, 1.0]])
              @ np.array([[c, -sn, 0], [sn, c, 0], [0, 0, 1.0]])
              @ np.array([[1, 0, -w2 / 2], [0, 1, -h2 / 2], [0, 0, 1.0]]))
    unscale = np.array([[1 / s, 0, a_x], [0, 1 / s, a_y], [0, 0, 1.0]])
    to_normalised = np.array([[2 / wp, 0, -1], [0, 2 / hp, -1], [0, 0, 1.0]])
    return (to_normalised @ unscale @ rotate @ out_to_pixels)[:2]


def apply_transforms(pixels: torch.Tensor, thetas: torch.Tensor,
                     out_hw: tuple[int, int]) -> torch.Tensor:
    """(n, 3, *out_hw): the pictures padded with grey and resampled through `thetas`."""
    x = F.pad(pixels, [PAD] * 4, value=0.5)
    grid = F.affine_grid(thetas.to(pixels.device), [pixels.shape[0], 3, *out_hw],
                         align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def to_input_size(pixels: torch.Tensor, out_hw: tuple[int, int]) -> torch.Tensor:
    """The pictures as they are, resized to the model input (no transform)."""
    if tuple(pixels.shape[-2:]) == tuple(out_hw):
        return pixels
    return F.interpolate(pixels, size=tuple(out_hw), mode="bilinear", align_corners=False,
                         antialias=True)
