"""Thread settings for the engine, chosen deliberately.

OMP_WAIT_POLICY=PASSIVE is set by inspector.core's __init__ (and by the app's entry point)
unless the user set it: idle OpenMP threads then sleep instead of spinning for a core, which
on a busy desktop turned a 16 ms forward into more than a second. OpenMP reads it once,
when torch is imported, so it applies where inspector is imported first (the app, the
command); a script that imports torch before inspector sets it in its own environment.

torch's intra-op thread count is torch's own default (one per physical core, or
OMP_NUM_THREADS) unless INSPECTOR_THREADS=N says otherwise. That is applied once per process,
when the first Session is made (`apply_thread_setting`), before its worker thread starts:
torch keeps the count per thread, and a thread takes the process's count when it first runs
torch, so the worker and every thread started after it run with N. A program that calls
torch.set_num_threads itself keeps its choice: after the first Session nothing is set again,
and a count changed between importing this module and the first Session is left as it is
(a count set before this module was imported cannot be told from torch's default).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator

import torch

ENV = "INSPECTOR_THREADS"
_STARTED_WITH = torch.get_num_threads()  # torch's own default, unless set before this import
_applied = False
_lock = threading.Lock()


def threads_from_env() -> int | None:
    """INSPECTOR_THREADS as a positive count; None when unset, or (with a warning) invalid."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        warnings.warn(f"{ENV}={raw!r} is not a positive whole number: ignored, torch's "
                      f"default thread count is used", RuntimeWarning, stacklevel=2)
        return None
    return threads


def stream_threads() -> int | None:
    """The intra-op threads for the runs of a video or camera playing in a window: one fewer
    than the engine's, left to the UI thread and the decoder, which work for every frame
    too. An intra-op pool as large as the machine beside them stalls at each op's barrier
    whenever one of its threads waits for a core: on 2 cores resnet18's live runs reached
    the window 22 times a second with 2 threads and 30 with 1 (bench_video --window).
    None where the engine has one thread already."""
    threads = torch.get_num_threads()
    return threads - 1 if threads > 1 else None


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to `threads` (None: unchanged) for the calling
    thread's work within the block, and put back after."""
    before = torch.get_num_threads()
    if threads is None or threads < 1 or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def apply_thread_setting() -> int | None:
    """Apply INSPECTOR_THREADS once per process; the count set, or None when nothing was."""
    global _applied
    with _lock:
        if _applied:
            return None
        _applied = True
        threads = threads_from_env()
        if threads is None or torch.get_num_threads() != _STARTED_WITH:
            return None  # unset, or the program chose its own count
        torch.set_num_threads(threads)
        return threads


def release_freed_memory() -> bool:
    """Hand memory that is free again back to the OS: after a model switch, the old model's
    weights and activations are freed, but glibc keeps the freed pages in its arenas (one
    per thread that allocated), so the process's RSS stays at its high-water mark. The
    garbage collector runs first (a model's modules hold reference cycles). True where
    malloc_trim exists (glibc); elsewhere only the collector runs."""
    import gc

    gc.collect()
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: macOS, Windows, musl
        return False
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    trim(0)
    return True
