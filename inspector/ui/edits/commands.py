"""Changes to the window's edits as QUndoCommands, on one QUndoStack (Edit ▸ Undo, Ctrl+Z;
Redo, Ctrl+Shift+Z).

Adding, deleting, switching an edit on or off, and clearing them all are the commands
(Clear all is one step: one undo brings every edit back). Each keeps the
Edit object itself (not a copy), so that an undo after a delete puts back the same row
where it was, and a redo of a switch names the same edit. The list's `changed` signal runs
the model again, so an undo shows the previous picture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QKeySequence, QUndoCommand, QUndoStack

from inspector.ui.edits.edit_list import Edit, EditList

if TYPE_CHECKING:
    from inspector.core.edits.interventions import Intervention

UNDO_SHORTCUT = "Ctrl+Z"
REDO_SHORTCUT = "Ctrl+Shift+Z"


class AddEdit(QUndoCommand):
    def __init__(self, edits: EditList, edit: Edit) -> None:
        super().__init__(f"add “{edit.describe()}”")
        self.edits, self.edit = edits, edit
        self.row = len(edits)

    def redo(self) -> None:
        self.edits.insert(self.row, self.edit)

    def undo(self) -> None:
        self.edits.remove(self.edit)


class DeleteEdit(QUndoCommand):
    def __init__(self, edits: EditList, edit: Edit) -> None:
        super().__init__(f"delete “{edit.describe()}”")
        self.edits, self.edit = edits, edit
        self.row = edits.row_of(edit)

    def redo(self) -> None:
        self.row = self.edits.remove(self.edit)

    def undo(self) -> None:
        self.edits.insert(self.row, self.edit)


class SetEditEnabled(QUndoCommand):
    def __init__(self, edits: EditList, edit: Edit, on: bool) -> None:
        verb = "switch on" if on else "switch off"
        super().__init__(f"{verb} “{edit.describe()}”")
        self.edits, self.edit, self.on = edits, edit, on

    def redo(self) -> None:
        self.edits.set_enabled(self.edit, self.on)

    def undo(self) -> None:
        self.edits.set_enabled(self.edit, not self.on)


class ClearEdits(QUndoCommand):
    def __init__(self, edits: EditList) -> None:
        super().__init__(f"clear all {len(edits)} edits" if len(edits) != 1
                         else "clear 1 edit")
        self.edits = edits
        self.taken: list[tuple[int, Edit]] = []

    def redo(self) -> None:
        self.taken = self.edits.clear()

    def undo(self) -> None:
        self.edits.restore(self.taken)


class EditHistory(QUndoStack):
    """The undo stack of the window's edits, with the changes as methods: the dock, the
    context menus and the image pane call these, never EditList's own."""

    def __init__(self, edits: EditList, parent=None) -> None:
        super().__init__(parent)
        self.edits = edits

    def add(self, intervention: Intervention) -> Edit:
        edit = Edit(intervention)
        self.push(AddEdit(self.edits, edit))  # push() runs redo(): the edit is in the list
        return edit

    def delete(self, edit: Edit) -> None:
        self.push(DeleteEdit(self.edits, edit))

    def set_enabled(self, edit: Edit, on: bool) -> None:
        if edit.enabled != on:
            self.push(SetEditEnabled(self.edits, edit, on))

    def clear_all(self) -> None:
        """Take every edit out, as one step of the undo stack (nothing to do without any)."""
        if len(self.edits):
            self.push(ClearEdits(self.edits))

    def carry_over(self, dropped: list[Edit], rewritten: list[tuple[Edit, Intervention]]
                   ) -> None:
        """Another model: take the `dropped` edits out for good and give the `rewritten`
        ones their new intervention. The commands on the stack named the edits as they
        were for the old model, so the history goes too when anything changed."""
        for edit in dropped:
            self.edits.remove(edit)
        for edit, intervention in rewritten:
            self.edits.set_intervention(edit, intervention)
        if dropped or rewritten:
            self.clear()

    def undo_redo_actions(self, parent) -> tuple[QAction, QAction]:
        """Edit ▸ Undo and Redo, their text following the stack ("Undo add “…”")."""
        undo = self.createUndoAction(parent, "Undo")
        undo.setShortcut(QKeySequence(UNDO_SHORTCUT))
        redo = self.createRedoAction(parent, "Redo")
        redo.setShortcut(QKeySequence(REDO_SHORTCUT))
        return undo, redo
