"""An axis over layers (the divergence plot, the patch sweep, the CKA heatmap): a tick per
layer, thinned to every k-th layer (k 1, 2, 5, 10, ...) so that the labels never run
together at the length the axis has now, each label elided at its start (a module name's
end says most) to at most MAX_LABEL_PX by default; hovering the axis names the nearest
layer in full. Its title is elided to the axis's length too, whole in its tooltip."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

MAX_LABEL_PX = 150
GAP_PX = 8  # between two labels along the axis
NICE_STEPS = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000)


class LayerAxis(pg.AxisItem):
    """`set_layers(labels, names)`: tick i at i + `offset` labelled labels[i] (names[i], the
    layer's whole name, in the tooltip)."""

    def __init__(self, orientation: str, offset: float = 0.0,
                 max_label_px: float = MAX_LABEL_PX, **kwargs) -> None:
        # Set before AxisItem's own __init__, which resizes the axis (resizeEvent reads them).
        self.offset, self.max_label_px = offset, max_label_px
        self.labels: list[str] = []
        self.names: list[str] = []
        self.title = ""
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)
        self.setAcceptHoverEvents(True)

    def set_layers(self, labels: list[str], names: list[str] | None = None) -> None:
        self.labels = [str(s) for s in labels]
        self.names = list(names) if names is not None else list(self.labels)
        self.picture = None
        self.update()

    def set_title(self, text: str, **style) -> None:
        """The axis's title (setLabel's), elided to the axis's length."""
        self.title = text
        self.setLabel(text, **style)
        self._fit_title()

    # -- pyqtgraph's hooks ------------------------------------------------------------------------
    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 (pyqtgraph's names)
        if not self.labels:
            return super().tickValues(minVal, maxVal, size)
        minVal, maxVal = sorted((minVal, maxVal))  # noqa: N806 - an inverted axis (the heatmap's)
        metrics = self._metrics()
        if self.orientation in ("bottom", "top"):
            need = max(metrics.horizontalAdvance(self._elided(s)) for s in self.labels)
        else:
            need = metrics.height()
        per_unit = size / max(maxVal - minVal, 1e-9)
        wanted = (need + GAP_PX) / max(per_unit, 1e-9)
        step = next((s for s in NICE_STEPS if s >= wanted), NICE_STEPS[-1])
        first = max(0, math.ceil((minVal - self.offset) / step) * step)
        values = [float(i + self.offset) for i in range(first, len(self.labels), step)
                  if i + self.offset <= maxVal]
        return [(float(step), values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        if not self.labels:
            return super().tickStrings(values, scale, spacing)
        out = []
        for v in values:
            i = int(round(v - self.offset))
            out.append(self._elided(self.labels[i]) if 0 <= i < len(self.labels) else "")
        return out

    def resizeEvent(self, ev=None):  # noqa: N802 (Qt's name)
        self._fit_title()
        super().resizeEvent(ev)

    def hoverEvent(self, event):  # noqa: N802 (the name pyqtgraph's scene calls)
        view = self.linkedView()
        if event.isExit() or view is None or not self.names:
            return
        point = view.mapSceneToView(self.mapToScene(event.pos()))
        value = point.x() if self.orientation in ("bottom", "top") else point.y()
        i = int(round(value - self.offset))
        if 0 <= i < len(self.names):
            self.setToolTip(f"{self.labels[i]}: {self.names[i]}" if self.names[i] !=
                            self.labels[i] else self.names[i])

    # -- helpers ----------------------------------------------------------------------------------
    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.style["tickFont"] or self.font())

    def _elided(self, text: str) -> str:
        return self._metrics().elidedText(text, Qt.TextElideMode.ElideLeft,
                                          self.max_label_px)

    def _fit_title(self) -> None:
        if not self.title or self.label is None:
            return
        length = (self.size().width() if self.orientation in ("bottom", "top")
                  else self.size().height())
        metrics = QFontMetricsF(self.label.font())
        room = max(length - 12, 40)
        shown = metrics.elidedText(self.title, Qt.TextElideMode.ElideRight, room)
        if shown != self.labelText:
            self.labelText = shown
            self.label.setHtml(self.labelString())
        self.label.setToolTip(self.title if shown != self.title else "")
