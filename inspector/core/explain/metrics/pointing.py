"""The pointing game (Zhang et al. 2016) with TorchRay's convention, and the energy-based
pointing game (Wang et al. 2020, Score-CAM), for a map over the picture and the object's
boxes in the picture's own pixels (`pointing`) or its mask (`pointing_in_mask`).

- Pointing: the map's maximum (the first one in reading order when several tie) is a hit
  when some pixel of the boxes lies strictly closer than `tolerance` pixels to it
  (TorchRay: (row - v)^2 + (col - u)^2 < tolerance^2, 15 pixels).
- Energy: the share of the map's mass that lies inside the boxes' union.

A box is [x0, y0, x1, y1] in continuous picture coordinates (pixel k spans k..k+1): it
covers the whole pixels it touches (core.inputs.preprocess.pixel_box).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inspector.core.explain.metrics.names import POINTING_TOLERANCE
from inspector.core.inputs.preprocess import pixel_box


@dataclass(frozen=True)
class PointingResult:
    hit: bool | None  # None: undefined (see `undefined`)
    energy: float | None
    point: tuple[int, int] | None  # (x, y) of the map's maximum, picture pixels
    undefined: str | None = None
    note: str | None = None  # a box reached past the picture's edge, say


def boxes_mask(boxes: Sequence[Sequence[float]], size: tuple[int, int]
               ) -> tuple[np.ndarray, bool]:
    """(the (height, width) union of the boxes' pixels, whether a box reached past the
    picture's edges) for a picture of `size` (width, height)."""
    w, h = size
    mask = np.zeros((h, w), dtype=bool)
    clipped = False
    for box in boxes:
        pixels, cut = pixel_box(box, w, h)
        clipped = clipped or cut
        if pixels is not None:
            x0, y0, x1, y1 = pixels
            mask[y0:y1, x0:x1] = True
    return mask, clipped


def pointing(saliency: np.ndarray, boxes: Sequence[Sequence[float]],
             tolerance: int = POINTING_TOLERANCE) -> PointingResult:
    """Pointing and energy of a (height, width) map over the picture for `boxes`."""
    m = np.asarray(saliency)
    mask, clipped = boxes_mask(boxes, (m.shape[1], m.shape[0]))
    if not mask.any():
        return PointingResult(None, None, None, "no box covers any pixel of the picture")
    found = pointing_in_mask(m, mask, tolerance)
    if clipped and found.undefined is None:
        note = "a box reaches past the picture's edge: only its part inside counts"
        return PointingResult(found.hit, found.energy, found.point, note=note)
    return found


def load_mask(path: str) -> np.ndarray:
    """The object's mask in the image file at `path`: (height, width) bool, nonzero pixels
    (of any channel) the object; ValueError, one sentence, for a file it cannot read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            one_channel = image.mode in ("1", "L", "I", "I;16", "F")
            pixels = (np.asarray(image) if one_channel
                      else np.asarray(image.convert("RGB")).max(axis=-1))
    except (OSError, UnidentifiedImageError) as e:
        raise ValueError(f"the object's mask {path} cannot be read as an image "
                         f"({getattr(e, 'strerror', None) or e})") from e
    return pixels != 0


def pointing_in_mask(saliency: np.ndarray, mask: np.ndarray,
                     tolerance: int = POINTING_TOLERANCE) -> PointingResult:
    """Pointing and energy of a (height, width) map over the picture for the object's mask
    (height, width; nonzero = the object), e.g. a segmentation's ground truth."""
    m = np.asarray(saliency, dtype=np.float64)
    mask = np.asarray(mask) != 0
    if mask.shape != m.shape:
        raise ValueError(f"the object's mask is {mask.shape[1]} x {mask.shape[0]} pixels, "
                         f"the picture {m.shape[1]} x {m.shape[0]}: they must match")
    if not mask.any():
        return PointingResult(None, None, None, "the object's mask covers no pixel")
    total = float(m.sum())
    if not np.isfinite(total) or total <= 0 or float(m.max() - m.min()) <= 0:
        return PointingResult(None, None, None, "the map is constant on the picture: it "
                              "points nowhere")
    h, w = m.shape
    index = int(np.argmax(m))  # the first maximum in reading order
    v, u = divmod(index, w)
    rows, cols = np.nonzero(mask)
    hit = bool(((rows - v) ** 2 + (cols - u) ** 2 < tolerance * tolerance).any())
    energy = float(m[mask].sum()) / total
    return PointingResult(hit, energy, (u, v))
