"""Right-click a plot, "Copy to clipboard": the plot as an image, for a report or a chat.

The action joins pyqtgraph's own ViewBox menu (View all, axes, mouse mode, and the scene's
Export…) rather than replacing it. What is copied is the whole graphics view the plot sits
in, as drawn on screen: its axes, legend and colour bars with it.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QAction, QGuiApplication, QImage
from PySide6.QtWidgets import QWidget

COPY_TEXT = "Copy to clipboard"


def copy_widget(widget: QWidget) -> QImage:
    """Put an image of `widget` on the clipboard; returns it."""
    image = widget.grab().toImage()
    QGuiApplication.clipboard().setImage(image)
    return image


def _view_box(plot) -> pg.ViewBox:
    if isinstance(plot, pg.ViewBox):
        return plot
    if isinstance(plot, pg.PlotWidget):
        return plot.getPlotItem().getViewBox()
    return plot.getViewBox()  # a PlotItem


def _graphics_view(box: pg.ViewBox) -> QWidget | None:
    """The widget that shows `box` (known once the plot is in a window, not when built)."""
    scene = box.scene()
    views = scene.views() if scene is not None else []
    return views[0] if views else None


def add_copy_action(plot, widget: QWidget | None = None) -> QAction:
    """Add "Copy to clipboard" to the right-click menu of `plot` (a PlotWidget, PlotItem or
    ViewBox), enabling pyqtgraph's menu if the plot had it off. It copies `widget`, or the
    graphics view the plot is drawn in."""
    box = _view_box(plot)
    if box.menu is None:
        box.setMenuEnabled(True)
    action = QAction(COPY_TEXT, box.menu)
    action.setToolTip("Put an image of this plot on the clipboard")

    def copy() -> None:
        target = widget if widget is not None else _graphics_view(box)
        if target is not None:
            copy_widget(target)

    action.triggered.connect(copy)
    box.menu.addSeparator()
    box.menu.addAction(action)
    return action

