"""The tensor panel's page for token outputs, (N, D): a token x feature heatmap, or, when
the tokens form a patch grid (core.tokens finds it from the model input's size: 14 x 14 after
vit_b_16's class token), one feature (or the mean of all) over that grid."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

from inspector.ui.views.clipboard import add_copy_action
from inspector.ui.views.mosaic import SHARED, channel_ranges, levels_for

TOKEN_HEATMAP, TOKEN_GRID_MEAN, TOKEN_GRID_FEATURE = "heatmap", "grid_mean", "grid_feature"


def token_grid_side(n_tokens: int) -> tuple[int, int] | None:
    """(side, first patch token) when the tokens form a square grid, else None: the guess
    without the model input's size (see patch_grid).

    N square: every token is a patch. N - 1 square: token 0 is a class token, left out.
    """
    for skip in (0, 1):
        n = n_tokens - skip
        side = math.isqrt(n) if n > 1 else 0
        if side > 1 and side * side == n:
            return side, skip
    return None


def square_grid(n_tokens: int) -> tuple[int, tuple[int, int]] | None:
    """token_grid_side as patch_grid gives grids: (extra tokens, (side, side))."""
    found = token_grid_side(n_tokens)
    return None if found is None else (found[1], (found[0], found[0]))


def grid_of(n_tokens: int,
            grid: tuple[int, tuple[int, int]] | None) -> tuple[int, tuple[int, int]] | None:
    """`grid` (as patch_grid gives it) when it holds exactly `n_tokens`, else a square guess."""
    if grid is not None and grid[0] + grid[1][0] * grid[1][1] == n_tokens:
        return grid
    return square_grid(n_tokens)


def patch_grid(n_tokens: int, input_hw: tuple[int, int] | None) -> tuple[int, tuple[int, int]] | None:
    """(extra tokens before the grid, (rows, columns)) of a token output, as core.tokens
    reads it for CAMs: the grid whose cells cover the model input with equal strides (197
    tokens over 224 x 224: a class token and 14 x 14; DeiT's distillation token, registers,
    non-square inputs too). Without the input's size, only a square grid is guessed."""
    if input_hw is None:
        return square_grid(n_tokens)
    from inspector.core.tokens import token_grid  # torch is loaded: a run's frames arrived

    found = token_grid(n_tokens, input_hw)
    return None if found is None or found[1][0] * found[1][1] < 2 else found


class TokenPage:
    """One plot with one ImageItem, updated in place; the heatmap reuses one buffer."""

    def __init__(self, bar: pg.ColorBarItem, on_hover: Callable[[QPointF], None]) -> None:
        self.view = pg.GraphicsLayoutWidget()
        self.plot = self.view.addPlot(row=0, col=0)
        self.plot.invertY(True)
        self.plot.hideButtons()
        add_copy_action(self.plot)
        self.item = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.item)
        self.bar = bar
        self.view.addItem(bar, row=0, col=1)
        self.view.scene().sigMouseMoved.connect(on_hover)
        self.image: np.ndarray | None = None  # what the item shows
        self.buffer: np.ndarray | None = None  # the heatmap's reused buffer
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.skip = 0  # tokens before the patch grid (a class token)

    @property
    def is_heatmap(self) -> bool:
        return self.image is not None and self.image is self.buffer

    def draw(self, data: np.ndarray, grid: tuple[int, tuple[int, int]] | None, choice: str,
             feature: int, normalisation: str, diverging: bool,
             features: int | None = None) -> None:
        """`grid`: (extra tokens, (rows, columns)), or None for the heatmap only. `features`:
        the layer's feature count, when the preview averaged groups of them."""
        n, d = data.shape
        if grid is None or choice == TOKEN_HEATMAP:
            image = self._heatmap(data, normalisation, diverging)
            self.plot.setAspectLocked(False)
            self.plot.setLabel("bottom", "feature")
            self.plot.setLabel("left", "token")
            self.plot.setTitle(f"{n} tokens \u00d7 {d} features")
        else:
            self.skip, (gh, gw) = grid
            patches = data[self.skip:]
            if choice == TOKEN_GRID_MEAN:
                values, what = patches.mean(axis=1), "mean of features"
            else:
                values, what = patches[:, feature], _feature_text(feature, d, features)
            image = np.ascontiguousarray(values.reshape(gh, gw), dtype=np.float32)
            lo, hi = channel_ranges(image[None])
            self.levels = levels_for(lo[0], hi[0], diverging)
            self.plot.setAspectLocked(True)
            self.plot.setLabel("bottom", "patch column")
            self.plot.setLabel("left", "patch row")
            note = {0: "", 1: " (class token left out)"}.get(
                self.skip, f" ({self.skip} extra tokens left out)")
            self.plot.setTitle(f"{gh}\u00d7{gw} patch grid, {what}{note}")
        self.image = image
        self.item.setImage(image, autoLevels=False, levels=self.levels)
        self.bar.setLevels(self.levels)

    def _heatmap(self, data: np.ndarray, normalisation: str, diverging: bool) -> np.ndarray:
        """(N, D) into the reused buffer; 'scale each channel' scales each feature column."""
        if self.buffer is None or self.buffer.shape != data.shape:
            self.buffer = np.empty(data.shape, np.float32)
        out = self.buffer
        lo, hi = data.min(axis=0), data.max(axis=0)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            lo, hi = channel_ranges(np.ascontiguousarray(data.T))
        if normalisation == SHARED:
            np.copyto(out, data)
            self.levels = levels_for(lo.min(), hi.max(), diverging)
        elif diverging:
            a = np.maximum(np.abs(lo), np.abs(hi))
            np.multiply(data, np.divide(1.0, a, out=np.zeros_like(a), where=a > 0), out=out)
            self.levels = (-1.0, 1.0)
        else:
            span = hi - lo
            np.subtract(data, lo, out=out)
            np.multiply(out, np.divide(1.0, span, out=np.zeros_like(span), where=span > 0), out=out)
            self.levels = (0.0, 1.0)
        return out

    def hover_text(self, scene_pos: QPointF, data: np.ndarray) -> str | None:
        """What the pointer is over, or None outside the image."""
        if self.image is None:
            return None
        p = self.item.mapFromScene(scene_pos)
        i, j = int(math.floor(p.y())), int(math.floor(p.x()))
        h, w = self.image.shape
        if not (0 <= i < h and 0 <= j < w):
            return None
        if self.is_heatmap:
            return f"token {i}   feature {j}   value {data[i, j]:.4g}"
        token = self.skip + i * w + j
        return f"token {token} (row {i}, column {j})   value {self.image[i, j]:.4g}"


def _feature_text(feature: int, shown: int, features: int | None) -> str:
    """Which features column `feature` of the preview holds: one, or the group the preview
    averaged (torch's adaptive average pooling bins)."""
    if not features or features == shown:
        return f"feature {feature}"
    first = feature * features // shown
    last = -(-(feature + 1) * features // shown) - 1
    return f"features {first}\u2013{last} (averaged in the preview)"
