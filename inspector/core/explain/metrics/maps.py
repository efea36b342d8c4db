"""The maps the metrics score: a CAM as the window shows it (at the model input's size, in
[0, 1]); an input attribution's sum over the input channels of its absolute value, scaled
to [0, 1] (not its display map, which shows the largest |value| of a gradient, or
occlusion's positive part).
"""

from __future__ import annotations

import numpy as np
import torch

from inspector.core.explain.attributions import attribution_map
from inspector.core.explain.catalog import METHODS

RELATIVE_FLAT = 1e-6  # a map whose range is at most this fraction of its peak is constant


def attribution_saliency(signed: np.ndarray) -> np.ndarray:
    """The (H, W) map of a (C, H, W) attribution the metrics score."""
    return attribution_map(torch.from_numpy(np.asarray(signed, np.float32))[None], "abs_sum")[0]


def is_constant(m: np.ndarray) -> bool:
    """Whether the map ranks no pixel above another (all zero: no evidence at all)."""
    m = np.asarray(m, dtype=np.float64)
    lo, hi = float(np.nanmin(m)), float(np.nanmax(m))
    return not np.isfinite(hi - lo) or hi - lo <= RELATIVE_FLAT * max(abs(hi), abs(lo))


def constant_reason(method: str) -> str:
    title = METHODS[method].title if method in METHODS else method
    return f"{title}'s map is constant on this image: its faithfulness is undefined"
