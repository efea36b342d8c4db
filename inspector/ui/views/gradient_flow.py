"""Gradient flow: mean and max |gradient| per layer, in forward order, on a log scale.

Vanishing gradients show as a curve falling towards the input; exploding ones as a jump.
Zero gradients cannot sit on a log axis and NaN/Inf have no place on any axis, so those
layers are drawn as markers at the bottom and the top of the plot and named in the summary.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QLabel, QWidget

from inspector.ui.views.base import layer_ticks
from inspector.ui.views.depth_plot import DepthPlotFrame, depth_plot

MAX_COLOR = "#f0a030"
MEAN_COLOR = "#4c9be8"
BAD_COLOR = "#f05050"


@dataclass(frozen=True)
class FlowPoint:
    """One layer's gradient magnitude."""

    name: str
    mean_abs: float  # mean |grad|, or a stand-in for it (see GradientView)
    max_abs: float
    nonfinite: bool = False


class GradientFlowPlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.points: list[FlowPoint] = []
        self.zero_layers: list[str] = []
        self.nonfinite_layers: list[str] = []

        plot = depth_plot("layer, in forward order (input \u2192 output)", "|gradient|")
        plot.setLogMode(x=False, y=True)
        self.max_curve = plot.plot(
            pen=pg.mkPen(MAX_COLOR, width=1.5), symbol="o", symbolSize=5,
            symbolBrush=MAX_COLOR, symbolPen=None, connect="finite",
        )
        self.mean_curve = plot.plot(
            pen=pg.mkPen(MEAN_COLOR, width=1.5), symbol="o", symbolSize=5,
            symbolBrush=MEAN_COLOR, symbolPen=None, connect="finite",
        )
        self.zero_marks = pg.PlotDataItem(
            pen=None, symbol="x", symbolSize=10, symbolPen=pg.mkPen(BAD_COLOR, width=2)
        )
        self.bad_marks = pg.PlotDataItem(
            pen=None, symbol="t1", symbolSize=11, symbolBrush=BAD_COLOR, symbolPen=None
        )
        plot.addItem(self.zero_marks)
        plot.addItem(self.bad_marks)
        frame = DepthPlotFrame(
            self, QLabel(), plot,
            "Gradient flow appears here after a run with gradients: mean and max |gradient| "
            "of every layer whose gradient is captured.",
            self._hover, top_margin=0)
        self.summary, self.hover_label, self.plot = frame.header, frame.hover_label, plot
        self.cursor, self.empty, self.stack = frame.cursor, frame.empty, frame.stack

    def set_points(self, points: list[FlowPoint], title: str, mean_label: str) -> None:
        self.points = points
        if not points:
            self.zero_layers, self.nonfinite_layers = [], []
            self.summary.setText("")
            self.stack.setCurrentWidget(self.empty)
            return
        n = len(points)
        x = np.arange(n, dtype=float)
        mean = np.array([p.mean_abs for p in points], dtype=float)
        peak = np.array([p.max_abs for p in points], dtype=float)
        bad = np.array([p.nonfinite or not math.isfinite(p.max_abs) for p in points])
        zero = ~bad & (peak == 0)
        mean[bad | ~np.isfinite(mean) | (mean <= 0)] = np.nan
        peak[bad | zero] = np.nan
        self.zero_layers = [p.name for p, z in zip(points, zero, strict=True) if z]
        self.nonfinite_layers = [p.name for p, b in zip(points, bad, strict=True) if b]

        finite = np.concatenate([mean[np.isfinite(mean)], peak[np.isfinite(peak)]])
        floor = finite.min() / 10 if finite.size else 1e-12
        top = finite.max() * 10 if finite.size else 1.0
        self.max_curve.setData(x, peak)
        self.mean_curve.setData(x, mean)
        self.zero_marks.setData(x[zero], np.full(int(zero.sum()), floor))
        self.bad_marks.setData(x[bad], np.full(int(bad.sum()), top))
        self.plot.setXRange(-0.5, n - 0.5, padding=0.02)
        self.plot.getAxis("bottom").setTicks(layer_ticks(n))

        # The legend is this line, in the curves' colours: inside the plot it hid points.
        text = (
            f"<b>Gradient flow</b> \u00b7 {html.escape(title)} \u00b7 {_plural(n, 'layer')} \u00b7 "
            f"<span style='color:{MAX_COLOR}'>\u25cf max |grad|</span> "
            f"<span style='color:{MEAN_COLOR}'>\u25cf {html.escape(mean_label)}</span>"
        )
        if self.zero_layers:
            text += (f" \u00b7 <span style='color:{BAD_COLOR}'>\u2716 zero gradient: "
                     f"{_names(self.zero_layers)}</span>")
        if self.nonfinite_layers:
            text += (f" \u00b7 <span style='color:{BAD_COLOR}'><b>\u25b2 NaN/Inf: "
                     f"{_names(self.nonfinite_layers)}</b></span>")
        self.summary.setText(text)
        self.stack.setCurrentWidget(self.plot)

    def _hover(self, scene_pos: QPointF) -> None:
        if not self.points:
            return
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(scene_pos):
            self.cursor.hide()
            return
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        if not 0 <= i < len(self.points):
            self.cursor.hide()
            return
        p = self.points[i]
        self.cursor.setPos(i)
        self.cursor.show()
        if p.name in self.nonfinite_layers:
            values = "NaN/Inf in the gradient"
        else:
            values = f"mean {p.mean_abs:.3g}   max {p.max_abs:.3g}"
        self.hover_label.setText(f"layer {i}: {p.name}   {values}")


def _names(names: list[str], limit: int = 4) -> str:
    shown = html.escape(", ".join(names[:limit]))
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
