"""The UI thread's end of the frame channel: a QTimer drains it at display rate, puts the
frames in the run store, and hands the store's notifications to the tree and the views (its
subscribers).

The worker never waits for the UI: it puts frames on the core's bounded channel and goes
on. Here, on the UI thread, a timer takes what is pending sixty times a second (at most
`max_frames` a tick, so a burst cannot freeze the window; if the UI falls further behind,
the channel keeps the newest frame per tensor and counts the others).

Frames of runs older than the newest are stale and skipped, except those of the runs the
store keeps for comparisons (run A, and the unedited run beside an edited one).

What is taken is handed to the views in batches: a finished run at once, a run still
arriving every `batch_s` (layers appear as the passes reach them), but not more often than
every `min_interval_s`. A batch that holds several runs (a small model runs ten or more
images a second) shows only the newest: painting every run cost the UI thread a third of
a core here, slowed the worker on a 2-core machine, and showed nothing anyone could
follow. Errors and a newly loaded model are never held back or skipped. `runFinished` still
tells of every run.

With `stagger`, a batch is stored at once but its notifications reach the subscribers one
subscriber per tick (16 ms apart) instead of all in one go. Qt paints what changed at the
end of each event-loop turn, so every view updating at once meant one long turn, which set
the window's worst timer lateness (bench_ui). One view per turn keeps each turn to that
view's share. Each
subscriber is still told of every frame of the batch it wants, in order; the run's
`runFinished` is emitted after the last one was told.

A run that finishes wakes the router at once (the channel's `on_finished`, a queued signal
from the worker's thread): it is taken and delivered, if due, without waiting for the next
tick, so the next frame of a video can run (and show) up to a tick sooner.

The same timer polls `concurrent.futures.Future`s (a model load, the background import of
torch) so that their results are handled on the UI thread without cross-thread signals.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from inspector.core.records.frames import (
    ErrorFrame,
    ModelLoaded,
    ProgressFrame,
    RunFinished,
    RunStarted,
)
from inspector.core.run.store import RunStore
from inspector.core.run.subscriptions import Subscription

DISPLAY_INTERVAL_MS = 16
MAX_FRAMES_PER_TICK = 400
DATA_BATCH_S = 0.08
MIN_DELIVERY_INTERVAL_S = 0.2


class FrameRouter(QObject):
    modelLoaded = Signal(object)  # ModelLoaded
    runStarted = Signal(object)  # RunStarted (of the runs the views are shown)
    runFinished = Signal(object)  # RunFinished: every run, after the views saw its frames
    # The run id of a RunFinished put in the store, once its batch is stored and before the
    # views are told of it (which the stagger spreads over ticks): the run is done as far as
    # the views are concerned, and a stream may submit its next frame, which then runs while
    # the views paint this one.
    runStored = Signal(int)
    _finished = Signal(int)  # from the worker's thread (the channel's on_finished): queued
    errorFrame = Signal(object)  # ErrorFrame
    progress = Signal(object)  # ProgressFrame (of the runs the views are shown)
    listenerFailed = Signal(str, str)  # message, traceback: a view raised on a notification

    def __init__(
        self,
        parent: QObject | None = None,
        interval_ms: int = DISPLAY_INTERVAL_MS,
        max_frames: int = MAX_FRAMES_PER_TICK,
        batch_s: float = DATA_BATCH_S,
        min_interval_s: float = MIN_DELIVERY_INTERVAL_S,
        stagger: bool = False,
    ) -> None:
        super().__init__(parent)
        self.stagger = stagger
        self._staggered: list = []  # the batch being handed out, one subscriber per tick
        self._stagger_next: list[Subscription] = []  # the subscribers still to be told
        self._channel = None
        self._flushers: list[Callable[[], None]] = []
        self._futures: list[tuple[Future, Callable[[Future], None]]] = []
        self._min_run_id = 0  # data frames of older runs are stale: skip them
        # Every frame shown goes here; the tree and the views subscribe to what they show.
        # The router delivers the store's notifications itself (see deliver).
        self.store = RunStore()
        self.store.deferred = True
        self.store.on_error = self._listener_failed
        self.max_frames = max_frames
        self.batch_s = batch_s
        self._held: list = []  # drained, not yet handed on (see tick)
        self._stored: list[int] = []  # runs whose RunFinished was stored: runStored to emit
        self._held_since: float | None = None
        self._last_delivery = float("-inf")
        self.min_interval_s = min_interval_s
        # What the status bar shows: data frames handed to the views, and (with the
        # channel's drops) those never shown (frames_dropped).
        self.frames_shown = 0
        self.frames_skipped = 0  # of runs a newer run made obsolete before display
        self._failed: set[tuple[int, str]] = set()  # (listener, error type) already reported
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.tick)
        self._finished.connect(self._woken, Qt.ConnectionType.QueuedConnection)

    # -- set-up ------------------------------------------------------------------------------
    def set_channel(self, channel) -> None:
        if self._channel is not None:
            self._channel.on_finished = None
        self._channel = channel
        channel.on_finished = self._finished.emit

    def add_flush(self, flush: Callable[[], None]) -> None:
        """Called after each tick: for subscribers that batch their updates (the tree emits
        a few dataChanged a second, not one per frame). Must be cheap when idle."""
        self._flushers.append(flush)

    def watch(self, future: Future, callback: Callable[[Future], None]) -> None:
        """Call `callback(future)` on the UI thread once the future is done."""
        self._futures.append((future, callback))
        self.start()

    def expect_run(self, run_id: int) -> None:
        """Frames of runs before this one are stale (the user moved on)."""
        self._min_run_id = max(self._min_run_id, run_id)

    def start(self) -> None:
        if self._channel is not None:
            self._channel.on_finished = self._finished.emit  # stop() took it away
        if not self._timer.isActive():
            self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self._channel is not None:
            self._channel.on_finished = None  # the worker may outlive this object
        self._held, self._held_since = [], None
        self._staggered, self._stagger_next = [], []

    @property
    def frames_dropped(self) -> int:
        """Frames never shown: dropped by the channel, or of runs skipped for a newer one."""
        channel = int(getattr(self._channel, "dropped", 0)) if self._channel is not None else 0
        return channel + self.frames_skipped

    # -- the tick ----------------------------------------------------------------------------
    def tick(self) -> None:
        if self._stagger_next:
            self._stagger_step()
        if self._futures:
            self._poll_futures()
        self._take()
        for flush in self._flushers:
            flush()

    def _woken(self, _run_id: int) -> None:
        """A run finished (the channel said so): take it now rather than at the next tick."""
        if self._timer.isActive():
            self._take()
            for flush in self._flushers:
                flush()

    def _take(self) -> None:
        if self._channel is None:
            return
        frames = self._channel.drain(self.max_frames)
        if frames:
            self._held.extend(frames)
            if self._held_since is None:
                self._held_since = time.monotonic()
        if self._held and self._due(frames):
            self.deliver()

    def _due(self, new_frames: list) -> bool:
        if any(isinstance(f, (ModelLoaded, ErrorFrame)) for f in new_frames):
            return True  # never held back
        now = time.monotonic()
        if now - self._last_delivery < self.min_interval_s:
            return False  # the views were just given a run: at most ~5 a second
        # A finished run goes at once (a single dropped image shows without delay); a run
        # still arriving goes every `batch_s` (layers appear as the passes reach them).
        finished = any(isinstance(f, RunFinished) for f in self._held)
        return finished or now - self._held_since >= self.batch_s

    def deliver(self) -> None:
        """Hand the held frames on, in order, without those of runs a newer run replaced."""
        held, self._held, self._held_since = self._held, [], None
        self._last_delivery = time.monotonic()
        self._stagger_finish()  # the previous batch first: every view sees frames in order
        newest = max((f.run_id for f in held if isinstance(f, RunStarted)), default=None)
        shown = []
        for frame in held:
            run_id = getattr(frame, "run_id", None)
            obsolete = (
                newest is not None
                and run_id is not None
                and run_id < newest
                and not isinstance(frame, ErrorFrame)
                and not self._kept(run_id)
            )
            if obsolete:
                self.frames_skipped += 1
                if isinstance(frame, RunFinished):
                    self.runFinished.emit(frame)  # listeners count runs, shown or not
                continue
            shown.append(frame)
        urgent = any(isinstance(f, (ModelLoaded, ErrorFrame)) for f in shown)
        if not self.stagger or urgent or len(self.store.subscriptions) < 2:
            for frame in shown:
                self.route(frame)
            return
        self._staggered = [f for f in shown if self._announce(f)]
        self._stagger_next = [s for s in self.store.subscriptions if s.pending]
        self._emit_stored()
        self._stagger_step()

    def _stagger_step(self) -> None:
        if self._stagger_next:
            self.store.notify([self._stagger_next.pop(0)])
        if not self._stagger_next:
            batch, self._staggered = self._staggered, []
            for frame in batch:
                if isinstance(frame, RunFinished):
                    self.runFinished.emit(frame)

    def _stagger_finish(self) -> None:
        while self._stagger_next:
            self._stagger_step()

    def route(self, frame) -> None:
        """Store one frame and tell every subscriber now."""
        if not self._announce(frame):
            return
        self._emit_stored()
        self.store.notify()
        # Emitted after the views saw the run's last frames, so listeners see a complete run.
        if isinstance(frame, RunFinished):
            self.runFinished.emit(frame)

    def _announce(self, frame) -> bool:
        """The signals and counters of a frame about to be shown; False: a stale frame."""
        run_id = getattr(frame, "run_id", None)
        control = isinstance(frame, (RunStarted, RunFinished, ErrorFrame, ModelLoaded))
        if (not control and run_id is not None and run_id < self._min_run_id
                and not self._kept(run_id)):
            return False
        if isinstance(frame, ProgressFrame):
            self.progress.emit(frame)
            return False  # for the status bar only: not a frame the views show
        self.store.put(frame)
        if isinstance(frame, RunFinished):
            self._stored.append(run_id)
        if isinstance(frame, ModelLoaded):
            self.modelLoaded.emit(frame)
        elif isinstance(frame, RunStarted):
            self.runStarted.emit(frame)
        elif isinstance(frame, ErrorFrame):
            self.errorFrame.emit(frame)
        if not control:
            self.frames_shown += 1
        return True

    def _emit_stored(self) -> None:
        stored, self._stored = self._stored, []
        for run_id in stored:
            self.runStored.emit(run_id)

    def _kept(self, run_id: int) -> bool:
        """Run A and the unedited run of an edited one are wanted whatever runs after them
        (the window submits the unedited run just before or after the edited one)."""
        return run_id in (self.store.baseline_run, self.store.pinned_run)

    def _listener_failed(self, listener: Callable, error: Exception) -> None:
        """A view raised on a notification: say so once per view and error type; the other
        views and the app go on."""
        key = (id(getattr(listener, "__self__", listener)), type(error).__name__)
        if key not in self._failed:
            self._failed.add(key)
            name = getattr(listener, "__qualname__", repr(listener))
            self.listenerFailed.emit(f"{name} failed: {type(error).__name__}: {error}",
                                     traceback.format_exc())

    def _poll_futures(self) -> None:
        done = [(f, cb) for f, cb in self._futures if f.done()]
        if not done:
            return
        self._futures = [(f, cb) for f, cb in self._futures if not f.done()]
        for future, callback in done:
            callback(future)
