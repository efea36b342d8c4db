"""The window's side of core's Session: start the engine without freezing, load, run.

Importing torch takes seconds, so the window is shown first and the engine module is
imported on a short-lived background thread; torchvision (for the model catalog) follows on
the same thread while the first model loads on the worker. Everything else happens on the
UI thread but never runs the model: `submit` queues a run (a core RunRequest, which the
window's RunBuilder makes from its widgets) for core's worker, after cancelling the one
running; the results come back as frames through the FrameRouter.

A stream of frames (a video playing, the camera) goes through `submit_if_idle`: a frame is
run only when no run is busy, never queued (the player keeps the frame shown and drops it,
counting it in its StreamCounts, when the next one replaces it unrun), so the views follow the newest frame
the model can keep up with and no backlog builds up. A run
is busy until the router has handed it to the run store (its RunFinished was stored): ending
it when the worker finished would let the next run make its frames obsolete before the
router delivered them, so the views would show only fragments; ending it when every view
had been told (the router's stagger) would leave the worker idle (tests/benchmarks/README.md
has the figures).

While edits are on, the window also runs the unedited image once (`submit_baseline`): that
run is not the current run, so the edited run submitted right after it does not cancel it,
and the run store keeps its frames beside the current run's (RunStore.set_baseline).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QObject, Signal

from inspector.ui.run.frame_router import FrameRouter

# Importing torchvision (the catalog) holds the GIL for seconds: it waits for the first run
# to finish (or this long at most), so that it does not slow the first frames down.
CATALOG_WAIT_S = 10.0
WORKER_NICE = 5


def lower_priority(native_id: int | None, nice: int = WORKER_NICE) -> None:
    """Let the UI thread win the CPU over a thread that computes (Linux: per-thread nice).

    Measured here with the worker running images back to back on 2 busy cores: p99 lateness
    of a 16 ms UI timer 53-80 ms at equal priority, 24-30 ms with the worker at nice +5, and
    the same runs per second (the worker takes the CPU whenever the UI does not need it)."""
    if native_id is None or not sys.platform.startswith("linux"):
        return
    try:
        current = os.getpriority(os.PRIO_PROCESS, native_id)
        os.setpriority(os.PRIO_PROCESS, native_id, max(current, nice))
    except OSError:
        pass  # not allowed, or the thread is gone: run at the normal priority


def _import_engine() -> Any:
    import inspector.core.run.session as session_module

    return session_module


def _import_catalog() -> list[str]:
    from inspector.core.models.load import list_models

    return list_models()


class SessionControl(QObject):
    engineReady = Signal()  # the Session exists: model loads and runs can be asked for
    engineFailed = Signal(str, str)  # message, details: torch could not be imported
    catalogReady = Signal()
    modelLoading = Signal(str)  # what is being loaded
    modelLoadDone = Signal(bool)  # whether it worked (the ModelLoaded frame has the rest)
    modelLoadCancelled = Signal(str)  # the user cancelled a load: what was being loaded
    runSubmitted = Signal(int)
    baselineSubmitted = Signal(int)  # the unedited run that the edited runs are compared with

    def __init__(self, router: FrameRouter, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.router = router
        self.session = None
        self.catalog: list[str] | None = None
        self._catalog_go = threading.Event()
        self.model_spec = None  # the spec of the loaded model
        self._loading_spec = None
        self._import_thread: threading.Thread | None = None
        self.current_run: int | None = None
        self.running = False
        self.last_request = None  # the RunRequest of current_run
        # The run before current_run when it had finished (been stored) by the time
        # current_run was submitted: a stream submits its next frame as soon as the last
        # run is stored, before the views are told of it, so its frames still show.
        self.previous_run: int | None = None
        self.baseline_run: int | None = None  # the unedited run kept beside the edited ones
        self.baseline_running = False
        router.runFinished.connect(self._run_finished)

    # -- engine ----------------------------------------------------------------------------
    def start(self, session=None) -> None:
        """Use `session` (tests), or import the engine in the background and make one."""
        if session is not None:
            self._use_session(session)
            return
        engine: Future = Future()
        catalog: Future = Future()

        def work() -> None:
            # Normal priority (unlike the worker): the first frames wait for this import.
            for future, fn in ((engine, _import_engine), (catalog, _import_catalog)):
                if future is catalog:
                    self._catalog_go.wait(CATALOG_WAIT_S)
                try:
                    future.set_result(fn())
                except BaseException as e:  # noqa: BLE001 - reported on the UI thread
                    future.set_exception(e)
                    if future is engine:
                        catalog.set_exception(e)
                        return

        self._import_thread = threading.Thread(target=work, name="engine-import", daemon=True)
        self._import_thread.start()
        self.router.watch(engine, self._engine_imported)
        self.router.watch(catalog, self._catalog_imported)

    def _engine_imported(self, future: Future) -> None:
        try:
            session = future.result().Session()
        except Exception as e:  # noqa: BLE001
            import traceback

            self.engineFailed.emit(
                f"The engine could not start: {type(e).__name__}: {e}",
                "".join(traceback.format_exception(e)),
            )
            return
        self._use_session(session)

    def _catalog_imported(self, future: Future) -> None:
        self.catalog = future.result() if future.exception() is None else None
        self._join_import_thread()
        self.catalogReady.emit()

    def _use_session(self, session) -> None:
        self.session = session
        worker = getattr(session, "worker", None)
        native_id = getattr(worker, "native_id", None)
        if native_id is None:  # until core's worker says it publicly (see below)
            native_id = getattr(getattr(worker, "_thread", None), "native_id", None)
        lower_priority(native_id)
        self.router.set_channel(session.channel)
        self.router.start()
        self.engineReady.emit()

    @property
    def ready(self) -> bool:
        return self.session is not None

    # -- models ----------------------------------------------------------------------------
    def make_spec(self, **kwargs):
        from inspector.core.models.base import ModelSpec

        return ModelSpec(**kwargs)

    def load_model(self, spec) -> None:
        from inspector.ui.open_model.dialog import spec_label

        if self.session is None:
            raise RuntimeError("the engine is not started")
        self._loading_spec = spec
        self.modelLoading.emit(spec_label(spec))
        # The old model's runs (a Score-CAM of minutes, the unedited run, a pinned run A)
        # would hold the worker, and the load queued behind them, until they finished.
        self.session.cancel()
        future = self.session.load_model(spec)
        self.router.watch(future, self._model_loaded)

    @property
    def loading(self) -> bool:
        return self._loading_spec is not None

    def _model_loaded(self, future: Future) -> None:
        from inspector.core.run.interrupt import LoadCancelled

        spec, self._loading_spec = self._loading_spec, None
        error = None if future.cancelled() else future.exception()
        ok = not future.cancelled() and error is None
        if ok:
            self.model_spec = spec
        if isinstance(error, LoadCancelled):
            from inspector.ui.open_model.dialog import spec_label

            self.modelLoadCancelled.emit(spec_label(spec) if spec is not None else "")
        # A failure arrives as an ErrorFrame from the session (with the details); the old
        # model stays loaded and usable.
        self.modelLoadDone.emit(ok)

    def cancel_load(self) -> bool:
        """Stop the model load in progress (the loaded model stays); True when one was.
        A load stuck in C code costs up to a second here, and its thread is left behind:
        the Session's new worker thread gets the worker's lower priority."""
        if self.session is None or self._loading_spec is None:
            return False
        worker = self.session.worker
        cancelled = self.session.cancel_load()
        if self.session.worker is not worker:
            lower_priority(self.session.worker.native_id)
        return cancelled

    def model_changed(self) -> None:
        """A ModelLoaded frame arrived (it may come before the load's future is done)."""
        if self._loading_spec is not None:
            self.model_spec = self._loading_spec
        self.baseline_run, self.baseline_running = None, False  # the store forgot it too

    def model_spec_device(self) -> str | None:
        return self.model_spec.device if self.model_spec is not None else None

    @property
    def loaded(self):
        return getattr(self.session, "loaded", None)

    # -- runs ------------------------------------------------------------------------------
    def submit(self, request) -> int:
        """Cancel the run in progress and queue `request` (core.run.request.RunRequest). A baseline
        run (submit_baseline) is not cancelled: it is not the run in progress."""
        if self.session is None:
            raise RuntimeError("the engine is not started")
        finished = self.current_run is not None \
            and self.router.store.status(self.current_run) is not None
        self.previous_run = self.current_run if finished else None
        self._cancel_current()
        run_id, _future = self.session.submit_request(request)
        self.current_run, self.last_request = run_id, request
        self.running = True
        self.router.expect_run(run_id)
        self.runSubmitted.emit(run_id)
        return run_id

    def submit_baseline(self, request) -> int:
        """Queue the unedited run of the image (with keep_outputs, so that edited runs can be
        compared with it) before the edited run: it cancels the run in progress and an
        earlier baseline still running (the user moved on), and becomes the run store's
        baseline now, before any of its frames can arrive."""
        if self.session is None:
            raise RuntimeError("the engine is not started")
        self._cancel_current()
        if self.baseline_running and self.baseline_run is not None:
            self.session.cancel(self.baseline_run)
        run_id, _future = self.session.submit_request(request)
        self.baseline_run, self.baseline_running = run_id, True
        self.router.store.set_baseline(run_id)
        self.router.expect_run(run_id)
        self.baselineSubmitted.emit(run_id)
        return run_id

    def clear_baseline(self) -> None:
        """No edit is on: no unedited run to keep (one still running is cancelled)."""
        if self.baseline_running and self.baseline_run is not None and self.session is not None:
            self.session.cancel(self.baseline_run)
        self.baseline_run, self.baseline_running = None, False
        self.router.store.set_baseline(None)

    def shows(self, run_id: int | None) -> bool:
        """Whether the window shows `run_id` as its run (its model input, boxes, timing):
        the current run, or the finished one before it (see previous_run); not a run the
        user moved on from, nor the unedited baseline."""
        return run_id is not None and run_id in (self.current_run, self.previous_run)

    @property
    def busy(self) -> bool:
        """A run of ours (or the unedited run it waits for) has not reached the run store."""
        store = self.router.store
        return ((self.running and store.status(self.current_run) is None)
                or (self.baseline_running and store.status(self.baseline_run) is None))

    def submit_if_idle(self, submit: Callable[[], Any]) -> bool:
        """A frame of a stream: `submit()` it (the RunBuilder's run of that frame) when no run
        is busy. Whether it was submitted."""
        if self.busy:
            return False
        submit()
        return True

    def _cancel_current(self) -> None:
        # Run A (pinned) is what the next runs are compared with: the user moving on to run B
        # must not cancel it (cancel() still does, when asked).
        if (self.running and self.current_run is not None
                and self.current_run != self.router.store.pinned_run):
            self.session.cancel(self.current_run)

    def cancel(self) -> None:
        """Cancel the model load in progress, or else the run in progress and the unedited
        run it waits for."""
        if self.session is None or self.cancel_load():
            return
        if self.running:
            self.session.cancel(self.current_run)
        if self.baseline_running:
            self.session.cancel(self.baseline_run)

    def stop_scoring(self, run_id: int | None) -> bool:
        """Stop the faithfulness metrics of `run_id`, not the run (Session.stop_scoring)."""
        if self.session is None or run_id is None:
            return False
        return self.session.stop_scoring(run_id)

    def _run_finished(self, frame) -> None:
        self._catalog_go.set()
        if frame.run_id == self.current_run:
            self.running = False
        if frame.run_id == self.baseline_run:
            self.baseline_running = False

    # -- shutting down -----------------------------------------------------------------------
    def close(self, wait: float = 2.0) -> bool:
        """Stop everything this object started, waiting up to `wait` seconds for each thread;
        True when all have stopped. A model load or the import of torch cannot be interrupted:
        `close` may be called again with a longer wait (the app does, after hiding its window)."""
        self.router.stop()
        self._catalog_go.set()
        if self.session is not None:
            self.session.close(timeout=wait)
        self._join_import_thread(timeout=wait)
        return not self.threads_alive()

    def threads_alive(self) -> list[str]:
        alive = []
        if self.session is not None and self.session.worker.is_alive():
            alive.append("inference worker")
        if self._import_thread is not None and self._import_thread.is_alive():
            alive.append("engine import")
        return alive

    def _join_import_thread(self, timeout: float = 0.0) -> None:
        thread = self._import_thread
        if thread is not None:
            thread.join(timeout)
            if not thread.is_alive():
                self._import_thread = None
