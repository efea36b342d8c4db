"""The edits of the window's next runs, wired into it: their list and undo stack (Edit ▸
Undo), the Edits dock under the tree, where they are made (edit_actions.EditActions: the
tree's and the mosaic's context menus, a box on the image), and what follows a change: the
tree's badges, the occluded boxes on the image, and a rerun.

A model load drops the edits of modules the new model lacks (`keep_for`, without a rerun
of its own: the load reruns), and adds the --edit specs the app was started with
(`add_startup`). Installed by one call from the main window (`install`); it sets the
window's `edits`, `history` and `edit_actions` and its "edits" dock.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QMainWindow

from inspector.ui.edit_actions import EditActions
from inspector.ui.edit_commands import EditHistory
from inspector.ui.edits import EditList
from inspector.ui.edits_dock import make_edits_dock


class WindowEdits(QObject):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.edits = window.edits = EditList(window)
        self.history = window.history = EditHistory(self.edits, window)
        window.runs.edits = self.edits
        self.actions = window.edit_actions = EditActions(
            self.history, window.reporter, window.control, window.runs, window)
        dock = make_edits_dock(window, self.history)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        window.splitDockWidget(window.docks["tree"], dock, Qt.Orientation.Vertical)
        window.docks["edits"] = dock
        self.size_dock()
        window.tree.menu_extensions.append(self.actions.add_module_actions)
        window.images.occludeRequested.connect(self.actions.add_occlusion)
        self.edits.changed.connect(self._changed)
        self.edits.added.connect(lambda edit, _row: window.tree.reveal(edit.module))
        self._quiet = False  # True while a model load drops edits (it reruns itself)

    def size_dock(self) -> None:
        # A few rows under the tree; the tree keeps most of the height.
        docks = self.window.docks
        self.window.resizeDocks([docks["tree"], docks["edits"]], [700, 160],
                                Qt.Orientation.Vertical)

    def _changed(self) -> None:
        from inspector.core.interventions import Occlude  # loaded: edits exist

        window = self.window
        window.tree.model.set_edits({name: tuple(e.describe() for e in edits)
                                     for name, edits in self.edits.by_module().items()})
        window.images.set_occlusions(e.intervention.box for e in self.edits.enabled()
                                     if isinstance(e.intervention, Occlude))
        if not self._quiet:
            window.runs.rerun()

    def keep_for(self, tree) -> str:
        """A new model: edits of modules it does not have are dropped (the model runs
        after this anyway); returns a note saying so, or ""."""
        gone = [e for e in self.edits if e.module not in tree.modules]
        if not gone:
            return ""
        self._quiet = True
        try:
            self.history.forget(gone)
        finally:
            self._quiet = False
        names = ", ".join(sorted({e.module for e in gone}))
        return f"Dropped {len(gone)} edit(s): this model has no module {names}."

    def add_startup(self, specs) -> None:
        """The --edit specs, checked against the model just loaded and added to the Edits
        dock (the run that follows applies them); those that cannot work are reported."""
        if not specs:
            return
        from inspector.core.edit_spec import EditSpecError, parse_edit

        refused = []
        self._quiet = True  # the model's first run follows
        try:
            for spec in specs:
                try:
                    (edit,) = self.window.control.session.check_edits((parse_edit(spec),))
                except EditSpecError as e:
                    refused.append(str(e))
                    continue
                self.history.add(edit)
        finally:
            self._quiet = False
        if refused:
            self.window.reporter.report(" ".join(f"Edit not added: {why}" for why in refused))


def install(window: QMainWindow) -> WindowEdits:
    """The window's edits (see the module docstring)."""
    return WindowEdits(window)
