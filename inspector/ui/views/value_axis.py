"""A value axis whose tick labels never run together: pyqtgraph picks its tick count from
the axis length alone (about log(length)), so on a short plot (the attention distances at
40 px) four labels of 11 px overlap. Here a level of ticks is kept only while its labels are
at least a label's height and a gap apart; when no level is, one coarser step of 1, 2 or 5
times a power of ten is."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFontMetricsF

GAP_PX = 4  # between two labels along the axis


class ValueAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)  # plain numbers (0.3, not "300 (x0.001)")

    def _label_px(self) -> float:
        metrics = QFontMetricsF(self.style["tickFont"] or self.font())
        if self.orientation in ("left", "right"):
            return metrics.height() + GAP_PX
        return metrics.horizontalAdvance("-0.000") + GAP_PX

    def tickSpacing(self, minVal: float, maxVal: float, size: float):
        levels = super().tickSpacing(minVal, maxVal, size)
        span = maxVal - minVal
        if not levels or span <= 0 or size <= 0:
            return levels
        units_per_label = self._label_px() * span / size
        kept = [(spacing, offset) for spacing, offset in levels
                if spacing >= units_per_label]
        if kept:
            return kept
        return [(_nice_step(units_per_label), 0)]


def _nice_step(at_least: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least `at_least` (> 0)."""
    power = 10.0 ** math.floor(math.log10(at_least))
    for m in (1, 2, 5, 10):
        if m * power >= at_least:
            return m * power
    return 10 * power
