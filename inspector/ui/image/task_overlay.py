"""What the image pane draws for detection and segmentation models (core.tasks): the boxes
above a score threshold (and Keypoint R-CNN's keypoints in them), and the class mask as a
translucent colour image with its legend (TaskOverlay: the pane's threshold bar, legend and
canvas overlays of the current run)."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QWidget

from inspector.core.records.targets import DetectionTarget
from inspector.ui.image.canvas import DrawnBox, ImageCanvas

DEFAULT_THRESHOLD = 50  # of 100: boxes scoring under 0.5 are hidden until the slider moves
MASK_ALPHA = 120  # of 255: the picture stays readable under the mask
BACKGROUND_LABELS = ("__background__", "background")


def class_colors(n: int) -> np.ndarray:
    """(n, 3) uint8: PASCAL VOC's palette (the bits of the class index spread over R, G, B),
    distinct for neighbouring classes and the same colours VOC's own masks use."""
    colors = np.zeros((n, 3), np.uint8)
    for c in range(n):
        value, r, g, b = c, 0, 0, 0
        for bit in range(8):
            r |= ((value >> 0) & 1) << (7 - bit)
            g |= ((value >> 1) & 1) << (7 - bit)
            b |= ((value >> 2) & 1) << (7 - bit)
            value >>= 3
        colors[c] = (r, g, b)
    return colors


def transparent_classes(legend) -> set[int]:
    """Background classes: left uncoloured so that the picture shows through."""
    return {c for c, label in legend if label.lower() in BACKGROUND_LABELS}


def mask_image(mask: np.ndarray, legend) -> QImage:
    """An RGBA QImage of the mask's size: each class in its colour, background clear."""
    mask = np.asarray(mask)
    top = int(mask.max()) + 1 if mask.size else 1
    colors = class_colors(max(top, 1))
    rgba = np.zeros((*mask.shape, 4), np.uint8)
    rgba[..., :3] = colors[np.clip(mask, 0, top - 1)]
    rgba[..., 3] = MASK_ALPHA
    for c in transparent_classes(legend):
        rgba[mask == c, 3] = 0
    h, w = mask.shape
    return QImage(np.ascontiguousarray(rgba).data, w, h, 4 * w,
                  QImage.Format.Format_RGBA8888).copy()


def legend_html(legend) -> str:
    """One coloured square and name per class in the mask (background included, unfilled)."""
    if not legend:
        return ""
    colors = class_colors(max(c for c, _ in legend) + 1)
    clear = transparent_classes(legend)
    parts = []
    for c, label in legend:
        r, g, b = colors[c]
        swatch = "□" if c in clear else f"<span style='color:#{r:02x}{g:02x}{b:02x}'>■</span>"
        parts.append(f"{swatch}&nbsp;{html.escape(label)}")
    return " &nbsp; ".join(parts)


def nothing_detected(frame) -> bool:
    """A detection model's run that found nothing (above the model's own score threshold)."""
    return frame is not None and frame.task == "detection" and not frame.detections


def nothing_detected_text(frame, then: str = "nothing in this image to explain.") -> str:
    """Says that nothing was detected, above which score the model looked, and `then`."""
    threshold = getattr(frame, "score_threshold", None)
    above = "" if threshold is None else f" above {threshold:.2g}"
    return f"No detection{above} (the score threshold the model used): {then}"


def drawn_boxes(detections, threshold: float, chosen: int | None) -> list[DrawnBox]:
    """The detections scoring at least `threshold`, as the canvas draws them (with their
    keypoints, for Keypoint R-CNN: every one, whatever its own score)."""
    return [DrawnBox(tuple(d.box), f"{d.label} {d.score:.2f}", d.index, d.index == chosen,
                     tuple((x, y) for x, y, _score in d.keypoints))
            for d in detections if d.score >= threshold]


class TaskOverlay(QObject):
    """The image pane's part for detection and segmentation runs: the run's PredictionFrame,
    the score-threshold bar and the class legend (widgets the pane lays out), and what the
    canvas draws from them. A click on a box emits `detectionChosen` (a DetectionTarget:
    the next runs explain it)."""

    detectionChosen = Signal(object)  # core.records.targets.DetectionTarget
    thresholdChanged = Signal()  # the slider moved: the boxes shown change

    def __init__(self, canvas: ImageCanvas, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.canvas = canvas
        self.prediction = None  # the PredictionFrame of a detection or segmentation run
        self._mask_overlay: QImage | None = None  # its mask, coloured (made once per frame)
        canvas.detectionClicked.connect(self._detection_clicked)
        # Detection models: the score under which boxes are hidden.
        self.threshold_slider = QSlider(Qt.Orientation.Horizontal)
        self.threshold_slider.setRange(0, 100)
        self.threshold_slider.setValue(DEFAULT_THRESHOLD)
        self.threshold_slider.setToolTip("Boxes scoring under this are hidden; click a box to "
                                         "explain it (the CAM target)")
        self.threshold_slider.valueChanged.connect(lambda _value: self.thresholdChanged.emit())
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

    @property
    def threshold(self) -> float:
        """Boxes scoring under this are hidden."""
        return self.threshold_slider.value() / 100

    def set_prediction(self, frame) -> bool:
        """Keep a run's PredictionFrame when it has boxes or a mask (a classifier's clears
        them); True when it is the first such result since the last clear."""
        # A detection run that found nothing is kept too: the bar says so.
        shows = bool(frame is not None and (frame.task == "detection"
                                            or frame.mask is not None))
        first = shows and self.prediction is None
        self.prediction = frame if shows else None
        self._mask_overlay = (mask_image(frame.mask, frame.legend)
                              if shows and frame.mask is not None else None)
        return first

    def clear(self) -> None:
        """Another image: its boxes and mask are not this one's."""
        self.prediction = self._mask_overlay = None

    def draw(self, shown: bool) -> None:
        """Put the boxes or mask on the canvas (`shown`: the model input is on it, where
        their pixels are), and show the bar or legend that goes with them."""
        frame = self.prediction if shown else None
        detections = frame is not None and frame.task == "detection"
        mask = frame.mask if frame is not None else None
        self.detection_bar.setVisible(detections)
        boxes = drawn_boxes(frame.detections, self.threshold, frame.target) \
            if detections else []
        self.threshold_label.setText(self._threshold_text(frame, boxes) if detections else "")
        self.canvas.set_detections(boxes)
        self.canvas.set_overlay(self._mask_overlay if mask is not None else None)
        self.legend.setVisible(mask is not None)
        self.legend.setText(legend_html(frame.legend) if mask is not None else "")

    def _threshold_text(self, frame, boxes) -> str:
        """The slider's value, and how many of the run's detections it lets through."""
        text = f"Score ≥ {self.threshold:.2f}"
        self.threshold_label.setToolTip(nothing_detected_text(frame)
                                        if not frame.detections else "")
        if not frame.detections:
            threshold = frame.score_threshold
            return f"{text} · nothing" + ("" if threshold is None else f" above {threshold:.2g}")
        return f"{text} · {len(boxes)} of {len(frame.detections)} boxes"

    def _detection_clicked(self, rank: int) -> None:
        frame = self.prediction
        if frame is not None and rank != frame.target:
            # The object, not its rank: the next runs (an edit, the next video frame) may
            # order the scores otherwise.
            chosen = frame.detections[rank]
            self.detectionChosen.emit(DetectionTarget(rank, chosen.box, chosen.class_index))
