"""One pass over a CPU tensor for all of its statistics (a numba kernel).

Why: torch computes each reduction in its own pass over memory. For the six numbers a
hook needs (sum, sum of squares, sum of |x|, non-zeros, min, max) that is five or six
passes plus a temporary (the sign trick for non-zeros). On resnet50's activations at
batch 1 (32 M values) that costs about as much as the forward itself (148 ms against a
148 ms forward, measured with tests/benchmarks/bench_capture.py); this kernel reads each
value once: 22 ms there.

Numerics: each row is reduced around a shift (its first value), in float32 blocks of
1024 added into float64, and rows are merged with Chan's parallel formula. So a
tensor with mean 1e4 and std 1e-2 keeps its std, where sum(x^2)/n - mean^2 in float32
returns noise.

min and max use LLVM's minnum/maxnum, which the loop vectoriser understands (numba's
own min() and max() are NaN-checked and stop vectorisation: 4x slower, measured).
They skip NaN, so callers must treat a non-finite result as "recount with torch":
`moments` reports it in its last field.

Only float32, C-contiguous (rows, n) arrays. numba is imported on first use; when it is
missing or fails to compile, `warm_up()` returns False and callers use torch reductions.
INSPECTOR_FUSED_STATS=0 turns the kernel off.

Building costs about 1 s from numba's on-disk cache (importing numba included) and about
14 s without one (measured here), so a session starts `warm_up_in_background()` after its
first run and hooks ask `ready()`, which never waits: runs before the kernel is ready use
torch. `make` fills the cache when it installs the environment. A frozen app has no source
files to key the cache on and would compile at every launch, so there the kernel is off.
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

_lock = threading.Lock()
_start_lock = threading.Lock()
_kernel = None  # _stats_kernels.tensor_moments once built
_pool = None  # _stats_kernels.area_pool once built
_failure: str | None = None  # why the kernel is unavailable, once known
_warming = False  # a background build was started
_parallel = False  # numba's threading layer is a thread-safe one (see _build)


def ready() -> bool:
    """True when the kernel is built. Never waits: hooks ask this on every tensor."""
    return _kernel is not None


def settled() -> bool:
    """True when the kernel is built or known to be unavailable. Never waits."""
    return _kernel is not None or _failure is not None


def warm_up_in_background() -> None:
    """Build the kernel on a daemon thread, unless it is built, failed or being built."""
    global _warming
    with _start_lock:  # not _lock: a build in progress holds that one for seconds
        if _kernel is not None or _failure is not None or _warming:
            return
        _warming = True
    threading.Thread(target=_load, name="fused-stats-warm-up", daemon=True).start()


def failure() -> str | None:
    """Why the kernel cannot be used, or None."""
    _load()
    return _failure


def warm_up() -> bool:
    """Compile or load the kernel now, waiting for it (seconds without a cache); True when
    it is usable."""
    return _load() is not None


def moments(rows: np.ndarray, batch: int, channels: int, parallel: bool = True):
    """Statistics of a (batch * channels, n) float32 C-contiguous array, rows batch-major.

    parallel=False keeps the kernel on the calling thread (a background thread that is
    meant to use one idle core); True splits large tensors over numba's threads when the
    threading layer allows it.

    Returns (mean, std, min, max, zero_fraction, abs_mean, per_channel, finite):
    per-tensor floats; per_channel, a (5, channels) float32 array of mean, std, min, max
    and zero fraction; finite=False when a NaN or inf was seen (then nothing else is
    meaningful and the caller must recount).
    """
    if _kernel is None:  # callers check ready() first; this is per tensor, so never build here
        raise RuntimeError(f"fused statistics not built: {_failure or 'call warm_up() first'}")
    return _kernel(rows, batch, channels, parallel and _parallel)


def area_pool(x: np.ndarray, factor: int) -> np.ndarray:
    """Means of factor x factor cells of a (C, H, W) float32 C-contiguous array, edge
    cells clipped (as torch's avg_pool2d with ceil_mode=True, count_include_pad=False).
    A new array. Callers check ready() first."""
    if _pool is None:
        raise RuntimeError(f"fused statistics not built: {_failure or 'call warm_up() first'}")
    return _pool(x, factor)


def _load():
    global _kernel, _failure
    if _kernel is not None or _failure is not None:
        return _kernel
    with _lock:
        if _kernel is None and _failure is None:
            if os.environ.get("INSPECTOR_FUSED_STATS", "1").strip() in ("0", "false", "no"):
                _failure = "turned off by INSPECTOR_FUSED_STATS=0"
            elif getattr(sys, "frozen", False):
                _failure = "off in the frozen app (numba could not cache the compiled kernel)"
            else:
                try:
                    _kernel = _build()
                except Exception as e:  # noqa: BLE001  (any failure means: use torch)
                    _failure = f"{type(e).__name__}: {e}"
    return _kernel


def _build():
    global _parallel, _pool
    import numba  # about 0.3 s, and the kernels' module below needs it: only on first use

    from . import _stats_kernels

    kernel = _stats_kernels.tensor_moments
    kernel(np.zeros((2, 3), np.float32), 1, 2, False)  # compile (or load) now: failures show here
    _stats_kernels.area_pool(np.zeros((1, 3, 3), np.float32), 2)
    _pool = _stats_kernels.area_pool
    # Large tensors are split over threads only with a thread-safe threading layer (TBB or
    # OpenMP). On Linux numba's OpenMP layer runs on the system libgomp while torch wheels
    # bundle their own, so that is a second, separate pool of threads (seen in
    # /proc/self/maps); they sleep between runs (OMP_WAIT_POLICY=PASSIVE). numba's fallback,
    # workqueue, aborts the process when two threads launch at once (two sessions), so
    # without a safe layer the kernel runs on one thread. The layer loads at the first
    # parallel launch: make it here, where a failure only means "serial".
    if numba.config.THREADING_LAYER == "default":
        numba.config.THREADING_LAYER = "threadsafe"
    try:
        _stats_kernels.rows_parallel(np.zeros((2, 3), np.float32), np.empty((2, 6)))
        _parallel = numba.threading_layer() in ("tbb", "omp")
    except Exception:  # noqa: BLE001
        _parallel = False
    return kernel
