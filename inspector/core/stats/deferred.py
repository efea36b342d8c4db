"""Statistics on an idle core: a hook hands the live tensor over and the forward goes on.

Why: a two-thread forward leaves gaps on its cores (single-threaded ops, Python between
modules) while the statistics cost every hook a read of its output. A low-priority thread
fills those gaps. What it buys depends on how idle the cores are; bench_capture prints the
capture with and without it ("in hook" rows), and tests/benchmarks/README.md keeps the
figures. When no core is idle the thread falls behind and the hooks compute the
statistics themselves.

Correct without copies. The thread reads the live tensor, so a result is used only if,
after the computation finished and while the capturing thread is between modules (in a
later hook, or at the end of the run), the tensor's version counter is still what it was
when the hook handed it over. Every in-place op bumps the counter when it returns, and
the capturing thread runs one op at a time: an op that overlapped the read has returned,
and bumped the counter, by the time that thread runs a hook again. A result that fails the
check is never shown: its frame is dropped and counted (`Deferred.dropped`). Not seen: a
write that bypasses the counter (through `.data` or a numpy view), as autograd does not
see it either.

What a model modifies in place would fail that check: a BatchNorm's output under a
ReLU(inplace=True), a residual block's `out += identity`. So it is learned per model: the
first time a (module, call, kind, path) is seen its statistics are computed in the hook
and the tensor is watched (its version read at every later hook while it is alive, and at
the end of the run). What changed is computed in the hook from then on (the data is hot
in cache there); what did not is handed over. The memory lives as long as the model.

Back-pressure: when the thread already has `BACKLOG` tensors waiting (no idle core: a
busy machine), the hook computes the statistics itself. At the end of a run the capturing
thread computes whatever is still waiting and waits for the one in progress.

The thread runs at nice 19 on Linux, so torch's own threads take a core from it as soon as
they wake; elsewhere it runs at normal priority. Only float32 CPU tensors with a version
counter (not inference-mode tensors) go this way, and only when the fused kernel is available:
everything else is computed in the hook as before.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

import torch

from inspector.core.records.frames import TensorStats
from inspector.core.stats import tensor_stats as _stats

BACKLOG = 2  # tensors waiting for the thread before hooks compute their own statistics
IDLE_EXIT = 0.5  # seconds without work after which the thread ends (restarted on demand)

_queue: queue.SimpleQueue = queue.SimpleQueue()
_waiting = 0  # items handed over and not computed yet (the queue also holds finished ones)
_waiting_lock = threading.Lock()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()

# model -> context -> key -> True (never modified in place: hand over) / False (modified)
_memory: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_memory_lock = threading.Lock()


class _Item:
    """One tensor handed to the thread. `claim` is held by whoever computes it."""

    __slots__ = ("key", "tensor", "version", "array", "abs_mean", "make", "stats", "done", "claim")

    def __init__(self, key, tensor, version, array, abs_mean, make) -> None:
        self.key = key
        self.tensor = tensor
        self.version = version
        self.array = array
        self.abs_mean = abs_mean
        self.make = make
        self.stats: TensorStats | None = None
        self.done = False
        self.claim = threading.Lock()


def _compute(item: _Item) -> None:
    """Fill item.stats from the kernel (None: non-finite values, recount later); mark done.
    The caller holds item.claim."""
    if item.done:
        return
    _count_waiting(-1)
    try:
        item.stats = _stats.array_stats(item.array)
    except Exception:  # noqa: BLE001 - settled on the capturing thread with torch instead
        item.stats = None
    item.array = None
    item.done = True


def _count_waiting(n: int) -> None:
    global _waiting
    with _waiting_lock:
        _waiting += n


def _loop() -> None:
    # Lowest priority, nice 19, on Linux (where a thread has its own nice value; elsewhere
    # setpriority would renice the whole process). Not SCHED_IDLE, though it measured the
    # same: this thread holds the GIL for a few microseconds per tensor, and if it is
    # preempted just then, every other thread of the app waits until it runs again; on a
    # busy core the scheduler weighs a nice-19 thread at 15 and a SCHED_IDLE one at 3.
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    global _thread
    while True:
        try:
            item = _queue.get(timeout=IDLE_EXIT)
        except queue.Empty:
            # Nothing to do for a while: end, so that no thread outlives the runs that
            # needed it (an app that closes its session leaves nothing running). The check
            # and the reset are under the lock that _ensure_thread() takes after its put.
            with _thread_lock:
                if _queue.empty():
                    _thread = None
                    return
            continue
        if item.claim.acquire(blocking=False):
            try:
                _compute(item)
            finally:
                item.claim.release()


def _ensure_thread() -> None:
    """Start the thread unless it runs. Called after each put: a thread that is about to
    end sees the new item under the lock and stays."""
    global _thread
    with _thread_lock:
        if _thread is None:
            _thread = threading.Thread(target=_loop, name="deferred-stats", daemon=True)
            _thread.start()


def memory_for(model: torch.nn.Module, context: Hashable = frozenset()) -> dict:
    """What was learned about `model`'s tensors under `context` (key -> handed over?)."""
    with _memory_lock:
        return _memory.setdefault(model, {}).setdefault(context, {})


class Deferred:
    """One run's deferred statistics. Use from the capturing thread only.

    submit() in a hook: True when the statistics will come later (the frame is then sent
    by a later poll() or by finish()); False when the caller must compute them now.
    poll() at the start of every hook, finish() at the end of the run (or abandon()).
    """

    def __init__(self, memory: dict, sink: Callable[[object], None]) -> None:
        self.memory = memory
        self.sink = sink
        self.dropped = 0  # frames whose statistics failed the version check
        self._owner = threading.get_ident()
        self._pending: deque[_Item] = deque()
        self._watched: list[tuple[Any, weakref.ref, int]] = []

    def submit(
        self, key: Hashable, t: torch.Tensor, abs_mean: bool, make: Callable[[TensorStats], Any]
    ) -> bool:
        known = self.memory.get(key)
        # Inference-mode tensors have no version counter; GPU tensors are never handed over.
        if known is False or not t.is_cpu or t.is_inference():
            return False
        if threading.get_ident() != self._owner:
            return False
        if known is None:
            # First sight: computed in the hook, and watched for in-place changes.
            self._watched.append((key, weakref.ref(t), t._version))
            return False
        if _waiting >= BACKLOG:
            return False  # the thread is behind: no idle core right now
        array = _stats.fused_array(t)
        if array is None:
            return False
        item = _Item(key, t, t._version, array, abs_mean, make)
        self._pending.append(item)
        _count_waiting(1)
        _queue.put(item)
        _ensure_thread()
        return True

    def poll(self) -> None:
        """Send the frames whose statistics are done and still valid; watch for changes."""
        pending = self._pending
        while pending and pending[0].done:
            self._settle(pending.popleft())
        if self._watched:
            self._check_watched(final=False)

    def finish(self) -> None:
        """End of the run: compute what is still waiting, wait for what is in progress,
        send every valid frame, and remember what was learned."""
        pending, self._pending = self._pending, deque()
        for item in pending:
            if not item.done:
                # The thread leaves an item it cannot claim; this blocks only while the
                # thread is computing it.
                with item.claim:
                    _compute(item)
            self._settle(item)
        self._check_watched(final=True)

    def abandon(self) -> None:
        """A cancelled run: nothing more is sent, and the thread skips what is left."""
        pending, self._pending = self._pending, deque()
        for item in pending:
            if item.claim.acquire(blocking=False):
                if not item.done:
                    item.done = True
                    item.array = None
                    _count_waiting(-1)
                item.claim.release()
            item.tensor = item.make = None
        self._watched.clear()

    def _settle(self, item: _Item) -> None:
        # The queue may hold the item until the thread gets to it: let go of the tensor
        # and of the frame's arrays (previews, whole tensors for export) now.
        t, item.tensor = item.tensor, None
        make, item.make = item.make, None
        if t._version != item.version:
            # Changed in place since the hook: the result may mix old and new values.
            self.memory[item.key] = False
            self.dropped += 1
            return
        st = item.stats
        if st is None:  # NaN or inf (or a failure): torch counts them; the data is intact
            st = _stats.tensor_stats(t, abs_mean=item.abs_mean)
        self.sink(make(st))

    def _check_watched(self, final: bool) -> None:
        keep = []
        memory = self.memory
        for entry in self._watched:
            key, ref, version = entry
            t = ref()
            if t is None:
                memory.setdefault(key, True)  # freed unchanged (as far as we saw)
            elif t._version != version:
                memory[key] = False
            elif final:
                memory.setdefault(key, True)
            else:
                keep.append(entry)
        self._watched = keep

