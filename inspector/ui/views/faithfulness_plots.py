"""The Faithfulness tab's curves for the method shown: deletion and insertion against the
fraction of pixels perturbed, ROAD's MoRF and LeRF against the fraction removed, and the
sanity check's Spearman and SSIM per randomisation step (top unit first). Each plot's
tooltip says how its numbers were computed.

Each plot's legend sits in a row of its own above the curves, so that it never covers
them, and each y axis label is short enough for the axis of a plot PLOT_MIN_HEIGHT high
(what the plot says it shows comes in its tooltip).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QTabWidget, QWidget

from inspector.core.explain.metrics.names import INSERTION, ROAD, SANITY, MetricOptions

DELETION_COLOR = "#e0584c"
INSERTION_COLOR = "#4caf50"
SSIM_COLOR = "#4c9be8"
SANITY_TIP_MAX = 3000  # characters of the protocol in a tooltip
PLOT_MIN_HEIGHT = 150  # pixels: below it the curves' points cannot be told apart


def _plot(x_label: str, y_label: str, y_range=(0.0, 1.0)) -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setMenuEnabled(False)
    plot.setMouseEnabled(x=False, y=False)
    plot.hideButtons()
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label)
    plot.setYRange(*y_range, padding=0.05)
    plot.setMinimumHeight(PLOT_MIN_HEIGHT)
    item = plot.getPlotItem()
    # The legend takes the title's row, above the view box: plot(name=...) adds to it.
    legend = pg.LegendItem(colCount=2, labelTextSize="8pt", verSpacing=-6)
    legend.layout.setContentsMargins(0, 0, 0, 0)
    item.layout.removeItem(item.titleLabel)
    item.titleLabel.hide()
    item.layout.addItem(legend, 0, 1)
    item.legend = legend
    return plot


def _curve(plot: pg.PlotWidget, color: str, name: str, symbol: str = "o") -> pg.PlotDataItem:
    return plot.plot(pen=pg.mkPen(color, width=1.6), symbol=symbol, symbolSize=4,
                     symbolBrush=color, symbolPen=None, name=name)


class FaithfulnessPlots(QTabWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocumentMode(True)
        self.curves = _plot("fraction of pixels perturbed, most relevant first", "score")
        self.curves.setXRange(0, 1, padding=0.02)
        self.deletion = _curve(self.curves, DELETION_COLOR, "deletion")
        self.insertion = _curve(self.curves, INSERTION_COLOR, "insertion", "t")
        self.road = _plot("fraction of pixels removed (imputed)", "score")
        self.road.setXRange(0, 1, padding=0.02)
        self.morf = _curve(self.road, DELETION_COLOR, "most relevant first")
        self.lerf = _curve(self.road, INSERTION_COLOR, "least relevant first", "t")
        self.sanity = _plot("randomised down to (top unit first)", "similarity", (-1.0, 1.0))
        self.spearman = _curve(self.sanity, DELETION_COLOR, "Spearman")
        self.ssim = _curve(self.sanity, SSIM_COLOR, "SSIM", "s")
        self.addTab(self.curves, "Deletion / insertion")
        self.addTab(self.road, "ROAD")
        self.addTab(self.sanity, "Sanity check")

    def show_scores(self, scores, options: MetricOptions | None, score_text: str = "") -> None:
        """Draw a MapScores (None: nothing); `options` and `score_text` (a MetricsFrame's)
        give the tooltips' protocol."""
        d = scores.deletion if scores is not None else None
        i = scores.insertion if scores is not None else None
        self.deletion.setData(*(_xy(d)))
        self.insertion.setData(*(_xy(i)))
        self.morf.setData(*(_xy(scores.road_morf if scores is not None else None)))
        self.lerf.setData(*(_xy(scores.road_lerf if scores is not None else None)))
        steps = (scores.sanity or []) if scores is not None else []
        x = np.arange(len(steps), dtype=float)
        rho = np.array([np.nan if s.spearman is None else s.spearman for s in steps], float)
        self.spearman.setData(x, rho, connect="finite")
        self.ssim.setData(x, np.array([s.ssim for s in steps], float))
        self.sanity.getAxis("bottom").setTicks([[(k, s.layer) for k, s in enumerate(steps)]])
        if steps:
            self.sanity.setXRange(-0.3, len(steps) - 0.7, padding=0)
        if options is not None:
            self.curves.setToolTip(options.describe(INSERTION, score_text))
            self.road.setToolTip(options.describe(ROAD, score_text))
            self.sanity.setToolTip(options.describe(SANITY, score_text)[:SANITY_TIP_MAX])


def _xy(curve) -> tuple[np.ndarray, np.ndarray]:
    if curve is None:
        return np.zeros(0), np.zeros(0)
    return np.asarray(curve.fractions, float), np.asarray(curve.scores, float)
