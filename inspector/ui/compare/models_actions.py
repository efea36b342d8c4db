"""File ▸ Compare with model… and the Model comparison pane.

The dialog (models_dialog.CompareModelsDialog) runs `compare-models` for the model loaded
(A) and a model B on a ModelPairRunner's thread; the cka.json it writes is shown in the Model
comparison pane (cka_view.CkaView), a dock made on the first comparison: a tab beside the
Divergence pane, among the big per-module views, where it has their room. A clicked cell
selects its layer of A in the module tree and matches the two layers' channels on the
runner's thread (the pair stays loaded while memory allows). Loading another model in the
window releases the pair (its copy of A is not the model shown any more); closing the
window cancels a job going on.

Installed by one call from the main window (`install`) with its context
(ui.shell.context.WindowContext).
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget

from inspector.ui.compare.models_runner import CompareResult, ModelPairRunner, with_seed
from inspector.ui.shell.context import WindowContext

DOCK_KEY = "model_comparison"
CLOSE_WAIT_S = 10.0


class ModelComparisonActions(QObject):
    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        self.runner = ModelPairRunner(self)
        self.runner.compared.connect(self._compared)
        self.runner.matched.connect(self._matched)
        self.dialog = None
        self.view = None
        self.dock: QDockWidget | None = None
        self.action = QAction("Compare with &model…", ctx.parent)
        self.action.setStatusTip("Run the model loaded (A) and another model or weights file "
                                 "(B) over images: how similar each layer of A is to each "
                                 "layer of B (linear CKA), and their matched channels")
        self.action.setToolTip(self.action.statusTip())
        self.action.triggered.connect(self.open_dialog)
        ctx.add_to_menu("File", self.action, after="Open &model…")
        ctx.control.router.modelLoaded.connect(lambda _frame: self.runner.release())
        ctx.closed.connect(self._window_closed)

    def open_dialog(self) -> None:
        from inspector.batch.compare_models.memory import model_bytes
        from inspector.ui.compare.models_dialog import CompareModelsDialog

        control = self.ctx.control
        loaded = control.loaded
        if loaded is None or control.model_spec is None:
            self.ctx.reporter.info("Load a model first: it is model A of the comparison.")
            return
        if self.dialog is not None:
            self.dialog.raise_()
            return
        strip = [str(e.path) for e in self.ctx.images.list.entries()
                 if e.path is not None and e.video is None]
        spec_a = with_seed(control.model_spec, loaded.seed)
        tree = control.session.tree if control.session is not None else None
        self.dialog = CompareModelsDialog(self.ctx.parent, self.runner, spec_a, loaded.name,
                                          model_bytes(loaded.model), tree, strip,
                                          getattr(control, "catalog", None),
                                          settings=self.ctx.app_settings)
        self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialog.finished_folder.connect(self.show_folder)
        self.dialog.destroyed.connect(lambda *_: setattr(self, "dialog", None))
        self.dialog.show()

    def show_folder(self, folder) -> bool:
        """Show the cka.json in `folder` in the pane; False (said) when it cannot be read."""
        try:
            doc = json.loads((Path(folder) / "cka.json").read_text())
        except (OSError, ValueError) as e:
            self.ctx.reporter.report(f"Cannot read the comparison in {folder}: {e}")
            return False
        self._ensure_dock()
        self.view.show_document(doc)
        self.dock.show()
        self.dock.raise_()
        notes = [n for n in doc.get("notes", []) if not n.startswith("linear CKA")]
        self.ctx.reporter.info(" ".join([f"Compared {doc['model_a']} with {doc['model_b']} "
                                         f"over {doc['images']} images.", *notes]), 12000)
        return True

    def _ensure_dock(self) -> None:
        if self.dock is not None:
            return
        from inspector.ui.compare.cka_view import CkaView

        self.view = CkaView()
        self.view.cellClicked.connect(self._cell_clicked)
        self.dock = QDockWidget("Model comparison", self.ctx.parent)
        self.dock.setObjectName(f"dock_{DOCK_KEY}")
        self.dock.setWidget(self.view)
        self.ctx.add_dock(DOCK_KEY, self.dock, beside="divergence")

    def _compared(self, result: CompareResult) -> None:
        if result.status != "ok" and self.dialog is None:
            self.ctx.reporter.report(result.message or "The comparison failed.")

    def _cell_clicked(self, layer_a: str, layer_b: str) -> None:
        self.ctx.tree.select_module(layer_a)
        if not self.runner.match(layer_a, layer_b):
            self.view.matches.show_failure("the last job is still running; click again "
                                           "when it has finished")
        elif not self.runner.loaded:
            self.view.matches.status.setText("Loading both models again (memory was short "
                                              "after the last job), then matching…")

    def _matched(self, result) -> None:
        if self.view is None:
            return
        if isinstance(result, str):
            self.view.matches.show_failure(result)
        else:
            self.view.matches.show_match(result)

    def _window_closed(self) -> None:
        self.runner.cancel()
        self.runner.wait(CLOSE_WAIT_S)


def install(ctx: WindowContext) -> ModelComparisonActions:
    """Add File ▸ Compare with model… (and, once used, the Model comparison pane)."""
    return ModelComparisonActions(ctx)
