"""Stopping a thread's Python code from another thread: a model load the user cancels.

A factory file or a pickle runs the user's code on the worker thread, and that code may never
return (a `while True:`, a wait for a server). Python has no way to kill a thread, but it can
raise an exception in one (`PyThreadState_SetAsyncExc`): the exception is raised in that
thread the next time it executes Python bytecode. So `Interruptible` marks a region of the
worker's code where such an exception is expected and handled, and `interrupt()` raises it
only while the thread is inside that region: it can never land in the worker's own loop.
Code that is stuck in C (a `time.sleep`, a blocking read) does not see it until it returns;
the Session then gives up on that thread (core.run.session.Session.cancel_load).
"""

from __future__ import annotations

import ctypes
import threading


class LoadCancelled(BaseException):
    """Raised in the worker thread when the user cancels a model load. A BaseException, as
    KeyboardInterrupt is: the user's `except Exception:` must not swallow it."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
# The exception type by address (it lives as long as its class), or None (NULL) to withdraw.
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.c_void_p)
_set_async_exc.restype = ctypes.c_int


class Interruptible:
    """`with region:` on the thread that may be stopped; `region.interrupt()` from another.

    On leaving the region an exception still pending (fired but not yet raised, because
    the code had just returned) is withdrawn and raised here instead, so that a cancel the
    caller was told about is never lost nor raised later in other code."""

    def __init__(self, exc_type: type[BaseException] = LoadCancelled) -> None:
        self.exc_type = exc_type
        self._lock = threading.Lock()
        self._thread: int | None = None  # the ident of the thread inside the region
        self.fired = False

    def __enter__(self) -> Interruptible:
        with self._lock:
            self._thread = threading.get_ident()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        with self._lock:
            thread, self._thread = self._thread, None
            pending = self.fired and exc_type is not self.exc_type
            if pending and thread is not None:
                _set_async_exc(thread, None)  # NULL: withdraw it
        if pending and exc_type is None:
            raise self.exc_type()
        return False

    def interrupt(self) -> bool:
        """Raise `exc_type` in the thread inside the region; False when none is inside."""
        with self._lock:
            if self._thread is None or self.fired:
                return False
            self.fired = _set_async_exc(self._thread, id(self.exc_type)) == 1
            return self.fired
