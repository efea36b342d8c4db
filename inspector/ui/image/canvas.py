"""Showing a picture in a widget: an image scaled to fit, and the conversions between
numpy arrays, PIL images and QImages that every picture in the window goes through.

The canvas also lets the user drag a rectangle on the picture (the occlusion edit): while
`box_mode` is on, or with Shift held, a left drag draws a box, and `boxDrawn` gives it in the
picture's own pixels, whatever size the picture is shown at.

Over the picture it draws what a detection or segmentation model found: labelled boxes
with their keypoints as dots (`set_detections`; a click inside one emits `detectionClicked`
with its key) and a translucent class mask (`set_overlay`, an image of the picture's size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

MIN_DRAG = 3  # widget pixels: a shorter drag is a click, not a box
BOX_COLOR, CHOSEN_COLOR = QColor("#4fc3f7"), QColor("#ff7043")
POINT_RADIUS = 3.0  # widget pixels: a keypoint's dot, the same at any zoom


@dataclass(frozen=True)
class DrawnBox:
    """A detection drawn over the picture: its box in picture pixels, its caption."""

    box: tuple[float, float, float, float]  # x0, y0, x1, y1
    text: str
    key: int  # what a click on it emits (the detection's rank)
    chosen: bool = False  # the detection the CAM explains: drawn in another colour
    points: tuple[tuple[float, float], ...] = ()  # its keypoints (Keypoint R-CNN), as dots


def qimage_from_rgb(array: np.ndarray) -> QImage:
    """An owned QImage copy of an HxWx3 uint8 array."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    h, w = array.shape[:2]
    return QImage(array.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


def qimage_from_pil(image) -> QImage:
    return qimage_from_rgb(np.asarray(image.convert("RGB")))


def pil_from_qimage(qimage: QImage):
    from PIL import Image

    rgb = qimage.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = rgb.width(), rgb.height(), rgb.bytesPerLine()
    buffer = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=stride * h)
    return Image.fromarray(buffer.reshape(h, stride)[:, : 3 * w].reshape(h, w, 3).copy())


def box_in_pixels(a: QPointF, b: QPointF, width: int, height: int) -> tuple[int, int, int, int] | None:
    """The pixels a drag from `a` to `b` (picture coordinates, pixel k spans k..k+1) touches,
    as (x0, y0, x1, y1) with x1, y1 exclusive, inside a width x height picture; None when
    the drag misses the picture."""
    x0 = max(0, math.floor(min(a.x(), b.x())))
    y0 = max(0, math.floor(min(a.y(), b.y())))
    x1 = min(width, math.ceil(max(a.x(), b.x())))
    y1 = min(height, math.ceil(max(a.y(), b.y())))
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


class ImageCanvas(QWidget):
    """Paints one image scaled to fit, centred; a hint when there is none.

    What it paints is in `image`, `marks`, `detections` and `overlay`; the set_* methods
    change them and repaint."""

    boxDrawn = Signal(tuple)  # (x0, y0, x1, y1) in the image's pixels, x1 and y1 exclusive
    detectionClicked = Signal(int)  # the key of the detection box clicked

    def __init__(self, hint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.image: QImage | None = None
        self.hint = hint
        self.box_mode = False  # a left drag draws a box (otherwise only with Shift)
        self.boxes_allowed = False  # whether the picture shown takes boxes at all
        self._drag: tuple[QPointF, QPointF] | None = None  # widget positions
        self.marks: list[tuple[int, int, int, int]] = []  # boxes outlined on the image
        self.detections: list[DrawnBox] = []
        self.overlay: QImage | None = None  # a translucent mask of the image's size
        self.setMinimumSize(120, 90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_image(self, image: QImage | None) -> None:
        self.image = image
        self._drag = None
        self.update()

    def set_marks(self, boxes) -> None:
        """Outline these (x0, y0, x1, y1) boxes, in image pixels, over the image."""
        self.marks = [tuple(b) for b in boxes]
        self.update()

    def set_detections(self, boxes) -> None:
        """Draw these DrawnBox over the image (in image pixels)."""
        self.detections = list(boxes)
        self.update()

    def set_overlay(self, overlay: QImage | None) -> None:
        """Paint this (translucent) image over the picture, scaled as the picture is."""
        self.overlay = overlay
        self.update()

    def detection_at(self, point: QPointF) -> DrawnBox | None:
        """The detection under an image point: the smallest box containing it (a box inside
        another stays clickable)."""
        inside = [d for d in self.detections
                  if d.box[0] <= point.x() <= d.box[2] and d.box[1] <= point.y() <= d.box[3]]
        return min(inside, key=lambda d: (d.box[2] - d.box[0]) * (d.box[3] - d.box[1]),
                   default=None)

    def set_box_mode(self, on: bool) -> None:
        self.box_mode = on
        self.setCursor(Qt.CursorShape.CrossCursor if on else Qt.CursorShape.ArrowCursor)

    # -- geometry ------------------------------------------------------------------------------
    def image_rect(self) -> QRectF | None:
        """Where the image is painted, in widget coordinates (scaled to fit, centred)."""
        if self.image is None or self.image.isNull():
            return None
        size = self.image.size().scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio)
        x = (self.width() - size.width()) / 2
        y = (self.height() - size.height()) / 2
        return QRectF(x, y, size.width(), size.height())

    def to_image(self, pos: QPointF) -> QPointF | None:
        """A widget position in the image's pixel coordinates (pixel k spans k..k+1)."""
        rect = self.image_rect()
        if rect is None or rect.width() <= 0 or rect.height() <= 0:
            return None
        return QPointF((pos.x() - rect.x()) * self.image.width() / rect.width(),
                       (pos.y() - rect.y()) * self.image.height() / rect.height())

    def from_image(self, point: QPointF) -> QPointF | None:
        """An image pixel coordinate in widget coordinates (the inverse of to_image)."""
        rect = self.image_rect()
        if rect is None:
            return None
        return QPointF(rect.x() + point.x() * rect.width() / self.image.width(),
                       rect.y() + point.y() * rect.height() / self.image.height())

    # -- drawing a box -------------------------------------------------------------------------
    def mousePressEvent(self, event) -> None:  # noqa: N802
        shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if (event.button() == Qt.MouseButton.LeftButton and self.boxes_allowed
                and (self.box_mode or shift) and self.image_rect() is not None):
            self._drag = (event.position(), event.position())
            event.accept()
            return
        if event.button() == Qt.MouseButton.LeftButton and self.detections:
            point = self.to_image(event.position())
            hit = self.detection_at(point) if point is not None else None
            if hit is not None:
                event.accept()
                self.detectionClicked.emit(hit.key)
                return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        if self._drag is not None:
            self._drag = (self._drag[0], event.position())
            self.update()
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802
        if self._drag is None or event.button() != Qt.MouseButton.LeftButton:
            super().mouseReleaseEvent(event)
            return
        start, end = self._drag[0], event.position()
        self._drag = None
        self.update()
        event.accept()
        if (end - start).manhattanLength() < MIN_DRAG:
            return
        a, b = self.to_image(start), self.to_image(end)
        if a is None or b is None:
            return
        box = box_in_pixels(a, b, self.image.width(), self.image.height())
        if box is not None:
            self.boxDrawn.emit(box)

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base).darker(104))
        if self.image is None or self.image.isNull():
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(self.rect().adjusted(12, 12, -12, -12),
                       Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.hint)
            return
        rect = self.image_rect()
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform,
                        rect.width() < self.image.width())
        p.drawImage(rect, self.image)
        if self.overlay is not None:
            p.drawImage(rect, self.overlay)
        self._paint_detections(p)
        if self.marks:
            p.setPen(QPen(QColor("#ffd54f"), 1.5))
            p.setBrush(QColor(0, 0, 0, 140))
            for x0, y0, x1, y1 in self.marks:
                p.drawRect(QRectF(self.from_image(QPointF(x0, y0)),
                                  self.from_image(QPointF(x1, y1))))
        if self._drag is not None:
            p.setPen(QPen(QColor("#ffd54f"), 1.5, Qt.PenStyle.DashLine))
            p.setBrush(QColor(0, 0, 0, 90))
            p.drawRect(QRectF(self._drag[0], self._drag[1]).normalized())

    def _paint_detections(self, p: QPainter) -> None:
        metrics = p.fontMetrics()
        for d in sorted(self.detections, key=lambda d: d.chosen):  # the chosen one on top
            color = CHOSEN_COLOR if d.chosen else BOX_COLOR
            a = self.from_image(QPointF(d.box[0], d.box[1]))
            b = self.from_image(QPointF(d.box[2], d.box[3]))
            p.setPen(QPen(color, 2.5 if d.chosen else 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(a, b).normalized())
            if d.points:
                p.setBrush(color)
                p.setPen(QPen(QColor("black"), 1))
                for x, y in d.points:
                    p.drawEllipse(self.from_image(QPointF(x, y)), POINT_RADIUS, POINT_RADIUS)
            # The caption above the box, inside the widget when the box touches the top.
            w, h = metrics.horizontalAdvance(d.text) + 6, metrics.height() + 2
            top = a.y() - h if a.y() - h >= 0 else a.y()
            label = QRectF(a.x(), top, w, h)
            p.fillRect(label, color)
            p.setPen(QColor("black"))
            p.drawText(label, Qt.AlignmentFlag.AlignCenter, d.text)
