"""The Dataset dock: a channel atlas (`network-inspector atlas`) beside the live views.

File ▸ Open atlas… reads DIR/atlas.json (atlas_file.py). Then a module picked in the tree and
a channel clicked in the Activations mosaic (its `channelClicked`, the click that zooms)
show, here, the images of the atlas's folder that excite that channel most (thumbnails.py:
each image whole, with the box of the pixels that reach the channel's maximum drawn on it,
its rank and value under it; where an image file is gone, the crop the command saved of its
box). A double-click lists the image in the image pane and runs it. A video's frame
(`atlas --every N`) shows the saved crop, labelled "frame N of VIDEO": decoding frames here
would seek the video once per thumbnail, and the image pane opens whole videos, not one
frame of one, so a double-click on it only says so. The module tree shows each atlas
layer's dead-channel count in its Health column (ui.module_tree.model).

The window's File ▸ Open atlas and the wiring to the tree, the mosaic and the image pane
are in actions.py.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidgetItem,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.atlas.atlas_file import MAKE_ONE, Atlas, TopImage
from inspector.ui.atlas.thumbnails import CROP, MISSING, EntryRole, SourceRole, ThumbnailList

HINT_STYLE = "color: #8a8a8a; padding: 12px;"
NOTE_STYLE = "color: #ef6c00;"
DEAD_STYLE = "color: #c62828; font-weight: 600;"

EMPTY_HINT = (
    "No atlas open. An atlas lists, for every channel of some layers, the images of a folder "
    "that excite it most. Make one with File ▸ New atlas…, or with<br><br><code>{command}"
    "</code><br><br>then open DIR with File ▸ Open atlas…"
)


class DatasetView(QWidget):
    """The dock's content: the atlas's header, a layer and channel choice, the thumbnails."""

    imageRequested = Signal(str)  # the image file of a double-clicked thumbnail
    failed = Signal(str)  # a one-line message for the status bar
    channelShown = Signal(object, object)  # (layer, channel) shown, either may be None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.atlas: Atlas | None = None
        self.layer: str | None = None
        self.channel: int | None = None
        self.loaded_model = ""

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.layer_combo = QComboBox()
        self.layer_combo.setPlaceholderText("(layer)")
        self.layer_combo.setToolTip("A layer of the atlas (selecting it in the module tree "
                                    "chooses it here too)")
        self.layer_combo.currentIndexChanged.connect(self._layer_chosen)
        self.channel_spin = QSpinBox()
        self.channel_spin.setMinimum(-1)
        self.channel_spin.setSpecialValueText("—")  # -1: no channel chosen
        self.channel_spin.setToolTip("The channel (clicking a channel in Activations chooses "
                                     "it here too)")
        self.channel_spin.valueChanged.connect(self._channel_chosen)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(NOTE_STYLE)
        self.note.hide()
        self.hint = QLabel()
        self.hint.setTextFormat(Qt.TextFormat.RichText)
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setStyleSheet(HINT_STYLE)
        self.hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.list = ThumbnailList()
        self.list.itemActivated.connect(self._activated)
        self.list.loaded.connect(self._refresh_note)  # how many originals are gone

        choice = QHBoxLayout()
        choice.setContentsMargins(0, 0, 0, 0)
        choice.addWidget(QLabel("Layer"))
        choice.addWidget(self.layer_combo, 1)
        choice.addWidget(QLabel("Channel"))
        choice.addWidget(self.channel_spin)
        self.choice_bar = QWidget()
        self.choice_bar.setLayout(choice)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.choice_bar)
        layout.addWidget(self.note)
        layout.addWidget(self.hint, 1)
        layout.addWidget(self.list, 1)
        self._refresh()

    # -- what is shown ---------------------------------------------------------------------------
    def set_atlas(self, atlas: Atlas | None) -> None:
        self.atlas = atlas
        self.list.set_atlas(atlas)
        self.layer_combo.blockSignals(True)
        self.layer_combo.clear()
        if atlas is not None:
            self.layer_combo.addItems(list(atlas.layers))
        self.layer_combo.setCurrentIndex(-1)
        self.layer_combo.blockSignals(False)
        self.select(None)

    def set_loaded_model(self, name: str) -> None:
        """The model the window has loaded: an atlas of another model is shown, and says so."""
        self.loaded_model = name
        self._refresh_note()

    def show_module(self, name: str | None) -> None:
        """A module was selected in the tree: its layer, if the atlas has it."""
        if self.atlas is None or name == self.layer:
            return
        self.select(name)

    def show_channel(self, module: str | None, channel: int) -> None:
        """A channel of `module` was clicked in the mosaic."""
        if self.atlas is not None:
            self.select(module, channel)

    def select(self, layer: str | None, channel: int | None = None) -> None:
        """Show `channel` of `layer` (None: only the layer, or nothing)."""
        self.layer = layer
        known = self.atlas is not None and layer in self.atlas.layers
        channels = self.atlas.layers[layer].channels if known else 0
        self.channel = channel if known and channel is not None and 0 <= channel < channels \
            else None
        self.layer_combo.blockSignals(True)
        self.layer_combo.setCurrentIndex(self.layer_combo.findText(layer) if known else -1)
        self.layer_combo.blockSignals(False)
        self.channel_spin.blockSignals(True)
        self.channel_spin.setMaximum(max(channels - 1, 0))
        self.channel_spin.setValue(-1 if self.channel is None else self.channel)
        self.channel_spin.setEnabled(known)
        self.channel_spin.blockSignals(False)
        self._refresh()
        self.channelShown.emit(self.layer if known else None, self.channel)

    def _layer_chosen(self, index: int) -> None:
        self.select(self.layer_combo.itemText(index) if index >= 0 else None)

    def _channel_chosen(self, value: int) -> None:
        self.select(self.layer, None if value < 0 else value)

    # -- drawing -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self.list.show_channel(None, None, ())
        atlas = self.atlas
        self.choice_bar.setVisible(atlas is not None)
        self.header.setVisible(atlas is not None)
        self._refresh_note()
        if atlas is None:
            self._show_hint(EMPTY_HINT.format(command=MAKE_ONE))
            return
        layer = atlas.layers.get(self.layer) if self.layer is not None else None
        self.header.setText(self._header_html(atlas, layer))
        if layer is None:
            where = f"<b>{html.escape(self.layer)}</b> is not in this atlas. " if self.layer \
                else ""
            layers = html.escape(", ".join(atlas.layers))
            self._show_hint(f"{where}Choose one of its layers ({layers}) in the module tree or "
                            "above.")
            return
        if self.channel is None:
            self._show_hint("Click a channel in Activations (or choose it above) to see the "
                            "images that excite it most.")
            return
        entries = layer.top.get(self.channel, ())
        if not entries:
            self._show_hint("The atlas has no images for this channel.")
            return
        self.hint.hide()
        self.list.show()
        self.list.show_channel(self.layer, self.channel, entries)
        self._refresh_note()

    def _show_hint(self, text: str) -> None:
        self.hint.setText(text)
        self.hint.show()
        self.list.hide()

    def _header_html(self, atlas: Atlas, layer) -> str:
        title = "Concepts" if atlas.kind == "concepts" else "Atlas"
        lines = [f"<b>{title}</b> {html.escape(atlas.describe())}"]
        if layer is not None:
            line = f"<b>{html.escape(layer.name)}</b>, {layer.channels} channels"
            dead = len(layer.dead)
            if dead:
                line += f", {dead} dead in the atlas"
            c = self.channel
            if c is not None:
                line += f" · <b>channel {c}</b>"
                if c < len(layer.mean) and layer.mean[c] is not None:
                    line += f" · mean {layer.mean[c]:.4g}"
                if c < len(layer.active_fraction) and layer.active_fraction[c] is not None:
                    line += f" · active on {100 * layer.active_fraction[c]:.0f} % of images"
                if c in layer.dead:
                    line += (f" · <span style='{DEAD_STYLE}'>dead: its maximum is ≤ 0 on every "
                             "image</span>")
            lines.append(line)
        return "<br>".join(lines)

    def _refresh_note(self) -> None:
        notes = []
        atlas = self.atlas
        if atlas is not None and self.loaded_model and atlas.model != self.loaded_model:
            notes.append(f"This atlas was made with {atlas.model}; the loaded model is "
                         f"{self.loaded_model}. Its layers and channels may not be this "
                         "model's.")
        crops = sum(1 for item in self.list.items() if item.data(SourceRole) in (CROP, MISSING)
                    and item.data(EntryRole).frame is None)  # a frame's crop is its picture
        if crops:
            notes.append(f"{crops} of {self.list.count()} original images are gone: their "
                         "saved crops are shown where the atlas has them.")
        self.note.setText(" ".join(notes))
        self.note.setVisible(bool(notes))

    def _activated(self, item: QListWidgetItem) -> None:
        entry: TopImage = item.data(EntryRole)
        if entry.frame is not None:
            self.failed.emit(f"{entry.describe()}: the atlas shows the crop of its box; a "
                             "video's frame cannot be opened from the atlas, open the video")
            return
        path = self.atlas.resolve(entry.path) if self.atlas is not None else None
        if path is None:
            self.failed.emit(f"{entry.path} is gone: the atlas keeps only the crop of its box")
            return
        self.imageRequested.emit(str(path))

    def stop(self) -> None:
        self.list.stop()
