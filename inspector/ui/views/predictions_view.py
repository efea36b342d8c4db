"""The top-k predictions; clicking a class makes it the target for gradients and CAMs.

When the run shown is compared with another (the store's `reference_run`: the unedited run
of an edited one, before/after, or a pinned run A), the table has both probabilities and
the change, the classes of both top-k lists, the largest changes first.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

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

from inspector.core.records.frames import PredictionFrame, RunFinished
from inspector.ui.image.task_overlay import nothing_detected, nothing_detected_text
from inspector.ui.views.base import FrameView, hint_label

PROB_ROLE = Qt.ItemDataRole.UserRole + 1
BAR_COLOR = QColor("#4c9be8")
TARGET_COLOR = QColor(240, 160, 48, 70)
TEXT_WIDTH = 56  # pixels kept for "100.0%" right of the bar
UP_COLOR = QColor("#3a9a3a")
DOWN_COLOR = QColor("#d05050")
EDITED_COLOR = "#e0a030"


@dataclass(frozen=True)
class Change:
    """One class in a comparison of two runs' top-k predictions. A class missing from one
    run's top-k has a probability below that list's last one: its change is then known only
    as the interval [low, high]."""

    index: int
    label: str
    before: float | None  # the reference run's probability; None: not in its top-k
    after: float | None  # the current run's
    low: float  # after - before, or the least it can be
    high: float  # after - before, or the most it can be

    @property
    def exact(self) -> bool:
        return self.before is not None and self.after is not None

    @property
    def least(self) -> float:
        """The smallest |change| this class can have: what rows are ordered by."""
        return 0.0 if self.low <= 0.0 <= self.high else min(abs(self.low), abs(self.high))


def compare_predictions(reference: PredictionFrame, current: PredictionFrame) -> list[Change]:
    """The classes of both top-k lists, the largest change first (ties: the more probable
    class first)."""
    before = {p.index: p for p in reference.top}
    after = {p.index: p for p in current.top}
    # Below the last probability of a top-k list is all that is known of a class not in it.
    floor_before = min((p.prob for p in reference.top), default=0.0)
    floor_after = min((p.prob for p in current.top), default=0.0)
    rows = []
    for index in [*after, *(i for i in before if i not in after)]:
        b, a = before.get(index), after.get(index)
        label = (a or b).label
        if a is not None and b is not None:
            low = high = a.prob - b.prob
        elif a is not None:
            low, high = a.prob - floor_before, a.prob
        else:
            low, high = -b.prob, floor_after - b.prob
        rows.append(Change(index, label, None if b is None else b.prob,
                           None if a is None else a.prob, low, high))
    rows.sort(key=lambda c: (-c.least, -max(c.before or 0.0, c.after or 0.0)))
    return rows


def _points(value: float) -> str:
    """A change of probability in percentage points, signed ("0.0" has no sign); one that
    one decimal would show as 0.0 gets two ("\u22120.04"), so that a change drawn in red or
    green never reads as none."""
    text = f"{100 * value:+.1f}"
    if text in ("+0.0", "-0.0"):
        text = f"{100 * value:+.2f}"
    return "0.0" if text in ("+0.00", "-0.00") else text.replace("-", "\u2212")


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
        self.rows: list[int] = []  # the class index of each row shown
        self.changes: list[Change] = []  # the rows of a comparison (empty when none)

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.table = QTableWidget(0, 3)  # its labels and column widths: _columns
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setShowGrid(False)
        delegate = ProbabilityDelegate(self.table)
        self.table.setItemDelegateForColumn(2, delegate)
        self.table.setItemDelegateForColumn(3, delegate)  # the second run's, when comparing
        self._columns(compared=None)
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

    @property
    def reference(self) -> PredictionFrame | None:
        """The predictions the shown ones are compared with (see RunStore.reference_run)."""
        frame, reference = self.frame, self.store.reference_run
        if frame is None or reference is None or reference == frame.run_id:
            return None
        return self.store.get(("predictions",), reference)

    def _predictions_stored(self, frame: PredictionFrame) -> None:
        if frame.run_id == self.shown_run:
            self.requested = None  # the run now on screen says what the target is
        self.request_paint()

    def run_changed(self, frame) -> None:
        changed = self.frame is None  # the hint says whether a run started or failed
        if isinstance(frame, RunFinished) and frame.status != "ok":
            # An error says so; a cancel shows the run before it again (RunStore.shown).
            changed = True
            if self.requested is not None:
                self.requested = None  # the re-run failed or was cancelled: stop saying "running"
                changed = True
        if changed:
            self.request_paint()

    def cleared(self) -> None:
        self.requested = None
        super().cleared()

    def _row_chosen(self, row: int, _column: int = 0) -> None:
        if self.frame is None or not 0 <= row < len(self.rows):
            return
        index = self.rows[row]
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
            elif nothing_detected(frame):
                text = nothing_detected_text(frame)
            elif self.store.cancelled:
                text = f"Run {self.store.current_run} was cancelled before it finished, and " \
                       "no earlier run is kept: run again (F5) to see the predictions."
            elif self.store.current_run is not None:
                text = "Predictions appear here after a run."
            else:
                text = "Drop an image on the window to see what the model predicts."
            self.empty.setText(text)
            self.stack.setCurrentWidget(self.empty)
            return
        reference = self.reference
        names = self.store.reference_names() if reference is not None else None
        if names is None:
            self.changes = []
            self.rows = [p.index for p in frame.top]
            self._columns(None)
            self._fill([[QTableWidgetItem(p.label or str(p.index)), _prob_item(p.prob)]
                        for p in frame.top], frame)
        else:
            self.changes = compare_predictions(reference, frame)
            self.rows = [c.index for c in self.changes]
            self._columns(names)
            floors = [min((p.prob for p in f.top), default=0.0) for f in (reference, frame)]
            self._fill([[QTableWidgetItem(c.label or str(c.index)),
                         _prob_item(c.before, floors[0], reference.run_id),
                         _prob_item(c.after, floors[1], frame.run_id),
                         _change_item(c)] for c in self.changes], frame)
        self.table.clearSelection()
        self.header.setText(self._header_text(frame))
        self.stack.setCurrentWidget(self.table)

    def _columns(self, compared: tuple[str, str] | None) -> None:
        """Three columns, or, comparing two runs named `compared`, five."""
        labels = ["#", "Class", "Probability"] if compared is None else \
            ["#", "Class", compared[0].capitalize(), compared[1].capitalize(), "Change"]
        if [self.table.horizontalHeaderItem(i) and self.table.horizontalHeaderItem(i).text()
                for i in range(self.table.columnCount())] == labels:
            return
        self.table.setColumnCount(len(labels))
        self.table.setHorizontalHeaderLabels(labels)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        if compared is None:
            header.setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(2, 170)
        else:
            # Five columns in a dock often narrower than three fixed ones: the class and the
            # two probabilities share the width; the change takes what its text needs.
            header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
            header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
            header.setSectionResizeMode(4, QHeaderView.ResizeMode.ResizeToContents)
        if compared is not None:
            self.table.horizontalHeaderItem(4).setToolTip(
                f"{compared[1]} \u2212 {compared[0]}, in percentage points; a range where "
                "the class is not in one run's top classes")

    def _fill(self, rows: list[list[QTableWidgetItem]], frame: PredictionFrame) -> None:
        """Put `rows` (all but the "#" column) in the table, the target's row in bold."""
        shown = self.requested if self.requested is not None else frame.target
        logits = {p.index: p.logit for p in frame.top}
        bold = QFont(self.table.font())
        bold.setBold(True)
        self.table.setRowCount(len(rows))
        for row, (index, cells) in enumerate(zip(self.rows, rows, strict=True)):
            cells = [QTableWidgetItem(str(row + 1)), *cells]
            logit = f" \u00b7 logit {logits[index]:.4g}" if index in logits else ""
            # The whole label: a narrow dock elides it.
            label = cells[1].text()
            named = f"{label} (class {index})" if label != str(index) else f"class {index}"
            cells[1].setToolTip(f"{named}{logit}")
            for col, item in enumerate(cells):
                if index == shown:
                    item.setFont(bold)
                    item.setBackground(TARGET_COLOR)
                self.table.setItem(row, col, item)

    def _header_text(self, frame: PredictionFrame) -> str:
        labels = {p.index: p.label for p in frame.top}

        def name(index: int) -> str:
            label = labels.get(index)
            return html.escape(f"\u201c{label}\u201d ({index})" if label else f"class {index}")

        if self.requested is not None:
            text = f"Target: <b>{name(self.requested)}</b> \u00b7 <i>running\u2026</i>"
        elif frame.target is None:
            text = "No target: this run computed no gradients. Click a class to explain it " \
                   "(its class activation map)."
        else:
            where = "" if frame.target in labels else " (not in the top classes)"
            text = (f"Target: <b>{name(frame.target)}</b>{where} \u00b7 click a class to "
                    "explain another")
        return text + "".join(f"<br>{line}" for line in self._run_lines(frame))

    def _run_lines(self, frame: PredictionFrame) -> list[str]:
        """Whether the run shown is edited, and what it is compared with."""
        lines = []
        store = self.store
        if store.cancelled and frame.run_id == store.shown:
            edits = "" if store.edited(frame.run_id) else ", without edits"
            lines.append(f"<b>{html.escape(_run_name(store, frame.run_id))}{edits}</b>, the last "
                         f"complete run: run {store.current_run} was cancelled")
        started = self.store.started(frame.run_id)
        if started is not None and started.edits:
            edits = html.escape("; ".join(started.edits))
            lines.append(f"<span style='color:{EDITED_COLOR}'><b>edited:</b></span> {edits}")
        reference = self.reference
        names = self.store.reference_names() if reference is not None else None
        if names is not None:
            first, second = names
            lines.append(
                f"<b>{first}</b>: {html.escape(_run_name(self.store, reference.run_id))} "
                f"\u00b7 <b>{second}</b>: {html.escape(_run_name(self.store, frame.run_id))} "
                f"\u00b7 largest changes first"
            )
        return lines


def _run_name(store, run_id: int) -> str:
    """"run 7 (cat.png)", "run 7 (cat.png, unedited)"."""
    started = store.started(run_id)
    parts = [started.label] if started is not None and started.label else []
    if run_id in (store.baseline_run, store.shown_baseline):
        parts.append("unedited")
    return f"run {run_id}" + (f" ({', '.join(parts)})" if parts else "")


def _prob_item(prob: float | None, floor: float = 0.0, run_id: int | None = None) -> QTableWidgetItem:
    """A probability drawn as a bar; None: not in that run's top-k, so below its last one."""
    item = QTableWidgetItem()
    of_run = f" in run {run_id}" if run_id is not None else ""
    if prob is not None:
        item.setData(PROB_ROLE, float(prob))
        # The figure in words too: a narrow cell clips the one its bar is drawn with.
        item.setToolTip(f"{100 * prob:.2f}%{of_run}")
    else:
        item.setText(f"< {100 * floor:.1f}%")
        item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight)
        item.setForeground(QColor("#8a8a8a"))
        item.setToolTip(f"< {100 * floor:.1f}%: not among the top classes of run {run_id}, "
                        f"so below its last one")
    return item


def _change_item(change: Change) -> QTableWidgetItem:
    if change.exact:
        text = f"{_points(change.low)} pp"
    else:
        text = f"{_points(change.low)} \u2026 {_points(change.high)} pp"
    item = QTableWidgetItem(text)
    item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight)
    item.setToolTip(f"{text}: the change in percentage points" if change.exact else
                    f"{text}: somewhere in this range of percentage points (the class is "
                    f"not among one run's top classes)")
    if change.least > 0 and _points(change.low) != "0.0":
        item.setForeground(UP_COLOR if change.low > 0 else DOWN_COLOR)
    return item
