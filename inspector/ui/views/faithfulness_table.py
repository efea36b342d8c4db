"""The Faithfulness tab's table: one row per method scored on this image, one column per
number (core.explain.metrics.ranking.COLUMNS), each column's best in bold, with every
value equal to it as shown (to the 3 decimals of the cell: a tie is bold everywhere). Clicking a
column's header puts the rows in that column's order, best first (lower first where lower
is better); each header's tooltip says how its numbers were computed and which way is
better.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from inspector.core.explain.catalog import METHODS
from inspector.core.explain.metrics.ranking import HIGHER, Column, best_first, columns_for
from inspector.core.records.frames import MetricsFrame

BEST_BRUSH = QBrush(QColor(76, 175, 80, 60))
UNDEFINED = "\u2014"  # what a cell shows without a value
TABLE_MIN_HEIGHT = 110  # pixels: the header and four rows, less than the pane's curves


def method_title(key: tuple[str, str]) -> str:
    method, _layer = key
    return METHODS[method].title if method in METHODS else method


def _text(column: Column, value: float | None) -> str:
    if value is None:
        return UNDEFINED
    if column.key in ("increase", "pointing"):
        return "yes" if value else "no"
    return f"{value:.3f}"


class ScoreTable(QTableWidget):
    """`methodActivated((method, layer))` when a row is double-clicked."""

    methodActivated = Signal(object)  # noqa: N815 (Qt signal naming)

    def __init__(self, parent=None) -> None:
        super().__init__(0, 0, parent)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().sectionClicked.connect(self.sort_by)
        self.cellDoubleClicked.connect(lambda row, _col: self._activated(row))
        self.columns: list[Column] = []
        self.keys: list[tuple[str, str]] = []  # the rows' methods, in the order shown
        self.sorted_by: str | None = None  # the column key the rows are ordered by
        self._frames: dict[tuple[str, str], MetricsFrame] = {}

    def set_frames(self, frames: Mapping[tuple[str, str], MetricsFrame]) -> None:
        """Show these scores (one protocol), keeping the order chosen where it can."""
        self._frames = dict(frames)
        first = next(iter(frames.values()), None)
        self.columns = columns_for(first.options.metrics) if first is not None else []
        if self.sorted_by not in {c.key for c in self.columns}:
            self.sorted_by = self.columns[0].key if self.columns else None
        self._fill()

    def sort_by(self, section: int | str) -> None:
        """Order the rows best first by a column (its index or its key)."""
        if isinstance(section, int):
            if not 0 <= section < len(self.columns):
                return
            section = self.columns[section].key
        self.sorted_by = section
        self._fill()

    def values(self, column: Column) -> dict[tuple[str, str], float | None]:
        return {k: column.value(f.scores) for k, f in self._frames.items()}

    def _fill(self) -> None:
        column = next((c for c in self.columns if c.key == self.sorted_by), None)
        keys = list(self._frames)
        if column is not None:
            keys = best_first(column, self.values(column))
        self.keys = keys
        self.clear()
        self.setColumnCount(len(self.columns))
        self.setRowCount(len(keys))
        first = next(iter(self._frames.values()), None)
        for j, c in enumerate(self.columns):
            arrow = "\u2191" if c.better == HIGHER else "\u2193"
            head = QTableWidgetItem(f"{c.title} {arrow}")
            if first is not None:
                head.setToolTip(f"{c.better.capitalize()} is better; bold: the best, and "
                                f"every value equal to it to the decimals shown. "
                                f"{first.options.describe(c.metric, first.score)}")
            if c.key == self.sorted_by:
                font = head.font()
                font.setUnderline(True)
                head.setFont(font)
            self.setHorizontalHeaderItem(j, head)
        for i, key in enumerate(keys):
            frame = self._frames[key]
            row = QTableWidgetItem(method_title(key))
            where = f" at {key[1]}" if key[1] is not None else " (no layer: the model's attention)"
            row.setToolTip(frame.scores.undefined or f"{method_title(key)}{where}")
            self.setVerticalHeaderItem(i, row)
        for j, c in enumerate(self.columns):
            values = self.values(c)
            ranked = best_first(c, values)
            best = ranked[0] if sum(v is not None for v in values.values()) >= 2 else None
            best_text = _text(c, values[best]) if best is not None else None
            for i, key in enumerate(keys):
                item = QTableWidgetItem(_text(c, values[key]))
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                note = self._frames[key].scores.notes.get(c.metric)
                undefined = self._frames[key].scores.undefined
                if values[key] is None and (note or undefined):
                    item.setToolTip(note or undefined)
                if best_text is not None and values[key] is not None \
                        and _text(c, values[key]) == best_text:
                    font = QFont(item.font())
                    font.setBold(True)
                    item.setFont(font)
                    item.setBackground(BEST_BRUSH)
                self.setItem(i, j, item)

    def _activated(self, row: int) -> None:
        if 0 <= row < len(self.keys):
            self.methodActivated.emit(self.keys[row])
