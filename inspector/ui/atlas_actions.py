"""File ▸ Open atlas… and the Dataset dock's place in the window.

The dock (dataset_dock.DatasetView) fills the "dataset" pane that docks.py lays out. It
follows the module selected in the tree and the channel clicked in the Activations mosaic
(`MosaicView.channelClicked`, the click that also zooms the mosaic); a double-clicked image
is listed in the image pane and run. For the model an atlas was made with, the module tree
shows each atlas layer's dead channels (ModuleTreeModel.set_atlas).

Installed by one call from the main window once its views exist (`install`); it uses only
the window's public parts: its docks, menus, tree, image pane, views, runs, router,
reporter and settings.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from inspector.ui.atlas_file import AtlasError, read_atlas
from inspector.ui.dataset_dock import DatasetView

SETTINGS_KEY = "atlas_dir"  # the folder of the atlas opened last: where the dialog starts


class AtlasActions(QObject):
    """File ▸ Open atlas…, the Dataset dock's view, and its wiring to the window."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.view = DatasetView()
        self.dock = window.docks["dataset"]
        placeholder = self.dock.widget()
        self.dock.setWidget(self.view)
        if placeholder is not None:
            placeholder.deleteLater()
        self.open_action = QAction("Open &atlas…", window)
        self.open_action.setStatusTip("Open the folder written by `network-inspector atlas`: "
                                      "the images that excite each channel most")
        self.open_action.triggered.connect(self.open_dialog)
        _insert_in_file_menu(window, self.open_action)

        self.view.imageRequested.connect(self.open_image)
        self.view.failed.connect(window.reporter.report)
        window.tree.moduleSelected.connect(self.view.show_module)
        activation = window.views.get("activation")
        if activation is not None:
            activation.panel.mosaic_view.channelClicked.connect(
                lambda channel: self.channel_clicked(activation.module, channel))
        window.router.modelLoaded.connect(self._model_loaded)
        window.closed.connect(self.view.stop)
        self.view.set_loaded_model(window.model_name)
        self.view.show_module(window.tree.current_module())

    def open_dialog(self) -> None:
        start = str(self.window.settings.value(SETTINGS_KEY, str(Path.home())))
        folder = QFileDialog.getExistingDirectory(self.window, "Open an atlas folder", start)
        if folder:
            self.open(folder)

    def open(self, where: str | Path) -> bool:
        """Show the atlas in `where` (its folder or atlas.json); a bad one is a message in the
        status bar and the atlas shown before stays."""
        try:
            atlas = read_atlas(where)
        except AtlasError as e:
            self.window.reporter.report(str(e))
            return False
        self.window.settings.set_value(SETTINGS_KEY, str(atlas.folder))
        self.view.set_atlas(atlas)
        self.view.show_module(self.window.tree.current_module())
        self._tree_counts()
        self.dock.show()
        self.dock.raise_()
        self.window.reporter.info(f"Opened the atlas in {atlas.folder}: {atlas.describe()}.")
        return True

    def channel_clicked(self, module: str | None, channel: int) -> None:
        self.view.show_channel(module, channel)
        if self.view.atlas is not None and self.view.channel is not None:
            self.dock.raise_()  # the user asked to see it (the dock may be a tab)

    def open_image(self, path: str) -> None:
        """List the image in the image pane and run it (listed already: shown and run again)."""
        images = self.window.images
        current = images.current()
        if current is not None and current.path is not None and Path(current.path) == Path(path):
            self.window.runs.rerun()
        else:
            images.add_paths([path])
        self.window.docks["images"].raise_()

    def _model_loaded(self, frame) -> None:
        self.view.set_loaded_model(frame.name)
        self._tree_counts()

    def _tree_counts(self) -> None:
        """The atlas's dead channels per layer in the module tree, for the model it was made
        with only: another model's counts would be read as this one's."""
        atlas, model = self.view.atlas, self.window.model_name
        if atlas is None or atlas.model != model:
            self.window.tree.model.set_atlas({})
            return
        self.window.tree.model.set_atlas(
            {name: (len(layer.dead), layer.channels) for name, layer in atlas.layers.items()},
            f"{atlas.images:,} images, {atlas.folder}")


def _insert_in_file_menu(window, action: QAction) -> None:
    """After File ▸ Open model (the other things that open), or at the end."""
    bar_menus = [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
    file_menu = next((m for m in bar_menus if m.title() == "&File"), None)
    if file_menu is None:
        return
    actions = file_menu.actions()
    after = next((i for i, a in enumerate(actions) if a.text() == "Open &model…"), None)
    if after is not None and after + 1 < len(actions):
        file_menu.insertAction(actions[after + 1], action)
    else:
        file_menu.addAction(action)


def install(window) -> AtlasActions:
    """The Dataset dock in `window` (call once its views exist; a second call returns it)."""
    if getattr(window, "atlas", None) is None:
        window.atlas = AtlasActions(window)
    return window.atlas
