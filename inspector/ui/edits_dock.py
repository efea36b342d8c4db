"""The Edits dock: one row per edit, with a checkbox that switches it off without losing it
and a button that deletes it. Every change goes through the undo stack (EditHistory).

Rows are added and removed as the list changes (EditList's added/removed/switched), not
rebuilt: a checkbox that is being clicked is never destroyed under the mouse.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.docks import Dock
from inspector.ui.edit_commands import EditHistory
from inspector.ui.edits import Edit

EMPTY_HINT = ("No edits. Right-click a channel in Activations or a module in the tree, "
              "or drag a rectangle on the model input (Occlude), to change what the "
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
        self.list = QListWidget()
        self.list.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.hint = QLabel(EMPTY_HINT)
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.hint.setEnabled(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)
        self.edits.added.connect(self._added)
        self.edits.removed.connect(self._removed)
        self.edits.switched.connect(self._switched)
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

    def _update_hint(self) -> None:
        self.hint.setVisible(self.list.count() == 0)
        self.list.setVisible(self.list.count() > 0)


def make_edits_dock(window: QMainWindow, history: EditHistory) -> Dock:
    """The "Edits" dock of `window` (drops on it open images, as on every dock)."""
    dock = Dock("Edits", "edits", window, window)
    dock.setWidget(EditsView(history))
    return dock
