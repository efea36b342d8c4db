"""What the image pane draws for detection and segmentation models (core.tasks): the boxes
above a score threshold, and the class mask as a translucent colour image with its legend."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtGui import QImage

from inspector.ui.image_canvas import DrawnBox

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


def drawn_boxes(detections, threshold: float, chosen: int | None) -> list[DrawnBox]:
    """The detections scoring at least `threshold`, as the canvas draws them."""
    return [DrawnBox(tuple(d.box), f"{d.label} {d.score:.2f}", d.index, d.index == chosen)
            for d in detections if d.score >= threshold]
