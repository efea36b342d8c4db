"""The image pane: the images a user opened, as thumbnails, and the selected one, large.

Files and folders come in by drop (the main window forwards drops here), Ctrl+O or paste.
Video files named or dropped (not those inside folders) are listed too, with their first
frame as the thumbnail; selecting one emits `videoSelected` and the video player (video_player
.py) shows its frames here (`show_frame`). Each file is decoded (images with core's
`load_image`, videos' first frame with core.video) before it is listed, so a corrupt file is
reported by name and never becomes the current image; the previous image stays. Decoding
happens a few files per event-loop turn (a 25 ms budget), so a dropped folder of a thousand
photos fills in while the window stays responsive.

The large view shows either the original image or the model's input (what preprocessing
made of it: resized, cropped, un-normalised), which comes with each run's RunStarted frame.

"Stretch levels" is the user's choice for 16-bit, 32-bit and float images: off, they are
scaled by their type's range (a dark 12-bit image stays dark, and a 16-bit file gives the same
input as its 8-bit twin); on, each image's own min..max fills the range. The window puts the
choice into every run it submits (RunRequest.stretch), and the large view follows it.

"Occlude" (or Shift+drag) lets the user drag a rectangle on the model input: the pane says
which pixels of the model input it covers (`occludeRequested`), and the window makes it an
edit of the next runs. Boxes are drawn on the model input only: that is where their pixels
are, whatever the resize and crop did to the original.

Detection and segmentation models (core.tasks) draw their results on the model input too
(`set_prediction`, from each run's PredictionFrame): the boxes scoring above the threshold
slider, with label and score (a click on one makes it the next runs' target:
`detectionChosen`), or the class mask with a legend of the classes present. The view
switches to the model input when an image's first such result arrives.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QIcon, QImage, QKeySequence, QPixmap, QShortcut
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QSizePolicy,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inspector.core.images import IMAGE_EXTENSIONS, ImageLoadError, expand_paths, load_image
from inspector.core.run import DetectionTarget
from inspector.core.video import first_frame, is_video
from inspector.ui import task_overlay
from inspector.ui.arrow_keys import claims_arrow_keys
from inspector.ui.image_canvas import ImageCanvas, pil_from_qimage, qimage_from_pil, qimage_from_rgb

THUMB = 72
ORIGINAL_MAX = 1600  # the large view never needs more pixels than a screen
LOAD_BUDGET_S = 0.025
ORIGINAL, MODEL_INPUT = "original", "model_input"
DEFAULT_THRESHOLD = 50  # of 100: boxes scoring under 0.5 are hidden until the slider moves
EntryRole = Qt.ItemDataRole.UserRole + 1


@dataclass
class ImageEntry:
    """One listed image: a file, or a picture pasted from the clipboard (kept in memory)."""

    name: str
    path: Path | None
    image: Any = None  # PIL image: a pasted picture, or the video frame being run
    size: tuple[int, int] = (0, 0)
    video: Any = None  # core.video.VideoInfo of a listed video file

    @property
    def source(self):
        """What Session.submit takes: the PIL image when there is one, else the path
        (decoded on the worker)."""
        return self.image if self.image is not None else str(self.path)


class _Filmstrip(QListWidget):
    def event(self, e: QEvent) -> bool:
        return claims_arrow_keys(e) or super().event(e)


class ImagePane(QWidget):
    imageSelected = Signal(object)  # ImageEntry: run it
    videoSelected = Signal(object)  # ImageEntry of a video file: play it
    failed = Signal(str, str)  # message, details: files that could not be opened
    imagesAdded = Signal(list)  # paths that were listed (for the recent-images menu)
    stretchChanged = Signal(bool)  # "Stretch levels" was toggled: run again with it
    occludeRequested = Signal(tuple)  # (x0, y0, x1, y1) of the model input, x1/y1 exclusive
    detectionChosen = Signal(object)  # core.run.DetectionTarget: a box was clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pending: deque[Path] = deque()
        self._batch_errors: list[ImageLoadError] = []
        self._batch_added: list[str] = []
        self._select_next_added = False
        self._pasted = 0
        self._original: QImage | None = None
        self._model_input: QImage | None = None
        self.mode = ORIGINAL
        self._occlusions: list[tuple[int, int, int, int]] = []  # boxes the next runs occlude
        self._prediction = None  # the PredictionFrame of a detection or segmentation run
        self._mask_overlay: QImage | None = None  # its mask, coloured (made once per frame)

        self.canvas = ImageCanvas("Drop images or folders anywhere on the window,\n"
                                  "or press Ctrl+O to open, Ctrl+V to paste")
        # Checkable, shared with Edit ▸ Occlude region: the button shows the same action.
        self.occlude_action = QAction("Occlude region", self)
        self.occlude_action.setIconText("Occlude")  # the button's text: the pane is narrow
        self.occlude_action.setCheckable(True)
        self.occlude_action.setToolTip(
            "Drag a rectangle on the model input to occlude it in the next runs "
            "(Shift+drag does it without this button)")
        self.occlude_action.toggled.connect(self._occlude_toggled)
        self.occlude_button = QToolButton()
        self.occlude_button.setDefaultAction(self.occlude_action)
        self.occlude_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.canvas.boxDrawn.connect(self._box_drawn)
        self.canvas.detectionClicked.connect(self._detection_clicked)
        # Detection models: the score under which boxes are hidden.
        self.threshold_slider = QSlider(Qt.Orientation.Horizontal)
        self.threshold_slider.setRange(0, 100)
        self.threshold_slider.setValue(DEFAULT_THRESHOLD)
        self.threshold_slider.setToolTip("Boxes scoring under this are hidden; click a box to "
                                         "explain it (the CAM target)")
        self.threshold_slider.valueChanged.connect(self._threshold_changed)
        self.threshold_label = QLabel()
        self.detection_bar = QWidget()
        row = QHBoxLayout(self.detection_bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.threshold_label)
        row.addWidget(self.threshold_slider, 1)
        self.detection_bar.hide()
        # Segmentation models: the classes in the mask.
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.hide()
        self.caption = QLabel()
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.original_button = self._mode_button("Original", ORIGINAL,
                                                 "The image as it is in the file")
        self.input_button = self._mode_button(
            "Model input", MODEL_INPUT,
            "What the model sees: resized, cropped (and shown un-normalised)")
        self.original_button.setChecked(True)
        group = QButtonGroup(self)
        group.setExclusive(True)
        group.addButton(self.original_button)
        group.addButton(self.input_button)
        self.stretch_button = QToolButton()
        self.stretch_button.setText("Stretch levels")
        self.stretch_button.setCheckable(True)
        self.stretch_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.stretch_button.setToolTip(
            "16-bit, 32-bit and float images: stretch each image's own darkest..brightest "
            "values to the full range.\nOff: scale by the type's range (16-bit / 65535), "
            "as torchvision's ToDtype(scale=True) does.")
        self.stretch_button.toggled.connect(self._stretch_toggled)

        self.list = _Filmstrip()
        self.list.setViewMode(QListView.ViewMode.IconMode)
        self.list.setFlow(QListView.Flow.LeftToRight)
        self.list.setWrapping(False)
        self.list.setMovement(QListView.Movement.Static)
        self.list.setIconSize(QSize(THUMB, THUMB))
        self.list.setGridSize(QSize(THUMB + 24, THUMB + 22))
        self.list.setUniformItemSizes(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.list.setFixedHeight(THUMB + 44)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.list.currentRowChanged.connect(self._row_changed)
        remove = QShortcut(QKeySequence.StandardKey.Delete, self.list)
        remove.setContext(Qt.ShortcutContext.WidgetShortcut)
        remove.activated.connect(self.remove_current)

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.original_button)
        bar.addWidget(self.input_button)
        bar.addStretch(1)
        bar.addWidget(self.occlude_button)
        bar.addWidget(self.stretch_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(3)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.detection_bar)
        layout.addWidget(self.legend)
        layout.addWidget(self.caption)  # under the picture: the pane is often narrow
        layout.addWidget(self.list)

        self._loader = QTimer(self)
        self._loader.setInterval(0)
        self._loader.timeout.connect(self._load_some)

    def _mode_button(self, text: str, mode: str, tip: str) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setCheckable(True)
        button.setToolTip(tip)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        button.toggled.connect(lambda on: on and self.set_mode(mode))
        return button

    @property
    def stretch(self) -> bool:
        """Whether high-depth images are stretched to their data's range (see the docstring)."""
        return self.stretch_button.isChecked()

    def _occlude_toggled(self, on: bool) -> None:
        self.canvas.set_box_mode(on)
        if on:
            self.set_mode(MODEL_INPUT)  # boxes are in model-input pixels

    def set_occlusions(self, boxes) -> None:
        """The boxes of the model input that the next runs occlude: outlined on it (the
        model input shown is the one before the edits)."""
        self._occlusions = [tuple(b) for b in boxes]
        self._refresh()

    def _box_drawn(self, box: tuple) -> None:
        if self.mode == MODEL_INPUT and self._model_input is not None:
            self.occludeRequested.emit(box)

    def _stretch_toggled(self, on: bool) -> None:
        self._show_original(self.current())
        self.stretchChanged.emit(on)

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
        self.list.setCurrentRow(self.list.count() - 1)
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
            except ImageLoadError as e:  # core.video.VideoLoadError too
                self._batch_errors.append(e)
                continue
            except Exception as e:  # noqa: BLE001 - any decoder failure is the file's problem
                self._batch_errors.append(ImageLoadError(path, f"{type(e).__name__}: {e}"))
                continue
            entry = ImageEntry(path.name, path, None, image.size, info)
            self._append(entry, qimage_from_pil(_thumbnail(image)))
            self._batch_added.append(str(path))
            if self._select_next_added:
                self._select_next_added = False
                self.list.setCurrentRow(self.list.count() - 1)
        if not self._pending:
            self._loader.stop()
            self._finish_batch()

    def _finish_batch(self) -> None:
        self._select_next_added = False
        if self._batch_added:
            self.imagesAdded.emit(list(self._batch_added))
        errors, self._batch_errors, self._batch_added = self._batch_errors, [], []
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            message = f"Could not open {first.path.name}: {first.reason}{more}"
            self.failed.emit(message, "\n".join(str(e) for e in errors))

    def _append(self, entry: ImageEntry, thumb: QImage) -> None:
        item = QListWidgetItem(QIcon(QPixmap.fromImage(thumb)), entry.name)
        item.setData(EntryRole, entry)
        w, h = entry.size
        where = str(entry.path) if entry.path else "pasted from the clipboard"
        what = f"{w} × {h} pixels"
        if entry.video is not None:
            what += f", {entry.video.frame_count:,} frames at {entry.video.fps:g} fps"
        item.setToolTip(f"{where}\n{what}")
        self.list.addItem(item)

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
        return [self.list.item(i).data(EntryRole) for i in range(self.list.count())]

    def current(self) -> ImageEntry | None:
        item = self.list.currentItem()
        return item.data(EntryRole) if item is not None else None

    def select_path(self, path) -> bool:
        for row, entry in enumerate(self.entries()):
            if entry.path is not None and Path(entry.path) == Path(path):
                self.list.setCurrentRow(row)
                return True
        return False

    def step(self, delta: int) -> bool:
        """Select the next (+1) or previous (-1) image; False at either end."""
        row = self.list.currentRow() + delta
        if 0 <= row < self.list.count():
            self.list.setCurrentRow(row)
            return True
        return False

    def remove_current(self) -> None:
        row = self.list.currentRow()
        if row >= 0:
            self.list.takeItem(row)

    def clear_images(self) -> None:
        self._pending.clear()
        self.list.clear()
        self._show_original(None)

    def _row_changed(self, row: int) -> None:
        entry = self.current()
        self._model_input = None
        self._prediction = self._mask_overlay = None  # another image's boxes and mask
        if entry is not None and entry.video is not None:
            self.videoSelected.emit(entry)  # the player shows its frames (show_frame)
            return
        self._show_original(entry)
        if entry is not None:
            self.imageSelected.emit(entry)

    def _show_original(self, entry: ImageEntry | None) -> None:
        if entry is not None and entry.video is not None:
            return  # a video: the frame the player shows stays
        self._original = None
        if entry is not None:
            try:
                if entry.image is not None:
                    image = entry.image.copy()
                else:
                    image = load_image(entry.path, stretch=self.stretch)
                image.thumbnail((ORIGINAL_MAX, ORIGINAL_MAX))
                self._original = qimage_from_pil(image)
            except ImageLoadError as e:  # the file changed on disk since it was listed
                self.failed.emit(f"Could not open {e.path.name}: {e.reason}", str(e))
            w, h = entry.size
            self.caption.setText(f"{entry.name}  ·  {w} × {h}")
            self.caption.setToolTip(str(entry.path or entry.name))
        else:
            self.caption.clear()
        self._refresh()

    # -- video frames and the camera ---------------------------------------------------------
    def show_frame(self, image, caption: str, tip: str = "") -> None:
        """A video's or the camera's frame (a PIL image) as the original picture."""
        if max(image.size) > ORIGINAL_MAX:
            image = image.copy()
            image.thumbnail((ORIGINAL_MAX, ORIGINAL_MAX))
        self._original = qimage_from_pil(image)
        self.caption.setText(caption)
        self.caption.setToolTip(tip or caption)
        if self.mode == ORIGINAL:
            self.canvas.set_image(self._original)

    def add_below_canvas(self, widget: QWidget) -> None:
        """A bar under the picture (the video player's controls)."""
        layout = self.layout()
        layout.insertWidget(layout.indexOf(self.canvas) + 1, widget)

    # -- original vs model input -------------------------------------------------------------
    def set_model_input(self, display: np.ndarray | None) -> None:
        """The preprocessed input of the current run (RunStarted.display)."""
        self._model_input = qimage_from_rgb(display) if display is not None else None
        self._refresh()

    # -- detection and segmentation results ---------------------------------------------------
    @property
    def prediction(self):
        """The PredictionFrame whose boxes or mask are drawn; None when there are none."""
        return self._prediction

    @property
    def threshold(self) -> float:
        """Boxes scoring under this are hidden."""
        return self.threshold_slider.value() / 100

    def set_prediction(self, frame) -> None:
        """The current run's PredictionFrame: its boxes or mask are drawn on the model input;
        a classifier's (no boxes, no mask) clears them."""
        shows = bool(frame is not None and (frame.detections or frame.mask is not None))
        first = shows and self._prediction is None
        self._prediction = frame if shows else None
        self._mask_overlay = (task_overlay.mask_image(frame.mask, frame.legend)
                              if shows and frame.mask is not None else None)
        if first and self.mode != MODEL_INPUT:
            self.set_mode(MODEL_INPUT)  # that is where the boxes' pixels are (calls _refresh)
        else:
            self._refresh()

    def _threshold_changed(self, _value: int) -> None:
        self._refresh()

    def _detection_clicked(self, rank: int) -> None:
        frame = self._prediction
        if frame is not None and rank != frame.target:
            # The object, not its rank: the next runs (an edit, the next video frame) may
            # order the scores otherwise.
            chosen = frame.detections[rank]
            self.detectionChosen.emit(DetectionTarget(rank, chosen.box, chosen.class_index))

    def _task_overlays(self) -> None:
        frame = self._prediction if self.mode == MODEL_INPUT else None
        detections = frame is not None and frame.task == "detection"
        mask = frame.mask if frame is not None else None
        self.detection_bar.setVisible(detections)
        self.threshold_label.setText(f"Score ≥ {self.threshold:.2f}")
        self.canvas.set_detections(task_overlay.drawn_boxes(
            frame.detections, self.threshold, frame.target) if detections else [])
        self.canvas.set_overlay(self._mask_overlay if mask is not None else None)
        self.legend.setVisible(mask is not None)
        self.legend.setText(task_overlay.legend_html(frame.legend) if mask is not None else "")

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode == ORIGINAL:
            self.occlude_action.setChecked(False)  # boxes are drawn on the model input only
        button = self.original_button if mode == ORIGINAL else self.input_button
        if not button.isChecked():
            button.setChecked(True)
        self._refresh()

    def toggle_mode(self) -> None:
        self.set_mode(MODEL_INPUT if self.mode == ORIGINAL else ORIGINAL)

    def shown_image(self) -> QImage | None:
        return self.canvas.image()

    def _refresh(self) -> None:
        self.canvas.boxes_allowed = self.mode == MODEL_INPUT and self._model_input is not None
        self.canvas.set_marks(self._occlusions if self.mode == MODEL_INPUT else [])
        self._task_overlays()
        if self.mode == MODEL_INPUT:
            self.canvas.hint = "The model's input appears here after a run"
            self.canvas.set_image(self._model_input)
        else:
            self.canvas.hint = ("Drop images or folders anywhere on the window,\n"
                                "or press Ctrl+O to open, Ctrl+V to paste")
            self.canvas.set_image(self._original)

    # -- misc ----------------------------------------------------------------------------------
    def _context_menu(self, pos) -> None:
        menu = QMenu(self)
        item = self.list.itemAt(pos)
        if item is not None:
            self.list.setCurrentItem(item)
            menu.addAction("Remove", self.remove_current)
        menu.addAction("Remove all", self.clear_images)
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def stop(self) -> None:
        self._loader.stop()
        self._pending.clear()


def _thumbnail(image):
    thumb = image.copy()
    thumb.thumbnail((THUMB * 2, THUMB * 2))  # 2x for high-DPI screens
    return thumb

