"""The attention explorer's parts: a patch map over the image, the grid of one map per head,
and the plot of each head's mean attention distance over the blocks."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Signal

from inspector.ui.views.base import layer_ticks
from inspector.ui.views.cam_overlay import heat_rgb
from inspector.ui.views.depth_plot import depth_plot

HEAD_COLOR = "#8a8a8a"
BLOCK_COLOR = "#f0a030"


def nearest_up(grid_map: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """(gh, gw) -> (h, w), each patch's value over its pixels (no blur across patches)."""
    gh, gw = grid_map.shape
    rows = np.arange(hw[0]) * gh // hw[0]
    cols = np.arange(hw[1]) * gw // hw[1]
    return grid_map[rows[:, None], cols[None, :]]


def scaled(grid_map: np.ndarray) -> np.ndarray:
    """The map over its own maximum (attention is non-negative): 0..1."""
    top = float(grid_map.max(initial=0.0))
    return grid_map / top if top > 0 else np.zeros_like(grid_map)


def heat_over(display: np.ndarray | None, grid_map: np.ndarray, alpha: float) -> np.ndarray:
    """(h, w, 3) uint8: the map's colours over the image (the map alone without one)."""
    if display is None:
        return (heat_rgb(scaled(grid_map)) + 0.5).astype(np.uint8)
    heat = heat_rgb(nearest_up(scaled(grid_map), display.shape[:2]))
    image = display.astype(np.float32)
    return (image + alpha * (heat - image) + 0.5).astype(np.uint8)


class HeadsGrid:
    """One small map per head in a pyqtgraph layout (head 0 top left, row by row), rebuilt
    when the head count changes."""

    def __init__(self, layout: pg.GraphicsLayout) -> None:
        self.layout = layout
        self.boxes: list[pg.ViewBox] = []
        self.items: list[pg.ImageItem] = []
        self.grid: tuple[int, int] | None = None

    def _build(self, heads: int) -> None:
        self.layout.clear()
        self.boxes, self.items = [], []
        cols = max(1, math.ceil(math.sqrt(heads)))
        for h in range(heads):
            box = self.layout.addViewBox(row=h // cols, col=h % cols, lockAspect=True,
                                         invertY=True)
            box.setMenuEnabled(False)
            box.setMouseEnabled(x=False, y=False)
            item = pg.ImageItem(axisOrder="row-major")
            box.addItem(item)
            self.boxes.append(box)
            self.items.append(item)

    def show_maps(self, maps: np.ndarray) -> None:
        """(heads, gh, gw): each map in its cell, scaled to its own maximum."""
        if len(self.items) != maps.shape[0]:
            self._build(maps.shape[0])
        self.grid = maps.shape[1:]
        for item, m in zip(self.items, maps, strict=True):
            item.setImage((heat_rgb(scaled(m)) + 0.5).astype(np.uint8), autoLevels=False,
                          levels=(0, 255))

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int, int] | None:
        """(head, row, col) under a scene position, or None."""
        if self.grid is None:
            return None
        gh, gw = self.grid
        for h, box in enumerate(self.boxes):
            if box.sceneBoundingRect().contains(scene_pos):
                p = box.mapSceneToView(scene_pos)
                r, c = int(math.floor(p.y())), int(math.floor(p.x()))
                return (h, r, c) if 0 <= r < gh and 0 <= c < gw else None
        return None


class DistancePlot(QObject):
    """Each head's mean attention distance (patches) per block: `show(distance, block)`;
    `hovered(scene_pos)` when the mouse is over a block, which `readout_at` names."""

    hovered = Signal(QPointF)

    def __init__(self) -> None:
        super().__init__()
        self.plot = depth_plot("block, in forward order (input \u2192 output)",
                               "distance")  # in patches: the tooltip says so
        self.plot.setToolTip(
            "Per head, over the patch queries, the attention-weighted mean distance in patches "
            "to the patches attended (renormalised over the patch keys; Dosovitskiy et al. "
            "2020, Fig. 7): small for local heads, large for global ones")
        self.all_heads = pg.ScatterPlotItem(size=5, pen=None, brush=pg.mkBrush(HEAD_COLOR))
        self.current = pg.ScatterPlotItem(size=8, pen=None, brush=pg.mkBrush(BLOCK_COLOR))
        self.plot.addItem(self.all_heads)
        self.plot.addItem(self.current)
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(BLOCK_COLOR))
        self.plot.addItem(self.cursor, ignoreBounds=True)
        self.plot.scene().sigMouseMoved.connect(self._moved)
        self.distance: np.ndarray | None = None

    def show(self, distance: np.ndarray, block: int) -> None:
        self.distance = distance
        n, heads = distance.shape
        x = np.repeat(np.arange(n, dtype=float), heads)
        self.all_heads.setData(x, distance.ravel().astype(float))
        self.current.setData(np.full(heads, float(block)), distance[block].astype(float))
        self.cursor.setPos(block)
        self.plot.setXRange(-0.5, n - 0.5, padding=0.02)
        self.plot.getAxis("bottom").setTicks(layer_ticks(n))

    def _moved(self, scene_pos: QPointF) -> None:
        if self.readout_at(scene_pos) is not None:
            self.hovered.emit(scene_pos)

    def readout_at(self, scene_pos: QPointF) -> tuple[int, str] | None:
        """(block, its heads' distances in words) under a scene position, or None."""
        vb = self.plot.getPlotItem().vb
        if self.distance is None or not vb.sceneBoundingRect().contains(scene_pos):
            return None
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        if not 0 <= i < self.distance.shape[0]:
            return None
        values = ", ".join(f"h{h} {d:.2f}" for h, d in enumerate(self.distance[i]))
        return i, f"mean attention distance (patches): {values}"
