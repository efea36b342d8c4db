"""The top-k predictions; clicking a class makes it the target for gradients and CAMs."""

from __future__ import annotations

import html

from PySide6.QtCore import QModelIndex, QRect, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.core.frames import PredictionFrame, RunFinished
from inspector.ui.views.base import FrameView, hint_label

PROB_ROLE = Qt.ItemDataRole.UserRole + 1
BAR_COLOR = QColor("#4c9be8")
TARGET_COLOR = QColor(240, 160, 48, 70)
TEXT_WIDTH = 56  # pixels kept for "100.0%" right of the bar


class ProbabilityDelegate(QStyledItemDelegate):
    """Draws a probability as a bar behind its percentage."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        prob = index.data(PROB_ROLE)
        if prob is None:
            return super().paint(painter, option, index)
        painter.save()
        background = index.data(Qt.ItemDataRole.BackgroundRole)
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(option.rect, option.palette.color(QPalette.ColorRole.Highlight))
        elif background is not None:
            painter.fillRect(option.rect, background)
        # The bar stops short of the percentage so a 100% bar never hides its number.
        bar = QRect(option.rect.adjusted(4, 4, -TEXT_WIDTH, -4))
        bar.setWidth(max(1, round(bar.width() * min(max(prob, 0.0), 1.0))))
        painter.fillRect(bar, BAR_COLOR)
        painter.setPen(option.palette.color(QPalette.ColorRole.Text))
        painter.drawText(
            option.rect.adjusted(6, 0, -6, 0),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
            f"{100 * prob:.1f}%",
        )
        painter.restore()


class PredictionsView(FrameView):
    """Top-k table. `targetChosen(class index)` when the user picks a class to explain."""

    targetChosen = Signal(int)  # noqa: N815 (Qt signal naming)
    kinds = ("predictions",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.requested: int | None = None  # a target asked for, not yet confirmed by a run

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["#", "Class", "Probability"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setShowGrid(False)
        self.table.setItemDelegateForColumn(2, ProbabilityDelegate(self.table))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(2, 170)
        self.table.setToolTip("Click a class to make it the target of gradients and CAMs")
        self.table.cellClicked.connect(self._row_chosen)
        self.table.cellActivated.connect(self._row_chosen)
        self.empty = hint_label()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        self.subscribe(self._predictions_stored, self.kinds)
        self.request_paint()

    @property
    def frame(self) -> PredictionFrame | None:
        """The predictions of the run shown (none when it failed before predicting)."""
        return self.store.get(("predictions",), self.shown_run)

    @property
    def target(self) -> int | None:
        """The class currently explained (from the last run)."""
        return self.frame.target if self.frame is not None else None

    def _predictions_stored(self, _frame: PredictionFrame) -> None:
        self.requested = None  # the run now on screen says what the target is
        self.request_paint()

    def run_changed(self, frame) -> None:
        changed = self.frame is None  # the hint says whether a run started or failed
        if isinstance(frame, RunFinished) and frame.status != "ok":
            changed |= frame.status == "error"
            if self.requested is not None:
                self.requested = None  # the re-run failed or was cancelled: stop saying "running"
                changed = True
        if changed:
            self.request_paint()

    def cleared(self) -> None:
        self.requested = None
        super().cleared()

    def _row_chosen(self, row: int, _column: int = 0) -> None:
        if self.frame is None or not 0 <= row < len(self.frame.top):
            return
        index = self.frame.top[row].index
        if index == (self.requested if self.requested is not None else self.target):
            return  # already the target (or already asked for): no re-run
        self.requested = index
        self.request_paint()
        self.targetChosen.emit(index)

    def _paint(self) -> None:
        frame = self.frame
        if frame is None or not frame.top:
            self.header.setText("")
            if self.failed:
                text = "The last run failed before the model predicted anything: the status " \
                       "bar says why."
            elif self.store.current_run is not None:
                text = "Predictions appear here after a run."
            else:
                text = "Drop an image on the window to see what the model predicts."
            self.empty.setText(text)
            self.stack.setCurrentWidget(self.empty)
            return
        shown = self.requested if self.requested is not None else frame.target
        bold = QFont(self.table.font())
        bold.setBold(True)
        self.table.setRowCount(len(frame.top))
        for row, p in enumerate(frame.top):
            cells = [QTableWidgetItem(str(row + 1)), QTableWidgetItem(p.label or str(p.index))]
            cells.append(QTableWidgetItem())
            cells[2].setData(PROB_ROLE, float(p.prob))
            cells[1].setToolTip(f"class {p.index} \u00b7 logit {p.logit:.4g}")
            for col, item in enumerate(cells):
                if p.index == shown:
                    item.setFont(bold)
                    item.setBackground(TARGET_COLOR)
                self.table.setItem(row, col, item)
        self.table.clearSelection()
        self.header.setText(self._header_text(frame))
        self.stack.setCurrentWidget(self.table)

    def _header_text(self, frame: PredictionFrame) -> str:
        labels = {p.index: p.label for p in frame.top}

        def name(index: int) -> str:
            label = labels.get(index)
            return html.escape(f"\u201c{label}\u201d ({index})" if label else f"class {index}")

        if self.requested is not None:
            return f"Target: <b>{name(self.requested)}</b> \u00b7 <i>running\u2026</i>"
        if frame.target is None:
            return "No target: this run computed no gradients. Click a class to explain it."
        where = "" if frame.target in labels else " (not in the top classes)"
        return f"Target: <b>{name(frame.target)}</b>{where} \u00b7 click a class to explain another"
