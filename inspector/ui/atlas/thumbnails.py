"""The Dataset dock's thumbnails: one channel's top images of an atlas, each whole and
scaled, with the box of the pixels that reach the channel's maximum drawn on it.

Where an image file is gone, the crop the atlas command saved of its box stands in (and a
grey "gone" picture where there is no crop either); a video's frame always shows its crop.
Images are decoded a few per event-loop turn (as the image pane does), so a click on a
channel whose top images are large photos never freezes the window; their thumbnails are
kept, since the same images come back for many channels.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem

from inspector.core.inputs.images import ImageLoadError, load_image
from inspector.ui.atlas.atlas_file import Atlas, TopImage
from inspector.ui.image.canvas import qimage_from_pil

THUMB = 128  # the thumbnails' longer side, in pixels
BOX_COLOR = QColor("#ffd600")
SHADE = QColor(0, 0, 0, 110)  # darkens what is outside the box
LOAD_BUDGET_S = 0.025
CACHE_SIZE = 256  # thumbnails of whole images kept (the same images recur across channels)

# What each thumbnail's item holds: the entry, for the double-click and the tooltip, and
# what its picture is.
EntryRole = Qt.ItemDataRole.UserRole + 1  # the atlas_file.TopImage
SourceRole = Qt.ItemDataRole.UserRole + 2  # IMAGE, CROP, MISSING, FRAME or LOADING
IMAGE, CROP, MISSING, LOADING = "image", "crop", "missing", "loading"
FRAME = "frame"  # a video frame's saved crop


class ThumbnailList(QListWidget):
    """The top images of one channel of one layer, as icons with their rank and value."""

    loaded = Signal()  # every thumbnail shown is decoded (or stood in for)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.atlas: Atlas | None = None
        self._layer: str | None = None
        self._channel: int | None = None
        self._pending: list[QListWidgetItem] = []
        # resolved path -> (the whole image scaled, its size in pixels: what boxes are in)
        self._cache: OrderedDict[str, tuple[QImage, tuple[int, int]]] = OrderedDict()
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setMovement(QListView.Movement.Static)
        self.setIconSize(QSize(THUMB, THUMB))
        self.setUniformItemSizes(True)
        self.setSpacing(4)
        self.setWordWrap(True)
        self.setToolTip("Double-click an image to open it in the image pane and run it")
        self._loader = QTimer(self)
        self._loader.setInterval(0)
        self._loader.timeout.connect(self._load_some)

    def set_atlas(self, atlas: Atlas | None) -> None:
        """Another atlas (or none): the thumbnails kept are of the last one's folder."""
        self.atlas = atlas
        self._cache.clear()
        self.show_channel(None, None, ())

    def show_channel(self, layer: str | None, channel: int | None, entries) -> None:
        """Show `entries` (TopImage, best first), the top images of `channel` of `layer`."""
        self.stop()
        self.clear()
        self._layer, self._channel = layer, channel
        for entry in entries:
            self._add(entry)
        if self._pending:
            self._loader.start()

    def items(self) -> list[QListWidgetItem]:
        return [self.item(i) for i in range(self.count())]

    def stop(self) -> None:
        self._loader.stop()
        self._pending.clear()

    # -- the items -------------------------------------------------------------------------------
    def _add(self, entry: TopImage) -> None:
        value = "—" if entry.value is None else f"{entry.value:.4g}"
        item = QListWidgetItem(f"#{entry.rank + 1}  {value}")
        item.setData(EntryRole, entry)
        item.setSizeHint(QSize(THUMB + 12, THUMB + 34))
        self.addItem(item)
        if entry.frame is not None:
            item.setText(f"{item.text()}\nframe {entry.frame}")
            item.setToolTip(frame_tooltip(entry))
            self._set_crop(item, entry, FRAME)
            return
        path = self.atlas.resolve(entry.path)
        cached = self._cache.get(str(path)) if path is not None else None
        if cached is not None:
            self._cache.move_to_end(str(path))
            self._set_thumb(item, *cached)
        else:
            item.setData(SourceRole, LOADING)
            self._pending.append(item)
        box = box_text(entry)
        where = str(path) if path is not None else f"{entry.path} (gone)"
        item.setToolTip(f"{where}\nrank {entry.rank + 1}, value {entry.value}, {box}\n"
                        "Double-click to open it in the image pane and run it")

    def _load_some(self) -> None:
        deadline = time.perf_counter() + LOAD_BUDGET_S
        while self._pending and time.perf_counter() < deadline:
            self._load(self._pending.pop(0))
        if not self._pending:
            self._loader.stop()
            self.loaded.emit()

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
                self._cache[str(path)] = thumb
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
                self._set_thumb(item, *thumb)
                return
        if self._set_crop(item, entry, CROP):
            item.setText(item.text() + "\n(crop: original gone)")

    def _set_crop(self, item: QListWidgetItem, entry: TopImage, source: str) -> bool:
        """The crop the command saved of the entry's box (False: none, "gone" shown)."""
        crop = self.atlas.crop_path(self._layer, self._channel, entry.rank)
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
        item.setIcon(QIcon(QPixmap.fromImage(picture)))


def box_text(entry: TopImage) -> str:
    if entry.box is None:
        return "no box measured"
    return "box x0 {}, y0 {}, x1 {}, y1 {}".format(*entry.box)


def frame_tooltip(entry: TopImage) -> str:
    return (f"{entry.describe()} (the crop of its box)\nrank {entry.rank + 1}, value "
            f"{entry.value}, {box_text(entry)}\nA video's frame cannot be opened from here: "
            "open the video itself to see the frame")


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
