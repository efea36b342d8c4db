"""The colour maps the views offer, by the names a user sees in a combo box.

Sequential maps are for activations (low to high); diverging maps are for gradients, whose
sign matters, and are always shown with levels symmetric about zero so that white (or black)
means "no gradient". All maps ship with pyqtgraph, so nothing is downloaded.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyqtgraph as pg

# User-facing name -> pyqtgraph's name for the map (files in pyqtgraph/colors/maps).
SEQUENTIAL = {
    "viridis": "viridis",
    "inferno": "inferno",
    "magma": "magma",
    "plasma": "plasma",
    "cividis": "cividis",
    "turbo": "turbo",
    "gray": "CET-L1",
}
DIVERGING = {
    "blue-white-red": "CET-D1",
    "blue-black-red": "CET-D4",
    "green-white-red": "CET-D3",
}
DEFAULT_SEQUENTIAL = "viridis"
DEFAULT_DIVERGING = "blue-white-red"
# A CAM overlay reads best with a map whose low end is dark and high end is hot.
DEFAULT_OVERLAY = "turbo"


@cache
def get(name: str) -> pg.ColorMap:
    """The pyqtgraph ColorMap for a user-facing name (or a pyqtgraph name)."""
    source = SEQUENTIAL.get(name) or DIVERGING.get(name) or name
    cmap = pg.colormap.get(source)
    if cmap is None:
        raise KeyError(f"unknown colour map {name!r}")
    return cmap


@cache
def lut(name: str, n: int = 256) -> np.ndarray:
    """An (n, 3) uint8 lookup table, cached: ImageItems share it instead of rebuilding it."""
    table = get(name).getLookupTable(nPts=n, alpha=False)
    table = np.ascontiguousarray(table, dtype=np.uint8)
    table.setflags(write=False)
    return table


def names(diverging: bool) -> list[str]:
    return list(DIVERGING if diverging else SEQUENTIAL)
