"""While the collector runs, Python's cycle collector works on the UI thread only."""

from __future__ import annotations

import gc
import threading
import weakref

from inspector.ui.window.gui_thread_gc import GuiThreadCollector


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_garbage_made_on_another_thread_is_collected_on_the_ui_thread(qtbot):
    assert gc.isenabled()
    collector = GuiThreadCollector(interval_ms=10)
    collecting_threads: set[str] = set()

    def watch(phase, info) -> None:
        if phase == "start":
            collecting_threads.add(threading.current_thread().name)

    probe: list[weakref.ref] = []

    def allocate() -> None:
        # Far more container objects than the youngest generation's threshold: with
        # automatic collection on, this thread would run collections itself.
        for _ in range(20 * gc.get_threshold()[0]):
            _Cycle()
        probe.append(weakref.ref(_Cycle()))

    collector.start()
    gc.callbacks.append(watch)
    try:
        assert not gc.isenabled()
        worker = threading.Thread(target=allocate, name="allocating")
        worker.start()
        worker.join()
        # The last cycle is garbage now; the timer's collections free it.
        qtbot.waitUntil(lambda: probe[0]() is None, timeout=10_000)
    finally:
        gc.callbacks.remove(watch)
        collector.stop()
    assert collecting_threads == {threading.main_thread().name}
    assert gc.isenabled()  # the autouse fixture fails the test if the timer still runs


def test_stop_leaves_collection_as_it_found_it(qtbot):
    collector = GuiThreadCollector()
    gc.disable()
    try:
        collector.start()
        collector.stop()
        assert not gc.isenabled()  # it was off before: stays off
    finally:
        gc.enable()
    collector.start()
    collector.start()  # a second start does not forget how it was before the first
    collector.stop()
    assert gc.isenabled()
