"""The image pane's filmstrip: the images and videos a user opened, as thumbnails.

Files and folders come in by drop (the main window forwards drops to the pane), Ctrl+O or
paste. Video files named or dropped (not those inside folders) are listed too, with their
first frame as the thumbnail. Each file is decoded (images with core's `load_image`, videos'
first frame with core.inputs.video) before it is listed, so a corrupt file is reported by name
(`failed`) and never becomes the current image. Decoding happens a few files per event-loop
turn (a 25 ms budget), so a dropped folder of a thousand photos fills in while the window
stays responsive.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QIcon, QImage, QKeySequence, QPixmap, QShortcut
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem, QMenu, QStyle, QWidget

from inspector.core.inputs.images import IMAGE_EXTENSIONS, ImageLoadError, expand_paths, load_image
from inspector.core.inputs.video import first_frame, is_video
from inspector.ui.image.canvas import pil_from_qimage, qimage_from_pil
from inspector.ui.shell.arrow_keys import claims_arrow_keys

THUMB = 72
LOAD_BUDGET_S = 0.025
EntryRole = Qt.ItemDataRole.UserRole + 1


@dataclass
class ImageEntry:
    """One listed image: a file, or a picture pasted from the clipboard (kept in memory)."""

    name: str
    path: Path | None
    image: Any = None  # PIL image: a pasted picture, or the video frame being run
    size: tuple[int, int] = (0, 0)  # the picture as decoded (what the model is given)
    video: Any = None  # core.inputs.video_reader.VideoInfo of a listed video file
    # The video frame's model input, made with `image` on the decoding thread
    # (core.inputs.preprocess.PreparedImage); set and cleared with `image`.
    prepared: Any = None
    # A picture decoded reduced (core.inputs.images' size_note): the file's own size.
    file_size: tuple[int, int] | None = None

    @property
    def source(self):
        """What Session.submit takes: the prepared frame or the PIL image when there is
        one, else the path (decoded on the worker)."""
        if self.prepared is not None:
            return self.prepared
        return self.image if self.image is not None else str(self.path)


class ImageList(QListWidget):
    """The listed images (item data: ImageEntry), one row of thumbnails."""

    failed = Signal(str, str)  # message, details: files that could not be opened
    imagesAdded = Signal(list)  # paths that were listed (for the recent-images menu)
    cleared = Signal()  # "Remove all": every image is gone
    noted = Signal(str)  # one line: a listed image was decoded reduced (core.inputs.images)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pending: deque[Path] = deque()
        self._batch_errors: list[ImageLoadError] = []
        self._batch_added: list[str] = []
        self._batch_notes: list[str] = []
        self._select_next_added = False
        self._pasted = 0

        self.setViewMode(QListView.ViewMode.IconMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(False)
        self.setMovement(QListView.Movement.Static)
        self.setIconSize(QSize(THUMB, THUMB))
        self.setGridSize(QSize(THUMB + 24, THUMB + 22))
        self.setUniformItemSizes(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # A row of thumbnails with their names, and room for the scrollbar under them (as
        # tall as the style makes it: a fixed allowance cut the names off under some styles).
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self)
        self.setFixedHeight(THUMB + 22 + bar + 2 * self.frameWidth() + 6)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)
        remove = QShortcut(QKeySequence.StandardKey.Delete, self)
        remove.setContext(Qt.ShortcutContext.WidgetShortcut)
        remove.activated.connect(self.remove_current)

        self._loader = QTimer(self)
        self._loader.setInterval(0)
        self._loader.timeout.connect(self._load_some)

    def event(self, e: QEvent) -> bool:
        return claims_arrow_keys(e) or super().event(e)

    # -- adding images ---------------------------------------------------------------------
    def add_paths(self, paths, *, select: bool = True) -> int:
        """Queue files and folders for listing; returns how many image files were found.

        Unknown files and missing paths are reported together when the batch is done."""
        explicit = [Path(p) for p in paths]
        errors: list[ImageLoadError] = []
        videos = [p for p in explicit if p.is_file() and is_video(p)]
        for p in explicit:
            if p.is_file() and p.suffix.lower() not in IMAGE_EXTENSIONS and not is_video(p):
                errors.append(ImageLoadError(p, "not an image or video file type this app "
                                                "reads"))
        files = expand_paths([p for p in explicit if p not in videos],
                             on_missing=errors.append) + videos
        known = {str(e.path) for e in self.entries() if e.path is not None}
        new = [f for f in files if str(f) not in known]
        if select and files and not new:
            self.select_path(files[0])  # dropped again: show it
        self._batch_errors.extend(errors)
        if new and select:
            self._select_next_added = True
        self._pending.extend(new)
        if not self._loader.isActive():
            self._loader.start()
        return len(files)

    def add_image(self, image, name: str | None = None) -> ImageEntry:
        """A picture from memory (the clipboard): listed and selected at once."""
        self._pasted += 1
        entry = ImageEntry(name or f"Pasted image {self._pasted}", None, image, image.size)
        self._append(entry, qimage_from_pil(_thumbnail(image)))
        self.setCurrentRow(self.count() - 1)
        return entry

    def add_qimage(self, qimage: QImage, name: str | None = None) -> ImageEntry:
        return self.add_image(pil_from_qimage(qimage), name)

    @property
    def loading(self) -> bool:
        return bool(self._pending) or self._loader.isActive()

    def _load_some(self) -> None:
        deadline = time.perf_counter() + LOAD_BUDGET_S
        while self._pending and time.perf_counter() < deadline:
            path = self._pending.popleft()
            info = None
            try:
                if is_video(path):  # listed with its first frame; PyAV missing: said here
                    image, info = first_frame(path)
                else:
                    image = load_image(path)
            except ImageLoadError as e:  # core.inputs.video_reader.VideoLoadError too
                self._batch_errors.append(e)
                continue
            except Exception as e:  # noqa: BLE001 - any decoder failure is the file's problem
                self._batch_errors.append(ImageLoadError(path, f"{type(e).__name__}: {e}"))
                continue
            if image.info.get("size_note"):
                self._batch_notes.append(f"{path.name} was {image.info['size_note']}")
            source = image.info.get("source_size")
            entry = ImageEntry(path.name, path, None, image.size, info,
                               file_size=tuple(source) if source and tuple(source) !=
                               image.size else None)
            self._append(entry, qimage_from_pil(_thumbnail(image)))
            self._batch_added.append(str(path))
            if self._select_next_added:
                self._select_next_added = False
                self.setCurrentRow(self.count() - 1)
        if not self._pending:
            self._loader.stop()
            self._finish_batch()

    def _finish_batch(self) -> None:
        self._select_next_added = False
        if self._batch_added:
            self.imagesAdded.emit(list(self._batch_added))
        errors, self._batch_errors, self._batch_added = self._batch_errors, [], []
        notes, self._batch_notes = self._batch_notes, []
        if notes:
            more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
            self.noted.emit(f"{notes[0]}{more}.")
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            message = f"Could not open {first.path.name}: {first.reason}{more}"
            self.failed.emit(message, "\n".join(str(e) for e in errors))

    def _append(self, entry: ImageEntry, thumb: QImage) -> None:
        item = QListWidgetItem(QIcon(QPixmap.fromImage(thumb)), entry.name)
        item.setData(EntryRole, entry)
        w, h = entry.size
        # The whole name (the list elides long ones) and where it is.
        where = str(entry.path) if entry.path else f"{entry.name}, pasted from the clipboard"
        what = f"{w} × {h} pixels"
        if entry.video is not None:
            what += f", {entry.video.frame_count:,} frames at {entry.video.fps:g} fps"
        item.setToolTip(f"{where}\n{what}")
        self.addItem(item)

    # -- drops and the clipboard ---------------------------------------------------------------
    @staticmethod
    def accepts(mime) -> bool:
        """Whether a drag carries something to open: local files or folders, or an image."""
        if mime is None:
            return False
        if mime.hasUrls() and any(u.isLocalFile() for u in mime.urls()):
            return True
        return mime.hasImage()

    def take_mime(self, mime) -> bool:
        """Open what a drop or the clipboard holds: files and folders, a picture, or a path
        as text (copied from a file manager or a terminal). False when there is none."""
        if mime is None:
            return False
        if mime.hasUrls():
            paths = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
            if paths:
                self.add_paths(paths)
                return True
        if mime.hasImage():
            image = mime.imageData()
            if isinstance(image, QPixmap):
                image = image.toImage()
            if isinstance(image, QImage) and not image.isNull():
                self.add_qimage(image)
                return True
        text = mime.text().strip() if mime.hasText() else ""
        if text and "\n" not in text and Path(text).exists():
            self.add_paths([text])
            return True
        return False

    # -- selection ---------------------------------------------------------------------------
    def entries(self) -> list[ImageEntry]:
        return [self.item(i).data(EntryRole) for i in range(self.count())]

    def current(self) -> ImageEntry | None:
        item = self.currentItem()
        return item.data(EntryRole) if item is not None else None

    def select_path(self, path) -> bool:
        for row, entry in enumerate(self.entries()):
            if entry.path is not None and Path(entry.path) == Path(path):
                self.setCurrentRow(row)
                return True
        return False

    def step(self, delta: int) -> bool:
        """Select the next (+1) or previous (-1) image; False at either end."""
        row = self.currentRow() + delta
        if 0 <= row < self.count():
            self.setCurrentRow(row)
            return True
        return False

    def remove_current(self) -> None:
        row = self.currentRow()
        if row >= 0:
            self.takeItem(row)

    def clear_images(self) -> None:
        """Every image gone, the queued ones too (`cleared` says so)."""
        self._pending.clear()
        self.clear()
        self.cleared.emit()

    def _context_menu(self, pos) -> None:
        menu = QMenu(self)
        item = self.itemAt(pos)
        if item is not None:
            self.setCurrentItem(item)
            menu.addAction("Remove", self.remove_current)
        menu.addAction("Remove all", self.clear_images)
        menu.exec(self.viewport().mapToGlobal(pos))

    def stop(self) -> None:
        """Stop listing: the files still queued are dropped."""
        self._loader.stop()
        self._pending.clear()


def _thumbnail(image):
    thumb = image.copy()
    thumb.thumbnail((THUMB * 2, THUMB * 2))  # 2x for high-DPI screens
    return thumb
