"""The Dataset dock: a channel atlas (`network-inspector atlas`) beside the live views.

File ▸ Open atlas… reads DIR/atlas.json (atlas_file.py). Then a module picked in the tree and
a channel clicked in the Activations mosaic (its `channelClicked`, the click that zooms)
show, here, the images of the atlas's folder that excite that channel most: each image
whole, scaled, with the box of the pixels that reach the channel's maximum drawn on it, and
its rank and value under it. Where an image file is gone, the crop the command saved of its
box stands in. A double-click lists the image in the image pane and runs it. A video's frame
(`atlas --every N`) shows the saved crop too, labelled "frame N of VIDEO": decoding frames
here would seek the video once per thumbnail, and the image pane opens whole videos, not one
frame of one, so a double-click on it only says so. The module
tree shows each atlas layer's dead-channel count in its Health column (module_tree_model).

Images are decoded a few per event-loop turn (as the image pane does), so a click on a
channel whose top images are large photos never freezes the window; their thumbnails are
kept, since the same images come back for many channels.

The window's File ▸ Open atlas and the wiring to the tree, the mosaic and the image pane
are in atlas_actions.py.
"""

from __future__ import annotations

import html
import time
from collections import OrderedDict
from pathlib import Path

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inspector.core.inputs.images import ImageLoadError, load_image
from inspector.ui.atlas.atlas_file import MAKE_ONE, Atlas, TopImage
from inspector.ui.image.canvas import qimage_from_pil

THUMB = 128  # the thumbnails' longer side, in pixels
BOX_COLOR = QColor("#ffd600")
SHADE = QColor(0, 0, 0, 110)  # darkens what is outside the box
LOAD_BUDGET_S = 0.025
CACHE_SIZE = 256  # thumbnails of whole images kept (the same images recur across channels)
HINT_STYLE = "color: #8a8a8a; padding: 12px;"
NOTE_STYLE = "color: #ef6c00;"
DEAD_STYLE = "color: #c62828; font-weight: 600;"

# What each thumbnail's item holds, for the double-click and for tests.
EntryRole = Qt.ItemDataRole.UserRole + 1  # the atlas_file.TopImage
SourceRole = Qt.ItemDataRole.UserRole + 2  # IMAGE, CROP or MISSING: what the thumbnail shows
ThumbRole = Qt.ItemDataRole.UserRole + 3  # the QImage drawn (box included)
IMAGE, CROP, MISSING, LOADING = "image", "crop", "missing", "loading"
FRAME = "frame"  # a video frame's saved crop

EMPTY_HINT = (
    "No atlas open. An atlas lists, for every channel of some layers, the images of a folder "
    "that excite it most. Make one with File ▸ New atlas…, or with<br><br><code>{command}"
    "</code><br><br>then open DIR with File ▸ Open atlas…"
)


class DatasetView(QWidget):
    """The dock's content: the atlas's header, a layer and channel choice, the thumbnails."""

    imageRequested = Signal(str)  # the image file of a double-clicked thumbnail
    failed = Signal(str)  # a one-line message for the status bar

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.atlas: Atlas | None = None
        self.layer: str | None = None
        self.channel: int | None = None
        self.loaded_model = ""
        self._pending: list[QListWidgetItem] = []
        # resolved path -> (the whole image scaled, its size in pixels: what boxes are in)
        self._thumbs: OrderedDict[str, tuple[QImage, tuple[int, int]]] = OrderedDict()

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
        self.list = QListWidget()
        self.list.setViewMode(QListView.ViewMode.IconMode)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setMovement(QListView.Movement.Static)
        self.list.setIconSize(QSize(THUMB, THUMB))
        self.list.setUniformItemSizes(True)
        self.list.setSpacing(4)
        self.list.setWordWrap(True)
        self.list.setToolTip("Double-click an image to open it in the image pane and run it")
        self.list.itemActivated.connect(self._activated)
        self._loader = QTimer(self)
        self._loader.setInterval(0)
        self._loader.timeout.connect(self._load_some)

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
        self._thumbs.clear()
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

    def _layer_chosen(self, index: int) -> None:
        self.select(self.layer_combo.itemText(index) if index >= 0 else None)

    def _channel_chosen(self, value: int) -> None:
        self.select(self.layer, None if value < 0 else value)

    def items(self) -> list[QListWidgetItem]:
        return [self.list.item(i) for i in range(self.list.count())]

    @property
    def loading(self) -> bool:
        return bool(self._pending)

    # -- drawing -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self._pending.clear()
        self._loader.stop()
        self.list.clear()
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
        for entry in entries:
            self._add(entry)
        if self._pending:
            self._loader.start()
        self._refresh_note()

    def _show_hint(self, text: str) -> None:
        self.hint.setText(text)
        self.hint.show()
        self.list.hide()

    def _header_html(self, atlas: Atlas, layer) -> str:
        lines = [f"<b>Atlas</b> {html.escape(atlas.describe())}"]
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
        crops = sum(1 for item in self.items() if item.data(SourceRole) in (CROP, MISSING)
                    and item.data(EntryRole).frame is None)  # a frame's crop is its picture
        if crops:
            notes.append(f"{crops} of {self.list.count()} original images are gone: their "
                         "saved crops are shown where the atlas has them.")
        self.note.setText(" ".join(notes))
        self.note.setVisible(bool(notes))

    def _add(self, entry: TopImage) -> None:
        value = "—" if entry.value is None else f"{entry.value:.4g}"
        item = QListWidgetItem(f"#{entry.rank + 1}  {value}")
        item.setData(EntryRole, entry)
        item.setSizeHint(QSize(THUMB + 12, THUMB + 34))
        self.list.addItem(item)
        if entry.frame is not None:
            item.setText(f"{item.text()}\nframe {entry.frame}")
            item.setToolTip(self._tooltip(entry, None))
            self._set_crop(item, entry, FRAME)
            return
        path = self.atlas.resolve(entry.path)
        cached = self._thumbs.get(str(path)) if path is not None else None
        if cached is not None:
            self._thumbs.move_to_end(str(path))
            self._set_thumb(item, *cached)
        else:
            item.setData(SourceRole, LOADING)
            self._pending.append(item)
        item.setToolTip(self._tooltip(entry, path))

    def _tooltip(self, entry: TopImage, path: Path | None) -> str:
        box = "no box measured" if entry.box is None else "box x0 {}, y0 {}, x1 {}, y1 {}".format(
            *entry.box)
        if entry.frame is not None:
            return (f"{entry.describe()} (the crop of its box)\nrank {entry.rank + 1}, value "
                    f"{entry.value}, {box}\nA video's frame cannot be opened from here: open "
                    "the video itself to see the frame")
        where = str(path) if path is not None else f"{entry.path} (gone)"
        return f"{where}\nrank {entry.rank + 1}, value {entry.value}, {box}\n" \
               "Double-click to open it in the image pane and run it"

    def _load_some(self) -> None:
        deadline = time.perf_counter() + LOAD_BUDGET_S
        while self._pending and time.perf_counter() < deadline:
            self._load(self._pending.pop(0))
        if not self._pending:
            self._loader.stop()
            self._refresh_note()

    def _load(self, item: QListWidgetItem) -> None:
        entry: TopImage = item.data(EntryRole)
        path = self.atlas.resolve(entry.path)
        if path is not None:
            try:
                image = load_image(path)
            except (ImageLoadError, OSError):
                pass  # changed since the atlas was made: the crop stands in
            else:
                thumb = scaled(qimage_from_pil(image), THUMB), image.size
                self._thumbs[str(path)] = thumb
                while len(self._thumbs) > CACHE_SIZE:
                    self._thumbs.popitem(last=False)
                self._set_thumb(item, *thumb)
                return
        if self._set_crop(item, entry, CROP):
            item.setText(item.text() + "\n(crop: original gone)")

    def _set_crop(self, item: QListWidgetItem, entry: TopImage, source: str) -> bool:
        """The crop the command saved of the entry's box (False: none, "gone" shown)."""
        crop = self.atlas.crop_path(self.layer, self.channel, entry.rank)
        picture = QImage(str(crop)) if crop.is_file() else QImage()
        if picture.isNull():
            self._set_thumb(item, missing_picture(), None, MISSING)
            return False
        self._set_thumb(item, scaled(picture, THUMB), None, source)
        return True

    def _set_thumb(self, item: QListWidgetItem, base: QImage, size: tuple[int, int] | None,
                   source: str = IMAGE) -> None:
        """`base`: the whole image scaled (`size`: the original's; the box is drawn on it), or
        a stand-in (the crop, or a "gone" picture)."""
        entry: TopImage = item.data(EntryRole)
        picture = base
        if size is not None and entry.box is not None:
            picture = with_box(base, entry.box, size)
        item.setData(SourceRole, source)
        item.setData(ThumbRole, picture)
        item.setIcon(QIcon(QPixmap.fromImage(picture)))

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
        self._loader.stop()
        self._pending.clear()


def scaled(image: QImage, side: int) -> QImage:
    """`image` with its longer side `side` (never enlarged past twice its size: a 96-pixel crop
    stays sharp enough)."""
    longer = max(image.width(), image.height(), 1)
    factor = min(side / longer, 2.0)
    w, h = max(1, round(image.width() * factor)), max(1, round(image.height() * factor))
    return image.scaled(w, h, Qt.AspectRatioMode.IgnoreAspectRatio,
                        Qt.TransformationMode.SmoothTransformation)


def box_rect(box: tuple[int, int, int, int], original: tuple[int, int], thumb: QImage) -> QRectF:
    """Where `box` (pixel edges of the original image, x1 and y1 exclusive) is on `thumb`."""
    sx, sy = thumb.width() / original[0], thumb.height() / original[1]
    x0, y0, x1, y1 = box
    return QRectF(x0 * sx, y0 * sy, (x1 - x0) * sx, (y1 - y0) * sy)


def with_box(thumb: QImage, box: tuple[int, int, int, int], original: tuple[int, int]) -> QImage:
    """A copy of `thumb` with what lies outside `box` darkened and the box outlined."""
    out = thumb.convertToFormat(QImage.Format.Format_ARGB32)
    rect = box_rect(box, original, thumb).intersected(QRectF(0, 0, out.width(), out.height()))
    p = QPainter(out)
    outside = QRectF(0, 0, out.width(), out.height())
    for part in (QRectF(0, 0, outside.width(), rect.top()),
                 QRectF(0, rect.bottom(), outside.width(), outside.height() - rect.bottom()),
                 QRectF(0, rect.top(), rect.left(), rect.height()),
                 QRectF(rect.right(), rect.top(), outside.width() - rect.right(), rect.height())):
        if part.width() > 0 and part.height() > 0:
            p.fillRect(part, SHADE)
    pen = QPen(BOX_COLOR, 2)
    pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
    p.setPen(pen)
    inner = rect.adjusted(1, 1, -1, -1)  # the 2-pixel line inside the box's edge...
    p.drawRect(inner if inner.width() >= 2 and inner.height() >= 2
               else rect.adjusted(-1, -1, 1, 1))  # ...or around a box of a few pixels
    p.end()
    return out


def missing_picture() -> QImage:
    image = QImage(THUMB, THUMB, QImage.Format.Format_ARGB32)
    image.fill(QColor("#e0e0e0"))
    p = QPainter(image)
    p.setPen(QColor("#757575"))
    p.drawText(image.rect(), Qt.AlignmentFlag.AlignCenter, "image gone,\nno crop")
    p.end()
    return image
