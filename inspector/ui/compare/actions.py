"""A/B compare in the window: Compare ▸ Pin as A and Unpin A (also on a toolbar), and what
the status bar says about run A.

Pinning runs the current request again with `keep_outputs=True`, so that the Session keeps
that run's outputs for the runs compared with it (B: they carry `compare_with=A`), and pins
the new run in the run store, which keeps it whatever runs come after it. The views read
the comparison from the store (`reference_run`); the divergence plot's clicks select a
module in the tree. Beside that plot, "Patch sweep from A" (patch_sweep_panel) patches each
module of run B from run A's image.

Installed by one call from the main window (`install`) with the window's context
(ui.shell.context.WindowContext): the run store, the session, the reporter, the views and
the tree, and the menu bar, toolbars and status bar to place its parts in.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QMenu, QToolBar

from inspector.ui.shell.context import WindowContext

A_STYLE = "color: #2e7d32; font-weight: 600;"
WARN_STYLE = "color: #ef6c00; font-weight: 600;"


class CompareActions(QObject):
    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        self.store = ctx.store
        self.control = ctx.control
        self.pinned_request = None  # run A's request: its image is the patch sweep's A
        self.sweep = None  # the patch sweep beside the divergence plot, once the views exist
        window = ctx.parent
        self.pin_action = QAction("Pin as &A", window)
        self.pin_action.setStatusTip(
            "Run the current image again and keep it as run A: the runs after it (another "
            "image, other edits or weights) are compared with it")
        self.pin_action.setToolTip(self.pin_action.statusTip())
        self.pin_action.triggered.connect(self.pin)
        self.unpin_action = QAction("&Unpin A", window)
        self.unpin_action.setStatusTip("Stop comparing with run A")
        self.unpin_action.setToolTip(self.unpin_action.statusTip())
        self.unpin_action.triggered.connect(self.unpin)

        self.menu = QMenu("&Compare", window)
        self.menu.addActions([self.pin_action, self.unpin_action])
        ctx.add_menu(self.menu, before="Help")
        self.toolbar = QToolBar("Compare", window)
        self.toolbar.setObjectName("toolbar_compare")  # saveState/restoreState find it by name
        self.toolbar.addActions([self.pin_action, self.unpin_action])
        ctx.add_toolbar(self.toolbar)
        self.label = QLabel()
        self.label.setContentsMargins(6, 0, 6, 0)
        self.label.hide()
        ctx.add_status_widget(self.label)

        # Told of runs starting and finishing (run A's label and status) and of a new model
        # (which empties the store, run A with it). Wants no data frames.
        self._subscription = self.store.subscribe(
            _ignore, kinds=(), on_run=self._run_changed, on_clear=self._store_cleared)
        self.control.runSubmitted.connect(self.update)
        self.update()

    # -- the actions --------------------------------------------------------------------------
    def pin(self) -> int | None:
        """Run the current request again, keeping its outputs, and pin that run as A; the
        run id, or None when there is nothing to run yet."""
        request = self.control.last_request
        if not self.control.ready or self.control.loaded is None or request is None:
            self.ctx.reporter.info("Run an image first: the run shown is what gets pinned.")
            return None
        # A run compared with the unedited run stays so (A's before/after); one compared
        # with the previous run A is not compared with anything: it is the new A.
        baseline = self.store.baseline_run
        compare_with = request.compare_with if request.compare_with == baseline else None
        self.pinned_request = request.with_(keep_outputs=True, compare_with=compare_with)
        run_id = self.control.submit(self.pinned_request)
        self.store.pin(run_id)
        self._reference_changed()
        return run_id

    def unpin(self) -> None:
        if self.store.pinned_run is None:
            return
        self.store.pin(None)
        self.pinned_request = None
        if self.sweep is not None:
            self.sweep.reset()
        self._reference_changed()

    # -- what is shown --------------------------------------------------------------------------
    def update(self, *_args) -> None:
        """The actions' states and the status bar's word on run A."""
        pinned = self.store.pinned_run
        self.pin_action.setEnabled(self.control.last_request is not None)
        self.unpin_action.setEnabled(pinned is not None)
        if pinned is None:
            self.label.hide()
            return
        started, status = self.store.started(pinned), self.store.status(pinned)
        name = f"run {pinned}" + (f" ({started.label})" if started and started.label else "")
        if status in ("error", "cancelled"):
            self.label.setText(f"A: {name} {'failed' if status == 'error' else 'cancelled'}")
            self.label.setStyleSheet(WARN_STYLE)
            self.label.setToolTip("Run A did not finish: pin again (Compare \u25b8 Pin as A)")
        else:
            self.label.setText(f"A: {name}")
            self.label.setStyleSheet(A_STYLE)
            edits = "; ".join(started.edits) if started is not None else ""
            self.label.setToolTip(
                "The run the later runs are compared with" + (f"; edited: {edits}" if edits else ""))
        self.label.show()

    def views_ready(self) -> None:
        """The window built its views: clicking a module in the divergence plot selects it."""
        divergence = self.ctx.views.get("divergence")
        if divergence is not None:
            divergence.moduleClicked.connect(self.ctx.tree.select_module)
        if self.sweep is None:  # "Patch sweep from A", beside the divergence plot
            from inspector.ui.compare.patch_sweep_panel import install_sweep

            self.sweep = install_sweep(self.ctx, divergence, lambda: self.pinned_request)

    def _store_cleared(self, *_args) -> None:
        """A new model emptied the store (run A with it, unless the new weights have the
        same modules): the sweep was of the old model, and goes."""
        if self.store.pinned_run is None:
            self.pinned_request = None
        if self.sweep is not None:
            self.sweep.reset()
        self.update()

    def _run_changed(self, frame) -> None:
        if frame.run_id == self.store.pinned_run:
            self.update()

    def _reference_changed(self) -> None:
        """What the current run is compared with changed, though no frame arrived: every
        view shows the comparison afresh (or stops showing it)."""
        self.update()
        for view in self.ctx.views.values():
            view.request_paint()


def _ignore(_frame) -> None:
    """The subscription wants no data frames (kinds=()): nothing to do with one."""


def install(ctx: WindowContext) -> CompareActions:
    """Add Compare ▸ Pin as A / Unpin A, its toolbar and status to the window."""
    return CompareActions(ctx)
