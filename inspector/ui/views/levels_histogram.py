"""A channel's histogram with a draggable level range and the colour bar it maps to.

Why not pyqtgraph's HistogramLUTItem: its gradient editor builds a colour-map menu that
imports matplotlib.pyplot when matplotlib is installed (1.4 s of the first window's 2 s of
view building, measured here), and that menu would change the colours behind the panel's
own colour-map box. Here the panel's box stays the one place a colour map is chosen.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from inspector.ui.views.clipboard import add_copy_action

BINS = 64


class LevelsHistogram(pg.GraphicsLayout):
    """Value runs upwards; bars show how many pixels have each value. Drag the shaded range
    (or its edges) to set the image's levels; the colour bar beside it shows the result."""

    def __init__(self, image: pg.ImageItem, cmap: pg.ColorMap) -> None:
        super().__init__()
        self.image = image
        self.plot = self.addPlot(row=0, col=0)
        self.plot.setMaximumWidth(90)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        add_copy_action(self.plot)  # the view menu, with "Copy to clipboard"
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideAxis("bottom")
        self.plot.getAxis("left").setWidth(44)
        self.bars = pg.BarGraphItem(x0=[], y=[], width=[], height=1.0,
                                    brush=(120, 140, 200, 160), pen=None)
        self.plot.addItem(self.bars)
        self.region = pg.LinearRegionItem(
            orientation="horizontal", brush=(255, 255, 255, 40), hoverBrush=(255, 255, 255, 70)
        )
        self.region.setZValue(10)
        self.plot.addItem(self.region)
        self.bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=cmap, interactive=False,
                                   width=14, colorMapMenu=False)
        self.bar.axis.hide()  # the histogram's axis beside it already says the values
        self.addItem(self.bar, row=0, col=1)
        self.region.sigRegionChanged.connect(self._region_changed)

    def set_values(self, values: np.ndarray, levels: tuple[float, float]) -> None:
        """New data: redraw the histogram over the data's range and reset the levels."""
        finite = values[np.isfinite(values)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if hi <= lo:
            hi = lo + 1.0
        counts, edges = np.histogram(finite, bins=BINS, range=(lo, hi))
        self.bars.setOpts(x0=np.zeros(BINS), y=(edges[:-1] + edges[1:]) / 2,
                          width=counts.astype(float), height=edges[1] - edges[0])
        self.plot.setXRange(0, max(1, int(counts.max())), padding=0)
        self.plot.setYRange(min(lo, levels[0]), max(hi, levels[1]), padding=0.02)
        self.setLevels(*levels)

    def setLevels(self, lo: float, hi: float) -> None:  # noqa: N802 - pyqtgraph's spelling
        self.region.setRegion((lo, hi))
        self._region_changed()

    def getLevels(self) -> tuple[float, float]:  # noqa: N802
        lo, hi = self.region.getRegion()
        return float(lo), float(hi)

    def setColorMap(self, cmap: pg.ColorMap) -> None:  # noqa: N802
        self.bar.setColorMap(cmap)

    def _region_changed(self) -> None:
        levels = self.getLevels()
        self.image.setLevels(levels)
        self.bar.setLevels(levels)
