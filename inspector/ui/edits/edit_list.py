"""The window's edits: the interventions (core.edits.interventions) that the next runs apply.

Each edit is one Intervention and a switch: a switched-off edit stays in the list (the Edits
dock shows it) but does not reach the runs. The list changes only through the undo stack's
commands (edit_commands.py), so that every change can be undone; whoever shows or runs
the edits listens to `changed`.

No torch here: an Intervention is a small frozen record, and this module only holds them.
"""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from inspector.core.edits.interventions import Intervention

_ids = count(1)


class Edit:
    """One intervention and whether it is on. Compared by identity: two edits that do the
    same thing are still two rows of the dock, and an undo names the one it took away."""

    __slots__ = ("id", "intervention", "enabled")

    def __init__(self, intervention: Intervention, enabled: bool = True) -> None:
        self.id = next(_ids)
        self.intervention = intervention
        self.enabled = enabled

    @property
    def module(self) -> str:
        return self.intervention.module

    def describe(self) -> str:
        return self.intervention.describe()

    def __repr__(self) -> str:
        return f"Edit({self.describe()!r}, enabled={self.enabled})"


class EditList(QObject):
    """The edits in the order they were made (the order the hooks apply them in)."""

    # Any change: an edit added, removed or switched. The runs and the tree listen to this.
    changed = Signal()
    # Finer signals, for views that update rows in place: (edit, its row).
    added = Signal(object, int)
    removed = Signal(object, int)
    switched = Signal(object, bool)
    replaced = Signal(object)  # an edit's intervention was rewritten for another model

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._edits: list[Edit] = []

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._edits)

    def __iter__(self):
        return iter(list(self._edits))

    def __getitem__(self, row: int) -> Edit:
        return self._edits[row]

    def row_of(self, edit: Edit) -> int:
        for row, e in enumerate(self._edits):
            if e is edit:
                return row
        raise ValueError(f"{edit!r} is not in the list")

    def enabled(self) -> list[Edit]:
        return [e for e in self._edits if e.enabled]

    def interventions(self) -> tuple[Intervention, ...]:
        """What the next run applies (RunRequest.interventions), in the order made."""
        return tuple(e.intervention for e in self._edits if e.enabled)

    @property
    def active(self) -> bool:
        """Some edit is on: the runs are edited, and the unedited run is kept beside them."""
        return any(e.enabled for e in self._edits)

    def by_module(self, enabled_only: bool = True) -> dict[str, list[Edit]]:
        """Module name -> its edits ("" is the model itself: occlusions of its input)."""
        out: dict[str, list[Edit]] = {}
        for e in self._edits:
            if e.enabled or not enabled_only:
                out.setdefault(e.module, []).append(e)
        return out

    # -- changing (the undo commands call these) --------------------------------------------
    def insert(self, row: int, edit: Edit) -> None:
        row = max(0, min(row, len(self._edits)))
        self._edits.insert(row, edit)
        self.added.emit(edit, row)
        self.changed.emit()

    def append(self, edit: Edit) -> None:
        self.insert(len(self._edits), edit)

    def remove(self, edit: Edit) -> int:
        """Take `edit` out; returns the row it had (to put it back there on undo)."""
        row = self.row_of(edit)
        del self._edits[row]
        self.removed.emit(edit, row)
        self.changed.emit()
        return row

    def set_enabled(self, edit: Edit, on: bool) -> None:
        self.row_of(edit)  # raises for an edit that is not here
        if edit.enabled == on:
            return
        edit.enabled = on
        self.switched.emit(edit, on)
        self.changed.emit()

    def set_intervention(self, edit: Edit, intervention: Intervention) -> None:
        """What `edit` does, rewritten (another model: its occlusion box moved)."""
        self.row_of(edit)
        edit.intervention = intervention
        self.replaced.emit(edit)
        self.changed.emit()

    def clear(self) -> list[tuple[int, Edit]]:
        """Take every edit out, with one `changed`; returns (row, edit) pairs, for `restore`."""
        taken = list(enumerate(self._edits))
        if not taken:
            return taken
        for row in range(len(self._edits) - 1, -1, -1):
            edit = self._edits.pop(row)
            self.removed.emit(edit, row)
        self.changed.emit()
        return taken

    def restore(self, rows: list[tuple[int, Edit]]) -> None:
        """Put back what `clear` took, in its rows, with one `changed` (one rerun)."""
        for row, edit in sorted(rows, key=lambda pair: pair[0]):
            row = max(0, min(row, len(self._edits)))
            self._edits.insert(row, edit)
            self.added.emit(edit, row)
        if rows:
            self.changed.emit()
