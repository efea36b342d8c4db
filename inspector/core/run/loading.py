"""A model load on the worker, as the Session runs it: one load's state (`Load`: what is
loaded, the region of the worker it may be interrupted in, the future the caller holds), and
what the user should know about the model loaded (`model_notes`).

A load can be cancelled while it runs the user's code (core.run.interrupt); one stuck in C
code is left to finish on its own thread while the Session goes on with a new worker
(core.run.session.Session.cancel_load). The caller's future is settled once, by whichever
comes first: the load's end, or a cancel that gave up on its thread.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from inspector.core.models.base import LoadedModel, ModelSpec
from inspector.core.run.interrupt import Interruptible, LoadCancelled
from inspector.core.stats import fused

# How long cancel_load waits for an interrupted load to stop before leaving its thread.
LOAD_CANCEL_WAIT_S = 1.0


class Load:
    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.region = Interruptible(LoadCancelled)
        self.job: Future | None = None  # the worker's job
        self.future: Future = Future()  # the caller's
        self.future.set_running_or_notify_cancel()
        self.abandoned = False  # its thread was left behind: its result is thrown away
        self._lock = threading.Lock()

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """Give the caller the result or the error; False when it already had one."""
        with self._lock:
            if self.future.done():
                return False
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)
            return True

    def cancelled(self, why: str = "") -> LoadCancelled:
        return LoadCancelled(f"Loading {self.spec.what()} was cancelled{why}")


def wait_done(future: Future, timeout: float) -> bool:
    """Whether the future is done within `timeout` seconds (with a result or an error)."""
    try:
        future.exception(timeout)
    except FutureTimeout:
        return False
    except BaseException:  # noqa: BLE001 - the future holds the load's failure: it is done
        return True
    return True


def model_notes(loaded: LoadedModel) -> tuple[str, ...]:
    """What the user should know about a loaded model: its own notes (random weights, a
    re-initialised head) and, on the CPU, that statistics take the slower torch path."""
    notes = list(loaded.notes)
    if loaded.device.type == "cpu" and fused.fallback_note():
        notes.append(fused.fallback_note())
    return tuple(notes)
