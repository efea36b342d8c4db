"""The picture the CAM pane shows: a map's colours over the image the run saw, blended in
numpy into reused buffers (image + alpha * (heat - image)), so that dragging the opacity
slider costs one multiply-add over the image and nothing is allocated.

With a reference map (the same method and layer in the run compared with), the colours are
those of the difference, map - reference, in a diverging colour map centred on 0 and
spanning its largest |value|. Without an image of the map's size, the map is shown alone.
"""

from __future__ import annotations

import numpy as np

from inspector.core.records.frames import CamFrame
from inspector.ui.views import colormaps


def heat_rgb(cam: np.ndarray, cmap: str = colormaps.DEFAULT_OVERLAY) -> np.ndarray:
    """(H, W) in [0, 1] -> (H, W, 3) float32 colours of the overlay map."""
    index = np.clip(np.nan_to_num(cam, nan=0.0) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return colormaps.lut(cmap)[index].astype(np.float32)


def difference_rgb(diff: np.ndarray, extent: float) -> np.ndarray:
    """(H, W) in [-extent, extent] -> (H, W, 3) float32 colours of the diverging map, 0 in
    its middle colour."""
    return heat_rgb(0.5 + 0.5 * np.asarray(diff, np.float32) / extent, colormaps.DEFAULT_DIVERGING)


class CamOverlay:
    """A map over an image: `prepare` what to draw when it changes, `compose` at each paint."""

    def __init__(self) -> None:
        self.drawn: tuple[CamFrame | None, np.ndarray | None] = (None, None)  # map, image
        # With a reference map: map - reference, and the largest |value| the colours span.
        self.difference: np.ndarray | None = None
        self.extent = 0.0
        self.image_f: np.ndarray | None = None  # the image as float32; None: the map alone
        self._diff: np.ndarray | None = None  # heat - image, float32
        self._prepared: tuple = (None, None, None)  # what prepare last prepared
        self._scratch: np.ndarray | None = None
        self._blend: np.ndarray | None = None  # the reused uint8 blend buffer

    @property
    def has_map(self) -> bool:
        """Whether a map is drawn (the opacity changes the picture)."""
        return self._diff is not None

    def prepare(self, cam: CamFrame | None, display: np.ndarray | None,
                reference: CamFrame | None = None) -> None:
        """The float image and (heat - image) the blend needs, when what is drawn changed:
        `cam` over `display`, or with `reference`, the difference cam - reference."""
        if all(a is b for a, b in zip(self._prepared, (cam, display, reference), strict=True)):
            return
        self._prepared = (cam, display, reference)
        self.drawn = (cam, display)
        self.image_f = None if display is None else display.astype(np.float32)
        self._diff = None
        self.difference, self.extent = None, 0.0
        if cam is None:
            return
        if reference is None:
            heat = heat_rgb(cam.cam)
        else:
            self.difference = np.nan_to_num(cam.cam - reference.cam, nan=0.0)
            self.extent = float(np.abs(self.difference).max(initial=0.0))
            # Equal maps: every pixel gets the middle colour (no division by zero).
            heat = difference_rgb(self.difference, self.extent or 1.0)
        if self.image_f is not None and self.image_f.shape == heat.shape:
            self._diff = heat - self.image_f
        else:
            self.image_f = None  # no image, or not at the CAM's size: show the map alone
            self._diff = heat

    def compose(self, alpha: float) -> np.ndarray | None:
        """Blend into the reused buffer; returns what to show (the image alone without a
        map, None without either)."""
        if self._diff is None:
            return self.drawn[1]
        shape = self._diff.shape
        if self._scratch is None or self._scratch.shape != shape:
            self._scratch = np.empty(shape, np.float32)
            self._blend = np.empty(shape, np.uint8)
        if self.image_f is None:
            np.copyto(self._scratch, self._diff)  # the map alone
        else:
            np.multiply(self._diff, alpha, out=self._scratch)
            np.add(self._scratch, self.image_f, out=self._scratch)
        np.add(self._scratch, 0.5, out=self._scratch)  # round, not truncate
        np.copyto(self._blend, self._scratch, casting="unsafe")
        return self._blend
