"""The inference worker: one thread that owns the model and runs jobs one at a time.

Jobs are plain callables `fn(cancel: threading.Event)` queued on a `queue.Queue`; each gets
its own cancel event, which the hooks check between modules (see hooks.RunCancelled), so a
cancel or `close()` takes effect within one module's forward or backward, not one run.
Results and exceptions come back through `concurrent.futures.Future`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(eq=False)  # a job is itself: `in` compares identity
class _Job:
    fn: Callable[[threading.Event], Any]
    future: Future = field(default_factory=Future)
    cancel: threading.Event = field(default_factory=threading.Event)
    tag: Any = None


_STOP = object()


class InferenceWorker:
    def __init__(self, name: str = "inference-worker") -> None:
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._lock = threading.Lock()
        self._current: _Job | None = None
        self._pending: list[_Job] = []  # queued, not started: for cancel(tag)
        self._closed = False
        self._thread.start()

    # -- API -------------------------------------------------------------------------------

    def submit(self, fn: Callable[[threading.Event], Any], tag: Any = None) -> Future:
        """Queue `fn`; it runs on the worker thread with its cancel event as argument."""
        job = _Job(fn, tag=tag)
        with self._lock:
            if self._closed:
                raise RuntimeError("the inference worker is closed")
            self._pending.append(job)
        self._queue.put(job)
        return job.future

    def cancel(self, tag: Any = None) -> None:
        """Cancel the jobs with this tag (all jobs when tag is None), running or queued."""
        with self._lock:
            for job in self._pending:
                if tag is None or job.tag == tag:
                    job.cancel.set()
            if self._current is not None and (tag is None or self._current.tag == tag):
                self._current.cancel.set()

    @property
    def native_id(self) -> int | None:
        """The OS thread id (for lowering the worker's priority below the UI's)."""
        return self._thread.native_id

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def abandon(self) -> list[_Job]:
        """Leave the job running to finish on its own (its thread stops after it), and hand
        back the jobs queued behind it, for another worker (`adopt`): a model load stuck in
        the user's code (core.run.session.Session.cancel_load)."""
        with self._lock:
            self._closed = True
            queued, self._pending = self._pending, []
        self._queue.put(_STOP)
        return queued

    def adopt(self, jobs: list[_Job]) -> None:
        """Run another worker's queued jobs here, in their order, with their futures."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the inference worker is closed")
            self._pending.extend(jobs)
        for job in jobs:
            self._queue.put(job)

    def close(self, timeout: float = 2.0) -> bool:
        """Cancel everything and stop the thread; True when it stopped within `timeout`."""
        with self._lock:
            self._closed = True
        self.cancel()
        self._queue.put(_STOP)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the thread --------------------------------------------------------------------------

    def _loop(self) -> None:
        # Grad mode is per thread: off by default here; a job turns it on when it needs it.
        torch.set_grad_enabled(False)
        while True:
            job = self._queue.get()
            if job is _STOP:
                break
            with self._lock:
                if job not in self._pending:  # handed to another worker (abandon)
                    continue
                self._pending.remove(job)
                # A job cancelled through its event still runs, so that it can report that it
                # was cancelled (a run sends RunFinished); one cancelled through its future
                # was withdrawn by the caller and is skipped.
                if not job.future.set_running_or_notify_cancel():
                    continue
                self._current = job
            try:
                result = job.fn(job.cancel)
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                job.future.set_exception(e)
            else:
                job.future.set_result(result)
            finally:
                with self._lock:
                    self._current = None
        # Whatever is still queued will never run.
        with self._lock:
            for job in self._pending:
                job.future.cancel()
            self._pending.clear()
