"""The edits of the window's next runs, wired into it: their list and undo stack (Edit ▸
Undo), the Edits dock under the tree, where they are made (edit_actions.EditActions: the
tree's and the mosaic's context menus, a box on the image), and what follows a change: the
tree's badges, the occluded boxes on the image, and a rerun.

A model load checks every edit against the new model (`keep_for`, core.edits.carry, without
a rerun of its own: the load reruns): an occlusion box moves to the same part of the picture
in the new model input, an edit the new model cannot take (no such module, a channel it
lacks) is dropped; the status bar and a note in the Edits dock say which edits were kept,
changed or dropped, and why. It also adds the --edit specs the app was started with
(`add_startup`). Installed by one call from the main window (`install`) with the window's
context (ui.shell.context.WindowContext); the window keeps what it returns: the list
(`edits`), the undo stack (`history`), where edits are made (`actions`), the "edits" dock
and Edit ▸ Clear all edits (`clear_action`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt

from inspector.ui.edits.actions import EditActions
from inspector.ui.edits.commands import EditHistory
from inspector.ui.edits.dock import make_edits_dock
from inspector.ui.edits.edit_list import EditList
from inspector.ui.shell.context import WindowContext


class WindowEdits(QObject):
    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        self.edits = EditList(ctx.parent)
        self.history = EditHistory(self.edits, ctx.parent)
        self.actions = EditActions(self.history, ctx.reporter, ctx.control, ctx.runs, ctx.parent)
        dock = make_edits_dock(ctx.parent, self.history)
        self.view = dock.widget()
        self.clear_action = self.view.clear_action  # also in the Edit menu
        ctx.add_dock("edits", dock, under="tree")
        self.size_dock()
        ctx.tree.menu_extensions.append(self.actions.add_module_actions)
        ctx.images.occludeRequested.connect(self.actions.add_occlusion)
        ctx.images.boxNote.connect(lambda text: ctx.reporter.info(text, 12000))
        self.edits.changed.connect(self._changed)
        self.edits.added.connect(lambda edit, _row: ctx.tree.reveal(edit.module))
        self._quiet = False  # True while a model load drops edits (it reruns itself)
        self._preprocess = None  # the loaded model's: what the occlusion boxes were made for
        self._model = ""  # its name

    def size_dock(self) -> None:
        # A few rows under the tree; the tree keeps most of the height.
        self.ctx.resize_docks(["tree", "edits"], [700, 160], Qt.Orientation.Vertical)

    def _changed(self) -> None:
        from inspector.core.edits.interventions import Occlude

        ctx = self.ctx
        if not len(self.edits):
            self.view.set_note("")  # Clear all, or the last edit deleted: no note about them
        ctx.tree.model.set_edits({name: tuple(e.describe() for e in edits)
                                  for name, edits in self.edits.by_module().items()})
        ctx.images.set_occlusions(e.intervention.box for e in self.edits.enabled()
                                  if isinstance(e.intervention, Occlude))
        # A model load that adjusts the edits (quiet) runs itself.
        ctx.settings.update(quiet=self._quiet, edits=self.edits.interventions())

    def keep_for(self, tree) -> str:
        """A new model (`tree`, the window's `model_name`): each edit is checked against it
        (core.edits.carry): occlusion boxes follow the picture into its input, edits it
        cannot take are dropped. Returns a sentence saying what became of the edits (also
        shown in the Edits dock), or "" when nothing is worth saying (no edits, or the same
        model again with every edit as it was)."""
        ctx = self.ctx
        loaded, session = ctx.control.loaded, ctx.control.session
        if loaded is None or getattr(session, "tree", None) is not tree:
            return ""  # a newer model is loaded already: its own ModelLoaded follows
        from inspector.core.edits.carry import carry_edits, describe, summary

        old, self._preprocess = self._preprocess, loaded.preprocess
        model = ctx.model_name() or loaded.name
        switched = model != self._model
        self._model = model
        ctx.images.set_preprocess(loaded.preprocess)
        edits = list(self.edits)
        if not edits:
            self.view.set_note("")  # what became of earlier edits is old news by now
            return ""
        carried = carry_edits([e.intervention for e in edits], tree, loaded.preprocess, old,
                              ctx.images.picture_size(), model)
        dropped = [e for e, c in zip(edits, carried, strict=True) if c.dropped]
        rewritten = [(e, c.after) for e, c in zip(edits, carried, strict=True)
                     if not c.dropped and c.after != e.intervention]
        self._quiet = True
        try:
            self.history.carry_over(dropped, rewritten)
        finally:
            self._quiet = False
        if not (switched or any(c.dropped or c.changed for c in carried)):
            self.view.set_note("")
            return ""
        # The dock keeps it, one edit a line, until dismissed; the status bar's fades.
        self.view.set_note("\n".join([f"Edits after switching to {model}:",
                                       *(f"\u2022 {describe(c)}" for c in carried)]))
        return summary(carried, model)

    def add_startup(self, specs) -> None:
        """The --edit specs, checked against the model just loaded and added to the Edits
        dock (the run that follows applies them); those that cannot work are reported."""
        if not specs:
            return
        from inspector.core.edits.spec import EditSpecError, parse_edit

        refused = []
        self._quiet = True  # the model's first run follows
        try:
            for spec in specs:
                try:
                    (edit,) = self.ctx.control.session.check_edits((parse_edit(spec),))
                except EditSpecError as e:
                    refused.append(str(e))
                    continue
                self.history.add(edit)
        finally:
            self._quiet = False
        if refused:
            self.ctx.reporter.report(" ".join(f"Edit not added: {why}" for why in refused))


def install(ctx: WindowContext) -> WindowEdits:
    """The window's edits (see the module docstring)."""
    return WindowEdits(ctx)
