"""The tensor panel's page for one channel of a (C, H, W) preview, alone: the channel as an
image with x / y axes, its histogram with draggable levels, the value under the mouse; and,
when an add-on gives one, a picture beside it (the channel's feature visualisation): it and
the channel share the pane's width, its caption elided to its half (the whole in its
tooltip), so that neither is drawn past the pane's right edge."""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

from inspector.ui.views.clipboard import add_copy_action
from inspector.ui.views.levels_histogram import LevelsHistogram
from inspector.ui.views.mosaic import channel_ranges, levels_for
from inspector.ui.views.tile_numbers import channel_name

CAPTION_SIZE = "9pt"  # the picture's caption: smaller than a plot's title, in half a pane


class _View(pg.GraphicsLayoutWidget):
    """Tells its page when it is resized (the picture's caption is fitted again)."""

    def __init__(self, on_resize) -> None:
        self._on_resize = None  # the base class's __init__ resizes it already
        super().__init__()
        self._on_resize = on_resize

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self._on_resize is not None:
            self._on_resize()


class ZoomPage:
    """One plot with one ImageItem and its LevelsHistogram, updated in place."""

    def __init__(self, cmap: pg.ColorMap) -> None:
        self.picture_plot = None  # built when a picture is first shown beside the channel
        self.caption = ""  # the picture's, whole
        self.view = _View(self._fit_caption)
        self.plot = self.view.addPlot(row=0, col=0)
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", "x")
        self.plot.setLabel("left", "y")
        self.item = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.item)
        self.hist = LevelsHistogram(self.item, cmap)
        self.view.addItem(self.hist, row=0, col=1)
        add_copy_action(self.plot)

    def draw(self, channel: np.ndarray, index: int, count: int, diverging: bool) -> None:
        """Channel `index` of `count`, with levels from its own range (symmetric at 0 when
        `diverging`)."""
        lo, hi = channel_ranges(channel[None])
        levels = levels_for(lo[0], hi[0], diverging)
        self.item.setImage(channel, autoLevels=False, levels=levels)
        self.hist.set_values(channel, levels)
        self.plot.setTitle(channel_name(index, count))

    def show_picture(self, rgb: np.ndarray | None, caption: str, tooltip: str = "") -> None:
        """An RGB picture (H x W x 3 uint8) beside the channel, with its caption (elided to
        fit; `tooltip`, else the whole caption, on hover); None hides it."""
        if rgb is None:
            if self.picture_plot is not None:
                self.picture_plot.hide()
            return
        if self.picture_plot is None:
            self.picture_plot = self.view.addPlot(row=0, col=2)
            self.picture_plot.invertY(True)
            self.picture_plot.setAspectLocked(True)
            self.picture_plot.hideButtons()
            self.picture_plot.hideAxis("left")
            self.picture_plot.hideAxis("bottom")
            self.picture_item = pg.ImageItem(axisOrder="row-major")
            self.picture_plot.addItem(self.picture_item)
            # The channel and the picture share what the histogram leaves.
            layout = self.view.ci.layout
            layout.setColumnStretchFactor(0, 1)
            layout.setColumnStretchFactor(2, 1)
        self.picture_item.setImage(rgb, autoLevels=False, levels=(0, 255))
        self.caption = caption
        self.picture_plot.setToolTip(tooltip or caption)
        self.picture_plot.show()
        self._fit_caption()

    def caption_width(self) -> float:
        """The widest the picture's caption may be: half the width beside the histogram
        (a title's label is as wide as its text, and widens its column past the pane)."""
        spare = self.view.width() - self.hist.preferredWidth() - 24
        return max(24.0, spare / 2 - 8)

    def _fit_caption(self) -> None:
        plot = self.picture_plot
        if plot is None:
            return
        width, text = self.caption_width(), self.caption

        def fits(shown: str) -> bool:
            plot.setTitle(html.escape(shown), size=CAPTION_SIZE)
            return plot.titleLabel.itemRect().width() <= width

        if fits(text):
            return
        lo, hi = 0, len(text)  # the longest prefix that fits with its ellipsis
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(text[:mid].rstrip() + "\u2026"):
                lo = mid
            else:
                hi = mid - 1
        fits(text[:lo].rstrip() + "\u2026")

    def set_colormap(self, table: np.ndarray, cmap: pg.ColorMap) -> None:
        self.item.setLookupTable(table)
        self.hist.setColorMap(cmap)

    def hover_text(self, scene_pos: QPointF, data: np.ndarray, index: int) -> str | None:
        """What the readout says with the mouse at `scene_pos` over channel `index` of the
        (C, H, W) `data`; None off the image."""
        p = self.item.mapFromScene(scene_pos)
        i, j = int(math.floor(p.y())), int(math.floor(p.x()))
        _, h, w = data.shape
        if 0 <= i < h and 0 <= j < w:
            return f"channel {index}   y {i}, x {j}   value {data[index, i, j]:.4g}"
        return None
