"""Showing a picture in a widget: an image scaled to fit, and the conversions between
numpy arrays, PIL images and QImages that every picture in the window goes through."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage, QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget


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


class ImageCanvas(QWidget):
    """Paints one image scaled to fit, centred; a hint when there is none."""

    def __init__(self, hint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._image: QImage | None = None
        self.hint = hint
        self.setMinimumSize(120, 90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_image(self, image: QImage | None) -> None:
        self._image = image
        self.update()

    def image(self) -> QImage | None:
        return self._image

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base).darker(104))
        if self._image is None or self._image.isNull():
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(self.rect().adjusted(12, 12, -12, -12),
                       Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.hint)
            return
        size = self._image.size().scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio)
        x = (self.width() - size.width()) / 2
        y = (self.height() - size.height()) / 2
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform,
                        size.width() < self._image.width())
        p.drawImage(QRectF(x, y, size.width(), size.height()), self._image)
