"""The image pane: the images a user opened, as thumbnails, and the selected one, large.

The thumbnails are the filmstrip (`list`, filmstrip.ImageList: files, folders, drops,
pastes); the window lists files through the pane, which hands them on. Selecting a video
file emits `videoSelected` and the video player (ui.video.player) shows its frames here
(`show_frame`). A file that fails to
decode is reported by name and never becomes the current image; the previous image stays.

The large view shows either the original image or the model's input (what preprocessing
made of it: resized, cropped, un-normalised), which comes with each run's RunStarted frame.

"Stretch levels" is the user's choice for 16-bit, 32-bit and float images: off, they are
scaled by their type's range (a dark 12-bit image stays dark, and a 16-bit file gives the same
input as its 8-bit twin); on, each image's own min..max fills the range. The window puts the
choice into every run it submits (RunRequest.stretch), and the large view follows it.

"Occlude" (or Shift+drag) lets the user drag a rectangle on the model input or on the
original: the pane says which pixels of the model input it covers (`occludeRequested`), and
the window makes it an edit of the next runs. On the original, the rectangle is mapped
through the loaded model's resize and centre crop (`set_preprocess`, core.inputs.preprocess); a
part outside the crop, which the model never sees, is left out and `boxNote` says so. The
occluded boxes are outlined on both views, mapped back onto the original the same way.

Detection and segmentation models (core.tasks) draw their results on the model input too
(`set_prediction`, from each run's PredictionFrame; task_overlay.TaskOverlay): the boxes
scoring above the threshold slider, with label and score (a click on one makes it the next
runs' target: `detectionChosen`), or the class mask with a legend of the classes present.
The view switches to the model input when an image's first such result arrives.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inspector.core.inputs.images import ImageLoadError, load_image
from inspector.ui.image.canvas import ImageCanvas, qimage_from_pil, qimage_from_rgb
from inspector.ui.image.filmstrip import ImageEntry, ImageList
from inspector.ui.image.task_overlay import TaskOverlay

ORIGINAL_MAX = 1600  # the large view never needs more pixels than a screen
ORIGINAL, MODEL_INPUT = "original", "model_input"


class ImagePane(QWidget):
    imageSelected = Signal(object)  # ImageEntry: run it
    videoSelected = Signal(object)  # ImageEntry of a video file: play it
    failed = Signal(str, str)  # message, details: files that could not be opened
    noted = Signal(str)  # one line: a listed image was decoded reduced
    imagesAdded = Signal(list)  # paths that were listed (for the recent-images menu)
    stretchChanged = Signal(bool)  # "Stretch levels" was toggled: run again with it
    occludeRequested = Signal(tuple)  # (x0, y0, x1, y1) of the model input, x1/y1 exclusive
    detectionChosen = Signal(object)  # core.records.targets.DetectionTarget: a box was clicked
    boxNote = Signal(str)  # what became of a rectangle drawn on the original (clipped, missed)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._original: QImage | None = None
        self._model_input: QImage | None = None
        self.mode = ORIGINAL
        self._occlusions: list[tuple[int, int, int, int]] = []  # boxes the next runs occlude
        self._preprocess = None  # the loaded model's core Preprocess: original <-> model input
        self._picture_size: tuple[int, int] | None = None  # the original's own (w, h)

        self.canvas = ImageCanvas("Drop images or folders anywhere on the window,\n"
                                  "or press Ctrl+O to open, Ctrl+V to paste")
        # Checkable, shared with Edit ▸ Occlude region: the button shows the same action.
        self.occlude_action = QAction("Occlude region", self)
        self.occlude_action.setIconText("Occlude")  # the button's text: the pane is narrow
        self.occlude_action.setCheckable(True)
        self.occlude_action.setToolTip(
            "Drag a rectangle on the picture to occlude it in the next runs: on the Model "
            "input view, or on the Original, where the part outside the model's centre crop "
            "is left out (Shift+drag does it without this button)")
        self.occlude_action.toggled.connect(self._occlude_toggled)
        self.occlude_button = QToolButton()
        self.occlude_button.setDefaultAction(self.occlude_action)
        self.occlude_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.canvas.boxDrawn.connect(self._box_drawn)
        # Detection and segmentation results: the bar and legend are laid out below.
        self.overlay = TaskOverlay(self.canvas, self)
        self.overlay.detectionChosen.connect(self.detectionChosen)
        self.overlay.thresholdChanged.connect(self._refresh)
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

        self.list = ImageList()
        self.list.currentRowChanged.connect(self._row_changed)
        self.list.failed.connect(self.failed)
        self.list.noted.connect(self.noted)
        self.list.imagesAdded.connect(self.imagesAdded)
        self.list.cleared.connect(lambda: self._show_original(None))

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
        layout.addWidget(self.overlay.detection_bar)
        layout.addWidget(self.overlay.legend)
        layout.addWidget(self.caption)  # under the picture: the pane is often narrow
        layout.addWidget(self.list)

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

    def set_occlusions(self, boxes) -> None:
        """The boxes of the model input that the next runs occlude: outlined on it (the
        model input shown is the one before the edits) and on the original."""
        self._occlusions = [tuple(b) for b in boxes]
        self._refresh()

    def set_preprocess(self, preprocess) -> None:
        """The loaded model's core.inputs.preprocess.Preprocess (None: none loaded): how the
        original's pixels become the model input's, for rectangles drawn on the original."""
        self._preprocess = preprocess
        self._refresh()

    def picture_size(self) -> tuple[int, int] | None:
        """(width, height) of the picture shown as the original, as the model's
        preprocessing gets it (the view may show it smaller); None without one."""
        return self._picture_size

    def _original_scale(self) -> tuple[float, float] | None:
        """Picture pixels per pixel of the original as shown, when a box drawn there can be
        mapped into the model input."""
        if self._original is None or self._preprocess is None or self._picture_size is None:
            return None
        w, h = self._picture_size
        return w / self._original.width(), h / self._original.height()

    def _box_drawn(self, box: tuple) -> None:
        if self.mode == MODEL_INPUT:
            if self._model_input is not None:
                self.occludeRequested.emit(box)
            return
        scale = self._original_scale()
        if scale is None:
            return
        fx, fy = scale
        x0, y0, x1, y1 = box
        pixels, clipped = self._preprocess.box_to_input(
            (x0 * fx, y0 * fy, x1 * fx, y1 * fy), self._picture_size)
        if pixels is None:
            self.boxNote.emit("Nothing occluded: the rectangle is outside the part of the "
                              "picture the model sees (its centre crop, shown by Model input)")
            return
        self.occludeRequested.emit(pixels)
        if clipped:
            x0, y0, x1, y1 = pixels
            self.boxNote.emit(f"Clipped to the model's centre crop: occluded input pixels "
                              f"x {x0}..{x1}, y {y0}..{y1} (the rest of the rectangle is "
                              f"never seen by the model)")

    def _occlusions_on_original(self) -> list[tuple[float, float, float, float]]:
        scale = self._original_scale()
        if scale is None:
            return []
        fx, fy = scale
        out = []
        for box in self._occlusions:
            x0, y0, x1, y1 = self._preprocess.box_to_original(box, self._picture_size)
            out.append((x0 / fx, y0 / fy, x1 / fx, y1 / fy))
        return out

    def _stretch_toggled(self, on: bool) -> None:
        self._show_original(self.current())
        self.stretchChanged.emit(on)

    # -- the listed images (filmstrip.ImageList) -------------------------------------------
    def add_paths(self, paths, *, select: bool = True) -> int:
        """Queue files and folders for listing; returns how many image files were found.

        Unknown files and missing paths are reported together when the batch is done."""
        return self.list.add_paths(paths, select=select)

    accepts = staticmethod(ImageList.accepts)

    def take_mime(self, mime) -> bool:
        """Open what a drop or the clipboard holds (see ImageList.take_mime)."""
        return self.list.take_mime(mime)

    def current(self) -> ImageEntry | None:
        return self.list.current()

    def step(self, delta: int) -> bool:
        """Select the next (+1) or previous (-1) image; False at either end."""
        return self.list.step(delta)

    def stop(self) -> None:
        self.list.stop()

    # -- selection ---------------------------------------------------------------------------
    def _row_changed(self, row: int) -> None:
        entry = self.current()
        self._model_input = None
        self.overlay.clear()  # another image's boxes and mask
        if entry is not None and entry.video is not None:
            self.videoSelected.emit(entry)  # the player shows its frames (show_frame)
            return
        self._show_original(entry)
        if entry is not None:
            self.imageSelected.emit(entry)

    def _show_original(self, entry: ImageEntry | None) -> None:
        if entry is not None and entry.video is not None:
            return  # a video: the frame the player shows stays
        self._original = self._picture_size = None
        if entry is not None:
            try:
                if entry.image is not None:
                    image = entry.image.copy()
                else:
                    image = load_image(entry.path, stretch=self.stretch)
                self._picture_size = image.size
                image.thumbnail((ORIGINAL_MAX, ORIGINAL_MAX))
                self._original = qimage_from_pil(image)
            except ImageLoadError as e:  # the file changed on disk since it was listed
                self.failed.emit(f"Could not open {e.path.name}: {e.reason}", str(e))
            w, h = entry.size
            size = f"{w} × {h}"
            if entry.file_size is not None:  # decoded reduced: the file is bigger
                size += f" (decoded from {entry.file_size[0]} × {entry.file_size[1]})"
            self.caption.setText(f"{entry.name}  ·  {size}")
            # A narrow pane cuts the caption off: the tooltip has all of it.
            self.caption.setToolTip(f"{entry.path or entry.name}\n{size} pixels")
        else:
            self.caption.clear()
        self._refresh()

    # -- video frames and the camera ---------------------------------------------------------
    def show_frame(self, image, caption: str, tip: str = "") -> None:
        """A video's or the camera's frame (a PIL image) as the original picture."""
        self._picture_size = image.size
        if max(image.size) > ORIGINAL_MAX:
            image = image.copy()
            image.thumbnail((ORIGINAL_MAX, ORIGINAL_MAX))
        self._original = qimage_from_pil(image)
        self.caption.setText(caption)
        self.caption.setToolTip(tip or caption)
        if self.mode == ORIGINAL:
            self.canvas.set_image(self._original)
            self._update_boxes()

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
    def set_prediction(self, frame) -> None:
        """The current run's PredictionFrame: its boxes or mask are drawn on the model input;
        a classifier's (no boxes, no mask) clears them."""
        first = self.overlay.set_prediction(frame)
        if first and self.mode != MODEL_INPUT:
            self.set_mode(MODEL_INPUT)  # that is where the boxes' pixels are (calls _refresh)
        else:
            self._refresh()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        button = self.original_button if mode == ORIGINAL else self.input_button
        if not button.isChecked():
            button.setChecked(True)
        self._refresh()

    def toggle_mode(self) -> None:
        self.set_mode(MODEL_INPUT if self.mode == ORIGINAL else ORIGINAL)

    def _update_boxes(self) -> None:
        """Where boxes can be drawn, and the occluded ones outlined, in the view shown."""
        if self.mode == MODEL_INPUT:
            self.canvas.boxes_allowed = self._model_input is not None
            self.canvas.set_marks(self._occlusions)
        else:
            self.canvas.boxes_allowed = self._original_scale() is not None
            self.canvas.set_marks(self._occlusions_on_original())

    def _refresh(self) -> None:
        self._update_boxes()
        self.overlay.draw(self.mode == MODEL_INPUT)
        if self.mode == MODEL_INPUT:
            self.canvas.hint = "The model's input appears here after a run"
            self.canvas.set_image(self._model_input)
        else:
            self.canvas.hint = ("Drop images or folders anywhere on the window,\n"
                                "or press Ctrl+O to open, Ctrl+V to paste")
            self.canvas.set_image(self._original)
