"""The Edits dock: one row per edit, with a checkbox that switches it off without losing it
and a button that deletes it, and "Clear all" (one undo step). Every change goes through the
undo stack (EditHistory). Above the rows, a note says what became of the edits when another
model was loaded (kept, rescaled, dropped and why) until it is dismissed.

Rows are added and removed as the list changes (EditList's added/removed/switched), not
rebuilt: a checkbox that is being clicked is never destroyed under the mouse.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.edits.commands import EditHistory
from inspector.ui.edits.edit_list import Edit
from inspector.ui.shell.docks import Dock

EMPTY_HINT = ("No edits. Right-click a channel in Activations or a module in the tree, "
              "or drag a rectangle on the picture (Occlude), to change what the "
              "next runs compute.")


class EditRow(QWidget):
    """The checkbox (with the edit's description) and the delete button of one edit."""

    def __init__(self, edit: Edit, history: EditHistory) -> None:
        super().__init__()
        self.edit = edit
        self.check = QCheckBox(edit.describe())
        self.check.setChecked(edit.enabled)
        self.check.setToolTip("Switch this edit off for the next runs, without deleting it")
        self.check.toggled.connect(lambda on: history.set_enabled(edit, on))
        self.delete = QToolButton()
        self.delete.setText("\u2715")
        self.delete.setAutoRaise(True)
        self.delete.setToolTip("Delete this edit (Ctrl+Z brings it back)")
        self.delete.clicked.connect(lambda: history.delete(edit))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 1, 2, 1)
        layout.addWidget(self.check, 1)
        layout.addWidget(self.delete)

    def sync(self) -> None:
        if self.check.isChecked() != self.edit.enabled:
            self.check.blockSignals(True)  # the list changed it (undo): no new command
            self.check.setChecked(self.edit.enabled)
            self.check.blockSignals(False)


class EditsView(QWidget):
    def __init__(self, history: EditHistory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.edits = history.edits
        # Shared with Edit ▸ Clear all edits (the window adds it to its menu).
        self.clear_action = QAction("Clear all edits", self)
        self.clear_action.setIconText("Clear all")
        self.clear_action.setToolTip("Delete every edit (Edit ▸ Undo brings them all back)")
        self.clear_action.setStatusTip(self.clear_action.toolTip())
        self.clear_action.triggered.connect(history.clear_all)
        self.clear_button = QToolButton()
        self.clear_button.setDefaultAction(self.clear_action)
        self.clear_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.note = QLabel()
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # A few lines tall at most, scrolling beyond: the rows below stay in sight.
        note_scroll = QScrollArea()
        note_scroll.setWidget(self.note)
        note_scroll.setWidgetResizable(True)
        note_scroll.setFrameShape(QFrame.Shape.NoFrame)
        note_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        note_scroll.setMaximumHeight(self.fontMetrics().lineSpacing() * 5 + 6)
        self.note_close = QToolButton()
        self.note_close.setText("\u2715")
        self.note_close.setAutoRaise(True)
        self.note_close.setToolTip("Dismiss this note")
        self.note_close.clicked.connect(lambda: self.set_note(""))
        self.note_bar = QWidget()
        note_layout = QHBoxLayout(self.note_bar)
        note_layout.setContentsMargins(4, 2, 2, 2)
        note_layout.addWidget(note_scroll, 1)
        note_layout.addWidget(self.note_close, 0, Qt.AlignmentFlag.AlignTop)
        self.note_bar.hide()
        self.list = QListWidget()
        self.list.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.hint = QLabel(EMPTY_HINT)
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.hint.setEnabled(False)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addStretch(1)
        bar.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.note_bar)
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)
        layout.addLayout(bar)
        self.edits.added.connect(self._added)
        self.edits.removed.connect(self._removed)
        self.edits.switched.connect(self._switched)
        self.edits.replaced.connect(self._replaced)
        for row, edit in enumerate(self.edits):
            self._added(edit, row)
        self._update_hint()

    def rows(self) -> list[EditRow]:
        return [self.list.itemWidget(self.list.item(i)) for i in range(self.list.count())]

    def row_for(self, edit: Edit) -> EditRow | None:
        return next((r for r in self.rows() if r.edit is edit), None)

    def _added(self, edit: Edit, row: int) -> None:
        widget = EditRow(edit, self.history)
        item = QListWidgetItem()
        item.setSizeHint(widget.sizeHint())
        item.setToolTip(edit.describe())
        self.list.insertItem(row, item)
        self.list.setItemWidget(item, widget)
        self._update_hint()

    def _removed(self, _edit: Edit, row: int) -> None:
        # The row's widget goes with its item (Qt deletes it later, outside this click).
        self.list.takeItem(row)
        self._update_hint()

    def _switched(self, edit: Edit, _on: bool) -> None:
        row = self.row_for(edit)
        if row is not None:
            row.sync()

    def _replaced(self, edit: Edit) -> None:
        row = self.row_for(edit)
        if row is not None:
            row.check.setText(edit.describe())
            self.list.item(self.edits.row_of(edit)).setToolTip(edit.describe())

    def set_note(self, text: str) -> None:
        """What became of the edits when another model was loaded ("": no note)."""
        self.note.setText(text)
        self.note_bar.setVisible(bool(text))

    def _update_hint(self) -> None:
        self.hint.setVisible(self.list.count() == 0)
        self.list.setVisible(self.list.count() > 0)
        self.clear_action.setEnabled(self.list.count() > 0)
        self.clear_button.setVisible(self.list.count() > 0)


def make_edits_dock(window: QMainWindow, history: EditHistory) -> Dock:
    """The "Edits" dock of `window` (drops on it open images, as on every dock)."""
    dock = Dock("Edits", "edits", window, window)
    dock.setWidget(EditsView(history))
    return dock
