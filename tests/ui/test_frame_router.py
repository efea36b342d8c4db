"""The frame router on its own, fed by a fake channel: order, stale and skipped runs, a
broken subscriber, staggering, errors. The window with the real engine is in
test_main_window.py."""

from __future__ import annotations

from concurrent.futures import Future

from view_frames import FakeChannel, act

from inspector.core.records.frames import ErrorFrame, RunFinished, RunStarted

# -- frame router -------------------------------------------------------------------------------


def watch(router, seen: list):
    """Subscribe to everything in the router's store, as a view does: `seen` gets the frames,
    the RunStarted and RunFinished frames, and "cleared", in the order the store told them."""
    return router.store.subscribe(seen.append, on_run=seen.append,
                                  on_clear=lambda: seen.append("cleared"))


def test_router_routes_in_order_skips_stale_runs_and_survives_a_broken_view(qtbot):
    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter(max_frames=2, batch_s=0.0, min_interval_s=0.0)
    channel = FakeChannel(dropped=3)
    router.set_channel(channel)
    seen, failures, finished = [], [], []
    watch(router, seen)

    def broken(frame):
        raise ValueError("a view bug")

    router.store.subscribe(broken, on_run=broken)
    router.listenerFailed.connect(lambda message, details: failures.append(message))
    router.runFinished.connect(finished.append)
    router.expect_run(2)
    channel.pending = [act(1, "a", [1.0]), RunStarted(2, "x", "m", "cpu"),
                       act(2, "a", [1.0]), RunFinished(2, "ok")]
    router.tick()
    assert [type(f).__name__ for f in seen] == ["RunStarted"]  # the run-1 frame is stale
    router.tick()
    assert [type(f).__name__ for f in seen] == ["RunStarted", "ActivationFrame", "RunFinished"]
    assert finished and finished[0].run_id == 2
    assert len(failures) == 1 and "a view bug" in failures[0]  # reported once, not per frame
    assert router.frames_shown == 1 and router.frames_dropped == 3 + 1  # channel + skipped
    future: Future = Future()
    done = []
    router.watch(future, done.append)
    router.tick()
    assert done == []
    future.set_result(7)
    router.tick()
    assert done == [future]
    router.stop()


def test_router_shows_only_the_newest_of_several_runs_in_a_batch(qtbot):
    from inspector.core.records.frames import Prediction, PredictionFrame
    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter(min_interval_s=3600.0)  # deliver when told to, or when urgent
    channel = FakeChannel(dropped=3)
    router.set_channel(channel)
    seen, finished, errors = [], [], []
    watch(router, seen)
    router.runFinished.connect(finished.append)
    router.errorFrame.connect(errors.append)

    def run(run_id, status="ok"):
        return [RunStarted(run_id, "x", "m", "cpu"), act(run_id, "a", [1.0]),
                PredictionFrame(run_id, (Prediction(0, "c", 1.0, 2.0),), 0),
                RunFinished(run_id, status)]

    channel.pending = run(2)
    router.tick()  # the first run goes at once, when it is finished
    assert [f.run_id for f in seen] == [2, 2, 2, 2]
    seen.clear()
    finished.clear()
    channel.pending = run(3) + run(4)
    router.tick()
    assert seen == []  # held: the views were given a run a moment ago
    router.deliver()
    assert [(type(f).__name__, f.run_id) for f in seen] == [
        ("RunStarted", 4), ("ActivationFrame", 4), ("PredictionFrame", 4), ("RunFinished", 4)]
    assert [f.run_id for f in finished] == [3, 4]  # every run still counts
    assert router.frames_dropped == 3 + 4  # the channel's, and run 3's
    # An error is never held back or skipped, even one of a run that a newer one replaced.
    seen.clear()
    channel.pending = run(5) + [ErrorFrame(5, "a hook failed")] + run(6)
    router.tick()
    assert [f.run_id for f in errors] == [5]
    assert [(type(f).__name__, f.run_id) for f in seen] == [
        ("RunStarted", 6), ("ActivationFrame", 6), ("PredictionFrame", 6), ("RunFinished", 6)]
    router.stop()


def test_a_staggered_router_hands_a_batch_to_one_view_per_tick(qtbot):
    from inspector.core.records.frames import ModelLoaded
    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter(batch_s=0.0, min_interval_s=0.0, stagger=True)
    channel = FakeChannel(dropped=3)
    router.set_channel(channel)
    views = [[], [], []]
    for seen in views:
        watch(router, seen)
    finished, started = [], []
    router.runFinished.connect(finished.append)
    router.runStarted.connect(started.append)

    def run(run_id):
        return [RunStarted(run_id, "x", "m", "cpu"), act(run_id, "a", [1.0]),
                RunFinished(run_id, "ok")]

    channel.pending = run(1)
    router.tick()
    kinds = ["RunStarted", "ActivationFrame", "RunFinished"]
    assert [type(f).__name__ for f in views[0]] == kinds
    assert views[1] == [] and views[2] == []
    assert [f.run_id for f in started] == [1] and finished == []  # not before every view saw it
    assert router.frames_shown == 1
    router.tick()
    assert [type(f).__name__ for f in views[1]] == kinds and views[2] == [] and finished == []
    router.tick()
    assert [type(f).__name__ for f in views[2]] == kinds
    assert [f.run_id for f in finished] == [1]
    # A new batch while one is still being handed out: the old one is finished first, so
    # every view sees the runs in order.
    channel.pending = run(2)
    router.tick()
    channel.pending = run(3)
    router.tick()
    for seen in views:
        assert [f.run_id for f in seen if isinstance(f, RunStarted)][:2] == [1, 2]
    assert [f.run_id for f in finished] == [1, 2]
    # A model load is never staggered: every view gets it in the same tick.
    for seen in views:
        seen.clear()
    router.tick()
    router.tick()  # run 3 done
    for seen in views:
        seen.clear()
    channel.pending = [ModelLoaded("m", "d", False, "cpu", None)]
    router.tick()
    assert all(seen == ["cleared"] for seen in views)
    router.stop()



def test_router_emits_error_frames(qtbot):
    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter()
    channel = FakeChannel(dropped=3)
    router.set_channel(channel)
    channel.pending = [ErrorFrame(None, "Could not load x", "details")]
    with qtbot.waitSignal(router.errorFrame) as signal:
        router.tick()
    assert signal.args[0].message == "Could not load x"


def test_a_finished_run_wakes_the_router_and_is_stored_before_the_views_are_told(qtbot):
    import threading

    from view_frames import act

    from inspector.core.run.channel import FrameChannel
    from inspector.ui.run.frame_router import FrameRouter

    # A tick a minute apart: only the channel's wake-up can deliver within the test.
    router = FrameRouter(interval_ms=60_000, batch_s=0.0, min_interval_s=0.0, stagger=True)
    channel = FrameChannel()
    router.set_channel(channel)
    told = []
    for view in ("first", "second"):  # two views: the stagger applies
        router.store.subscribe(lambda f, v=view: told.append(v),
                               on_run=lambda f, v=view: told.append(v))
    router.runStored.connect(lambda run_id: told.append(f"stored {run_id}"))
    router.start()
    router.expect_run(1)

    def worker() -> None:
        channel.put(RunStarted(1, "x", "m", "cpu"))
        channel.put(act(1, "a", [1.0]))
        channel.put(RunFinished(1, "ok"))

    thread = threading.Thread(target=worker)
    with qtbot.waitSignal(router.runStored, timeout=5000):
        thread.start()
    thread.join()
    assert router.store.status(1) == "ok"
    # The run is stored (a stream may submit its next frame) before any view hears of it.
    assert told[0] == "stored 1" and "first" in told
    router.stop()
    assert channel.on_finished is None  # the worker may outlive the router
