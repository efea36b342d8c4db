"""Lucid's standard transforms (lucid/optvis/transform.py standard_transforms), in its order:

    pad 12 with grey (0.5) -> jitter 8 -> scale by one of 0.90, 0.92 .. 1.10
    -> rotate by one of -10 .. 10 degrees (0 five times more often) -> jitter 4

Lucid resamples at each of these; here the chain is one affine map per image and one
bilinear resample (`F.affine_grid` + `F.grid_sample`) straight to the model input's size.
Beyond the grey pad the border is repeated (it is the same grey). Every step's draws are
made up front from each image's own generator (`TransformDraws`), so an image's picture does
not depend on the other images of its batch.
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


class TransformDraws:
    """Every step's transform of every image: `table` (n, steps, 6) holds the first jitter's
    x and y offsets, the scale's and the angle's index, the second jitter's x and y."""

    def __init__(self, seeds: Sequence[int], steps: int) -> None:
        rows = []
        for s in seeds:
            g = torch.Generator().manual_seed(int(s) ^ _DRAW_SALT)
            bounds = (JITTER_1 + 1, JITTER_1 + 1, len(SCALES), len(ANGLES),
                      JITTER_2 + 1, JITTER_2 + 1)
            rows.append(torch.stack([torch.randint(0, b, (steps,), generator=g)
                                     for b in bounds], dim=1))
        self.table = torch.stack(rows).numpy() if rows else np.zeros((0, steps, 6), np.int64)

    def thetas(self, step: int, h: int, w: int) -> torch.Tensor:
        """(n, 2, 3) for F.affine_grid, for pictures of h x w (before the pad)."""
        hp, wp = h + 2 * PAD, w + 2 * PAD
        out = [theta(hp, wp, ax, ay, SCALES[si], math.radians(ANGLES[ai]), bx, by)
               for ax, ay, si, ai, bx, by in self.table[:, step]]
        return torch.tensor(np.stack(out), dtype=torch.float32)


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
