"""The tensor panel's page for vector outputs, (F,): a Linear output, logits. Bars up to
MAX_BARS values, a line above (or as the user chooses), with the value under the mouse."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

from inspector.ui.views.clipboard import add_copy_action

MAX_BARS = 256  # more bars than this are slow to draw and too thin to read: a line instead
BARS, LINE, AUTO = "Bars", "Line", "Auto"  # the panel's vector combo's texts


class VectorPage:
    """One plot with a bar item and a line item, one of them shown; updated in place."""

    def __init__(self) -> None:
        plot = pg.PlotWidget()
        plot.setLabel("bottom", "index (feature or class)")
        plot.setLabel("left", "value")
        plot.showGrid(x=False, y=True, alpha=0.3)
        plot.hideButtons()
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush="#4c9be8", pen=None)
        self.line = pg.PlotDataItem(pen=pg.mkPen("#4c9be8", width=1.5))
        plot.addItem(self.bars)
        plot.addItem(self.line)
        self.plot = plot
        add_copy_action(plot)

    def draw(self, data: np.ndarray, style: str) -> None:
        """`data` as bars or a line (`style`: BARS, LINE, or AUTO: bars up to MAX_BARS)."""
        x = np.arange(data.shape[0])
        bars = style == BARS or (style == AUTO and data.shape[0] <= MAX_BARS)
        self.bars.setVisible(bars)
        self.line.setVisible(not bars)
        if bars:
            self.bars.setOpts(x=x, height=data, width=0.8)
            self.line.setData([], [])
        else:
            self.line.setData(x, data)
            self.bars.setOpts(x=[], height=[])

    def hover_text(self, scene_pos: QPointF, data: np.ndarray) -> str | None:
        """What the readout says with the mouse at `scene_pos`; None off the values."""
        p = self.plot.getPlotItem().vb.mapSceneToView(scene_pos)
        i = int(round(p.x()))
        if 0 <= i < data.shape[0]:
            return f"index {i}   value {data[i]:.4g}"
        return None
