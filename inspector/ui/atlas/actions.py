"""File ▸ Open atlas…, File ▸ New atlas… and the Dataset dock's place in the window.

The dock (dataset_dock.DatasetView) fills the "dataset" pane that docks.py lays out. It
follows the module selected in the tree and the channel clicked in the Activations mosaic
(`MosaicView.channelClicked`, the click that also zooms the mosaic); a double-clicked image
is listed in the image pane and run. For the model an atlas was made with, the module tree
shows each atlas layer's dead channels (ModuleTreeModel.set_atlas).

File ▸ New atlas… (and the dock's "New atlas…" button) opens atlas_dialog.AtlasDialog for
the model loaded: the atlas command runs on a thread of its own (atlas_runner.AtlasRunner),
and the atlas it writes opens in the dock. Closing the window cancels a run going on.

Installed by one call from the main window once its views exist (`install`), with the
window's context (ui.shell.context.WindowContext): its docks, File menu, tree, image pane,
views, runs, session, reporter and remembered settings.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QToolButton, QWidget

from inspector.ui.atlas.atlas_file import AtlasError, read_atlas
from inspector.ui.atlas.dataset_dock import DatasetView
from inspector.ui.atlas.dialog import AtlasDialog
from inspector.ui.atlas.runner import AtlasResult, AtlasRunner
from inspector.ui.shell.context import WindowContext

SETTINGS_KEY = "atlas_dir"  # the folder of the atlas opened last: where the dialog starts
CLOSE_WAIT_S = 10.0  # the window closing: how long a cancelled atlas may take to stop


class AtlasActions(QObject):
    """File ▸ Open atlas…, the Dataset dock's view, and its wiring to the window."""

    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        window = ctx.parent
        self.view = DatasetView()
        self.dock = ctx.docks["dataset"]
        placeholder = self.dock.widget()
        self.dock.setWidget(self.view)
        if placeholder is not None:
            placeholder.deleteLater()
        self.open_action = QAction("Open &atlas…", window)
        self.open_action.setStatusTip("Open the folder written by `network-inspector atlas`: "
                                      "the images that excite each channel most")
        self.open_action.triggered.connect(self.open_dialog)
        ctx.add_to_menu("File", self.open_action, after="Open &model…")
        self.runner = AtlasRunner(self)
        self.runner.finished.connect(self._atlas_finished)
        self.dialog: AtlasDialog | None = None
        self.new_action = QAction("&New atlas…", window)
        self.new_action.setStatusTip("Run `network-inspector atlas` with the model loaded: the "
                                     "images of a folder that excite each channel most")
        self.new_action.triggered.connect(self.new_dialog)
        ctx.add_to_menu("File", self.new_action, after="Open &atlas…")
        self.view.layout().insertWidget(0, self._buttons())

        self.view.imageRequested.connect(self.open_image)
        self.view.failed.connect(ctx.reporter.report)
        ctx.tree.moduleSelected.connect(self.view.show_module)
        activation = ctx.views.get("activation")
        if activation is not None:
            activation.panel.mosaic_view.channelClicked.connect(
                lambda channel: self.channel_clicked(activation.module, channel))
        ctx.control.router.modelLoaded.connect(self._model_loaded)
        ctx.closed.connect(self.view.stop)
        ctx.closed.connect(self._window_closed)
        self.view.set_loaded_model(ctx.model_name())
        self.view.show_module(ctx.tree.current_module())

    def open_dialog(self) -> None:
        start = str(self.ctx.app_settings.value(SETTINGS_KEY, str(Path.home())))
        folder = QFileDialog.getExistingDirectory(self.ctx.parent, "Open an atlas folder", start)
        if folder:
            self.open(folder)

    def new_dialog(self) -> AtlasDialog | None:
        """File ▸ New atlas…: the atlas command's options for the model loaded (one dialog;
        asked again, it comes to the front)."""
        control = self.ctx.control
        loaded = control.loaded
        if loaded is None or control.model_spec is None:
            self.ctx.reporter.report("Load a model first: an atlas is made with the model "
                                        "loaded.")
            return None
        if self.dialog is None:
            from inspector.core.models.devices import available_devices
            from inspector.ui.open_model.dialog import spec_label

            device = str(loaded.device)
            devices = [device, *(d for d in available_devices() if d != device)]
            loaded_images = list(dict.fromkeys(
                str(e.path) for e in self.ctx.images.list.entries() if e.path is not None))
            # Where Add folder… starts: the folder added last, else the loaded images' one.
            first = str(Path(loaded_images[0]).parent) if loaded_images else str(Path.home())
            start = str(self.ctx.app_settings.value("atlas/input_dir", "") or first)
            self.dialog = AtlasDialog(
                self.ctx.parent, self.runner, spec_label(control.model_spec), control.model_spec,
                loaded.seed, devices, layers=self.ctx.tree.current_module() or "",
                start_dir=start, inputs=loaded_images, settings=self.ctx.app_settings)
            self.dialog.opened.connect(self.open)
            self.dialog.finished.connect(self._dialog_closed)
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()
        return self.dialog

    def _dialog_closed(self, _result: int) -> None:
        if self.dialog is not None and not self.runner.running:
            self.dialog.deleteLater()
            self.dialog = None

    def _atlas_finished(self, result: AtlasResult) -> None:
        """The atlas's end in the window's status bar: the command's own sentence."""
        if result.status == "failed" or (result.status == "ok" and result.code):
            self.ctx.reporter.report(f"Atlas: {result.message}" if result.message
                                        else "The atlas failed.", "\n".join(result.messages))
        elif result.status == "cancelled":
            self.ctx.reporter.info(f"Atlas: {result.message}")

    def _window_closed(self) -> None:
        # Its end, delivered later, must not report into a closed window.
        self.runner.blockSignals(True)
        if self.runner.running:
            self.runner.cancel()
            self.runner.wait(CLOSE_WAIT_S)

    def _buttons(self) -> QWidget:
        """"New atlas…" and "Open atlas…" at the top of the dock."""
        bar = QWidget()
        row = QHBoxLayout(bar)
        row.setContentsMargins(0, 0, 0, 0)
        for action in (self.new_action, self.open_action):
            button = QToolButton()
            button.setDefaultAction(action)
            row.addWidget(button)
        row.addStretch(1)
        return bar

    def open(self, where: str | Path) -> bool:
        """Show the atlas in `where` (its folder or atlas.json); a bad one is a message in the
        status bar and the atlas shown before stays."""
        try:
            atlas = read_atlas(where)
        except AtlasError as e:
            self.ctx.reporter.report(str(e))
            return False
        self.ctx.app_settings.set_value(SETTINGS_KEY, str(atlas.folder))
        self.view.set_atlas(atlas)
        self.view.show_module(self.ctx.tree.current_module())
        self._tree_counts()
        self.dock.show()
        self.dock.raise_()
        self.ctx.reporter.info(f"Opened the atlas in {atlas.folder}: {atlas.describe()}.")
        return True

    def channel_clicked(self, module: str | None, channel: int) -> None:
        self.view.show_channel(module, channel)
        if self.view.atlas is not None and self.view.channel is not None:
            self.dock.raise_()  # the user asked to see it (the dock may be a tab)

    def open_image(self, path: str) -> None:
        """List the image in the image pane and run it (listed already: shown and run again)."""
        images = self.ctx.images
        current = images.current()
        if current is not None and current.path is not None and Path(current.path) == Path(path):
            self.ctx.runs.rerun()
        else:
            images.add_paths([path])
        self.ctx.docks["images"].raise_()

    def _model_loaded(self, frame) -> None:
        self.view.set_loaded_model(frame.name)
        self._tree_counts()

    def _tree_counts(self) -> None:
        """The atlas's dead channels per layer in the module tree, for the model it was made
        with only: another model's counts would be read as this one's."""
        atlas, model = self.view.atlas, self.ctx.model_name()
        if atlas is None or atlas.model != model:
            self.ctx.tree.model.set_atlas({})
            return
        self.ctx.tree.model.set_atlas(
            {name: (len(layer.dead), layer.channels) for name, layer in atlas.layers.items()},
            f"{atlas.images:,} images, {atlas.folder}")


def install(ctx: WindowContext) -> AtlasActions:
    """The Dataset dock in the window (once its views exist)."""
    return AtlasActions(ctx)
