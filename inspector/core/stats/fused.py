"""One pass over a CPU tensor for all of its statistics: the compiled kernel `_cstats`.

Why: torch computes each reduction in its own pass over memory. For the six numbers a hook
needs (sum, sum of squares, sum of |x|, non-zeros, min, max) that is five or six passes
plus a temporary; over resnet50's 158 leaf outputs at batch 1 (32 M values) about as long
as the forward itself. The kernel reads each value once (its figures: tests/benchmarks/README.md).

The kernel is C compiled when the package is built (setup.py), not at run time: there is
no JIT and no cache on disk, so no state of a cache can take a process down, and every
form the app ships in (a `make` checkout, `pip install .`, a script importing the engine,
the frozen app) has it from the first tensor. Where it was not built (no C compiler at
install time, or a source tree used without installing) or INSPECTOR_FUSED_STATS=0 is set,
`available()` is False, `fallback_note()` says why, and callers use torch reductions.

Numerics: each row is reduced around a shift (its first value), in float32 blocks of 1024
added into float64, and rows are merged with Chan's formula; min and max skip NaN, so a
non-finite result means "recount with torch": `moments` reports it in its last field.
"""

from __future__ import annotations

import os

import numpy as np

_kernel = None
_failure: str | None = None

if os.environ.get("INSPECTOR_FUSED_STATS", "1").strip().lower() in ("0", "false", "no", "off"):
    _failure = "turned off by INSPECTOR_FUSED_STATS=0"
else:
    try:
        from inspector.core.stats import _cstats as _kernel
    except ImportError as e:  # not built: the package was used without being installed
        _failure = f"the compiled statistics kernel is missing ({e}); reinstall the package"


def available() -> bool:
    """True when the compiled kernel is loaded."""
    return _kernel is not None


def fallback_note() -> str | None:
    """One line for the status bar or stderr when statistics take the slower torch path."""
    if _failure is None:
        return None
    return f"Statistics use torch reductions (slower on the CPU): {_failure}."


def moments(a: np.ndarray, batch: int, channels: int):
    """Statistics of a float32 C-contiguous array of batch * channels equal rows, batch-major.

    Returns (mean, std, min, max, zero_fraction, abs_mean, per_channel, finite):
    per-tensor floats; per_channel, a (5, channels) float32 array of mean, std, min, max
    and zero fraction; finite=False when a NaN or inf was seen (then nothing else is
    meaningful and the caller must recount). Releases the GIL while it runs.
    """
    if _kernel is None:
        raise RuntimeError(f"fused statistics unavailable: {_failure}")
    per = np.empty((5, channels), np.float32)
    mean, std, lo, hi, zero, abs_mean, finite = _kernel.moments(a, batch, channels, per)
    return mean, std, lo, hi, zero, abs_mean, per, finite


def area_pool(x: np.ndarray, factor: int) -> np.ndarray:
    """Means of factor x factor cells of a (C, H, W) float32 C-contiguous array, edge cells
    clipped (as torch's avg_pool2d with ceil_mode=True, count_include_pad=False). A new
    array; cheaper than avg_pool2d on the CPU, and it releases the GIL."""
    if _kernel is None:
        raise RuntimeError(f"fused statistics unavailable: {_failure}")
    c, h, w = x.shape
    out = np.empty((c, -(-h // factor), -(-w // factor)), np.float32)
    _kernel.area_pool(x, c, h, w, factor, out)
    return out
