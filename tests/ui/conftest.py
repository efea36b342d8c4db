"""Fixtures for the widget tests: an offscreen Qt, and a check that nothing keeps running.

Every test here fails when it leaves a thread (threading.Thread or QThread) or a QTimer
running after its widgets were closed: napari's test suite does the same. A leftover worker
or timer is how a desktop app hangs on quit or crashes after a window is gone.
"""

from __future__ import annotations

import os

# Before anything imports Qt: tests never open windows on the user's screen.
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import threading  # noqa: E402
import time  # noqa: E402
import weakref  # noqa: E402

import pytest  # noqa: E402

# What the offscreen platform cannot do (size hints, raising a window): it warns each time.
OFFSCREEN_NOISE = "This plugin does not support "


def pytest_configure(config) -> None:
    # Noise that says nothing about the app (pytest-qt would fail every test that shows a
    # window or raises a dialog).
    config.addinivalue_line("qt_log_ignore", OFFSCREEN_NOISE)


@pytest.fixture(autouse=True)
def no_dangling_threads_or_timers(request, monkeypatch):
    from PySide6.QtCore import QThread, QTimer
    from PySide6.QtWidgets import QApplication

    threads_before = set(threading.enumerate())
    timers: list[weakref.ref] = []
    qthreads: list[weakref.ref] = []
    timer_start, qthread_start = QTimer.start, QThread.start

    def tracked_timer_start(self, *args):
        timers.append(weakref.ref(self))
        return timer_start(self, *args)

    def tracked_thread_start(self, *args):
        qthreads.append(weakref.ref(self))
        return qthread_start(self, *args)

    monkeypatch.setattr(QTimer, "start", tracked_timer_start)
    monkeypatch.setattr(QThread, "start", tracked_thread_start)
    yield
    import shiboken6

    app = QApplication.instance()
    if app is not None:
        app.processEvents()  # let zero-interval single-shot timers fire
    # Threads get a moment to finish: a worker told to stop exits within its close timeout.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
        if not extra:
            break
        time.sleep(0.05)
    problems = [f"thread {t.name!r} still running" for t in extra]
    for ref in qthreads:
        thread = ref()
        if thread is not None and shiboken6.isValid(thread) and thread.isRunning():
            problems.append(f"QThread {thread!r} still running")
    for ref in timers:
        timer = ref()
        if timer is not None and shiboken6.isValid(timer) and timer.isActive():
            parent = timer.parent()
            owner = type(parent).__name__ if parent is not None else "no parent"
            problems.append(f"QTimer (interval {timer.interval()} ms, in {owner}) still active")
    if problems:
        pytest.fail("left running after the test: " + "; ".join(problems), pytrace=False)


@pytest.fixture
def make_window(qtbot, tmp_path):
    """make(model, images, ...): the window every window test starts from, its views built,
    shown and started on `model` (None: the tiny model; {}: the demo model) with `images`,
    once the model is loaded (a failure to load fails the test with the window's message).

    size: resized to it first (the default-layout tests: 1440 x 900); edits: --edit specs given at start; settings: the settings file (a restart
    passes the same one); loaded=False: returns as soon as it is started."""
    from test_main_window import TIMEOUT, TINY

    from inspector.core.run.session import Session
    from inspector.ui.shell.app_settings import AppSettings
    from inspector.ui.window.main_window import MainWindow

    def make(model=None, images=(), *, size=None, edits=None, settings=None,
             loaded=True):
        window = MainWindow(AppSettings.in_file(str(settings or tmp_path / "settings.ini")))
        qtbot.addWidget(window)
        if size is not None:
            window.resize(*size)
        window.build_views()
        window.show()
        qtbot.waitExposed(window)
        window.start(list(images), dict(TINY if model is None else model), session=Session(),
                     **({} if edits is None else {"edits": list(edits)}))
        if loaded:  # loaded, or failed (then the message says why)
            qtbot.waitUntil(lambda: window.model_name != "" or window.reporter.count > 0,
                            timeout=TIMEOUT)
            assert window.model_name, window.reporter.last_message
        return window

    return make
