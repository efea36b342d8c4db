"""A thread-safe, bounded channel of frames from the worker (producer) to the UI (consumer).

Inference must never wait for painting, and memory must not grow when the UI falls behind.
So `put` never blocks. When the channel already holds `capacity` data frames, one pending
data frame is dropped to make room, chosen so that the newest frame of every
(module, call, kind, path) survives whenever there are no more such keys than `capacity`:
1. an older pending frame with the new frame's key (an older run's: the UI shows the newest);
2. else the oldest frame that a newer frame of its own key already supersedes;
3. else the oldest data frame.
Every frame lost that way is counted, per run too. Control frames (run started/finished,
errors, predictions, CAMs) are never dropped and never evicted.

A consumer that polls (the window's router, sixty times a second) can also be woken when a
run finishes (`on_finished`), so that a finished run does not wait for the next poll: a video
playing through the model runs its next frame only once the last one reached the views.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from itertools import count

from inspector.core.records.frames import RunFinished, TensorFrame


def _is_data(frame: object) -> bool:
    return isinstance(frame, TensorFrame)  # activations and gradients; the rest is control


class FrameChannel:
    def __init__(self, capacity: int = 2048) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._cond = threading.Condition()
        self._pending: OrderedDict[int, object] = OrderedDict()  # seq -> frame, arrival order
        self._key_seqs: dict[tuple, deque[int]] = {}  # pending data seqs per key, oldest first
        self._superseded: list[int] = []  # heap of seqs with a newer same-key frame (lazy)
        self._n_data = 0
        self._seq = count()
        self._dropped_total = 0
        self._dropped_by_run: defaultdict[int, int] = defaultdict(int)
        self._cancelled: set[int] = set()
        self._closed = False
        # Called with the run id, on the producer's thread, after a RunFinished was put; it
        # must only hand the news over (a consumer's thread-safe wake-up), never block.
        self.on_finished: Callable[[int], None] | None = None

    # -- producer side -------------------------------------------------------------------

    def put(self, frame: object) -> None:
        """Add a frame; never blocks."""
        run_id = getattr(frame, "run_id", None)
        with self._cond:
            if run_id in self._cancelled and not isinstance(frame, RunFinished):
                return  # frames of a cancelled run are discarded, not counted as drops
            if isinstance(frame, RunFinished):
                dropped = self._dropped_by_run.get(frame.run_id, 0)
                if dropped:  # added to what the sender counted (see Session._finish)
                    total = frame.frames_dropped + dropped
                    frame = RunFinished(**{**frame.__dict__, "frames_dropped": total})
            if _is_data(frame):
                if self._n_data >= self.capacity:
                    self._evict(self._victim(frame.key))
                self._add_data(frame)
            else:
                self._pending[next(self._seq)] = frame
            self._cond.notify_all()
        wake = self.on_finished
        if wake is not None and isinstance(frame, RunFinished):
            try:
                wake(frame.run_id)
            except Exception:  # noqa: BLE001 - a consumer gone (a deleted Qt object)
                # The run is over and its frames are in; a consumer that cannot be woken
                # any more is not told again (it still drains the channel when it polls).
                self.on_finished = None

    def _victim(self, key: tuple) -> int:
        same = self._key_seqs.get(key)
        if same:
            return same[0]
        while self._superseded:
            seq = heapq.heappop(self._superseded)
            if seq in self._pending:
                return seq
        return next(s for s, f in self._pending.items() if _is_data(f))

    def _add_data(self, frame: TensorFrame) -> None:
        seq = next(self._seq)
        seqs = self._key_seqs.setdefault(frame.key, deque())
        if seqs:
            heapq.heappush(self._superseded, seqs[-1])
        seqs.append(seq)
        self._pending[seq] = frame
        self._n_data += 1

    def _forget(self, seq: int, frame: TensorFrame) -> None:
        seqs = self._key_seqs[frame.key]
        if seqs[0] == seq:
            seqs.popleft()
        else:
            seqs.remove(seq)
        if not seqs:
            del self._key_seqs[frame.key]
        self._n_data -= 1

    def _evict(self, seq: int) -> None:
        frame = self._pending.pop(seq)
        self._forget(seq, frame)
        self._dropped_total += 1
        self._dropped_by_run[frame.run_id] += 1

    def cancel_run(self, run_id: int) -> None:
        """Discard the run's pending frames and any that arrive later (RunFinished still does)."""
        with self._cond:
            self._cancelled.add(run_id)
            for seq, frame in list(self._pending.items()):
                if getattr(frame, "run_id", None) == run_id and not isinstance(frame, RunFinished):
                    del self._pending[seq]
                    if _is_data(frame):
                        self._forget(seq, frame)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- consumer side -------------------------------------------------------------------

    def drain(self, max_frames: int | None = None) -> list:
        """Take pending frames in arrival order (all of them, or at most max_frames)."""
        with self._cond:
            out = []
            while self._pending and (max_frames is None or len(out) < max_frames):
                seq, frame = self._pending.popitem(last=False)
                if _is_data(frame):
                    self._forget(seq, frame)
                elif isinstance(frame, RunFinished):
                    # The run is over for the consumer: forget its book-keeping.
                    self._dropped_by_run.pop(frame.run_id, None)
                    self._cancelled.discard(frame.run_id)
                out.append(frame)
            if not self._pending:
                self._superseded.clear()  # all stale
            return out

    def get(self, timeout: float | None = None):
        """Take the oldest frame, waiting up to timeout seconds; None on time-out or close.

        How a script reads the frames of the runs it submits (Session.submit) without polling;
        the window drains at display rate instead."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending or self._closed, timeout):
                return None
            frames = self.drain(1)  # the condition's lock is re-entrant
        return frames[0] if frames else None

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending)

    @property
    def dropped(self) -> int:
        with self._cond:
            return self._dropped_total
