"""The frame the depth plots share (gradient flow, input statistics, divergence): a value
per layer in forward order, a header line above, a hover line naming the layer under the
mouse below, and a hint in the plot's place while there is nothing to draw."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from inspector.ui.views.base import hint_label
from inspector.ui.views.clipboard import add_copy_action
from inspector.ui.views.value_axis import ValueAxis


def depth_plot(x_label: str, y_label: str, **y_style) -> pg.PlotWidget:
    """A plot over layers: grid lines across, plain numbers on the axes (no SI prefix: 0.3,
    not "300 (x0.001)"), pyqtgraph's view menu with "Copy to clipboard"."""
    plot = pg.PlotWidget(axisItems={"left": ValueAxis("left")})
    plot.showGrid(x=False, y=True, alpha=0.3)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label, **y_style)
    for axis in ("bottom", "left"):
        plot.getAxis(axis).enableAutoSIPrefix(False)
    plot.hideButtons()
    plot.setMenuEnabled(False)
    add_copy_action(plot)
    return plot


class DepthPlotFrame:
    """Lays out `view`: `header`, then the plot (or the hint), then the hover line; adds a
    vertical cursor that `on_hover(scene_pos)` moves. Its parts: header, cursor, empty,
    stack, hover_label."""

    def __init__(self, view: QWidget, header: QLabel, plot: pg.PlotWidget, empty_text: str,
                 on_hover, top_margin: int = 4) -> None:
        self.header = header
        header.setTextFormat(Qt.TextFormat.RichText)
        header.setWordWrap(True)
        self.hover_label = QLabel(" ")
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#888", width=1))
        self.cursor.hide()
        plot.addItem(self.cursor, ignoreBounds=True)
        plot.scene().sigMouseMoved.connect(on_hover)
        self.empty = hint_label(empty_text)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(plot)
        layout = QVBoxLayout(view)
        layout.setContentsMargins(4, top_margin, 4, 4)
        layout.addWidget(header)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.hover_label)
