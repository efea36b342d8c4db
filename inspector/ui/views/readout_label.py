"""The one-line readout under a view that names the values under the mouse.

A readout can be far longer than its pane is wide (a ViT-B's twelve heads' values): as a
plain QLabel its text would set the dock's minimum width, and the dock areas would squeeze
the other docks or grow the window past the screen. This label never asks for more width
than it is given: it ends in "…" when the text does not fit, and its tooltip then has the
whole line (above `tip`, what the readout's numbers are)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyleOption, QWidget


class ReadoutLabel(QLabel):
    def __init__(self, tip: str = "", parent: QWidget | None = None) -> None:
        super().__init__(" ", parent)
        self.tip = tip
        self.setTextFormat(Qt.TextFormat.PlainText)
        # Ignored: the layout gives it the pane's width, whatever the text's.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._update_tip()

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self._update_tip()
        self.update()

    @property
    def elided(self) -> bool:
        """The text does not fit: it is shown ending in "…"."""
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def shown_text(self) -> str:
        """The text as painted, at the label's width."""
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight,
                                             self.contentsRect().width())

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, super().sizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._update_tip()

    def _update_tip(self) -> None:
        whole = self.text().strip()
        parts = [whole] if whole and self.elided else []
        if self.tip:
            parts.append(self.tip)
        self.setToolTip("\n\n".join(parts))

    def paintEvent(self, _event) -> None:  # noqa: N802
        painter = QPainter(self)
        option = QStyleOption()
        option.initFrom(self)
        align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        self.style().drawItemText(painter, self.contentsRect(), int(align), option.palette,
                                  self.isEnabled(), self.shown_text(),
                                  self.foregroundRole())
        painter.end()

