"""Python's cycle collector runs on the UI thread only, driven by a timer.

CPython runs a collection on whichever thread's allocation crosses the threshold. Here that
is often the inference worker or core's deferred-statistics thread: they allocate frames
and records by the thousand per run. Whatever cyclic garbage exists at that moment is freed
there, and in a Qt app that garbage holds Qt objects: closed windows, dialogs, their signal
connections (a lambda that refers to its widget is a cycle). Freeing them off the UI thread
runs Qt destructors and disconnects on a thread that does not own them, while holding the
GIL: the UI thread, calling a Python slot from Qt's event loop, waits for the GIL, and the
collecting thread waits for a lock the UI thread holds. Qt also says outright that a QObject
with timers must not be destroyed from another thread. Besides, a full collection of a large
heap holds the GIL for a long time, and on the deferred-statistics thread (nice 19) on a busy
machine that time stretches by the scheduler's weighting, with every other thread waiting.

So while the window is up, automatic collection is off and a timer on the UI thread
collects the oldest generation whose count is over CPython's own threshold (without the
interpreter's extra rule that defers full collections: gc_freeze keeps those short).
pyqtgraph (util.garbage_collector), calibre and napari's discussion of
the same problem do the same.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_INTERVAL_MS = 100


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None,
                 interval_ms: int = CHECK_INTERVAL_MS) -> None:
        super().__init__(parent)
        self._was_enabled: bool | None = None  # None: not started
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)

    def start(self) -> None:
        if self._was_enabled is None:
            self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Back to the interpreter's own collection (as it was before start)."""
        self._timer.stop()
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None

    def check(self) -> int | None:
        """Collect the oldest generation whose count is over its threshold; which one, or
        None when none is."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        for generation in (2, 1, 0):
            threshold = thresholds[generation]
            # A threshold of 0 turns automatic collection off (gc.set_threshold(0)).
            if threshold and counts[generation] > threshold:
                gc.collect(generation)
                return generation
        return None
