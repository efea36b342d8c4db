"""The run store: latest frame per key, run ids, forward order, subscriptions. No Qt."""

from __future__ import annotations

import numpy as np

from inspector.core.records.frames import (
    ActivationFrame,
    CamFrame,
    DivergenceFrame,
    GradientFrame,
    ModelLoaded,
    Prediction,
    PredictionFrame,
    RunFinished,
    RunStarted,
    TensorStats,
)
from inspector.core.records.kinds import GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.store import RunStore, key_of


def stats(value: float) -> TensorStats:
    one = np.array([value])
    return TensorStats(value, 0.0, value, value, 0.0, 1, one, one, one, one, one)


def act(run, module, value=1.0, kind=OUTPUT, call=0):
    return ActivationFrame(run, module, call, kind, "", (1, 1), "float32", stats(value))


def grad(run, module, value=1.0):
    return GradientFrame(run, module, 0, GRAD_OUTPUT, "", (1, 1), "float32", stats(value))


def test_the_latest_frame_per_key_and_per_run():
    store = RunStore()
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.put(act(1, "conv", 1.0))
    store.put(act(1, "conv", 2.0))  # the same key again: the newer frame wins
    store.put(act(1, "conv", 5.0, kind=INPUT))
    assert store.get(("tensor", "conv", OUTPUT, 0, "")).stats.mean == 2.0
    assert set(store.tensors("conv", (OUTPUT,), 1)) == {(OUTPUT, 0, "")}
    assert set(store.tensors("conv", (OUTPUT, INPUT), 1)) == {(OUTPUT, 0, ""), (INPUT, 0, "")}
    assert store.tensors("fc", (OUTPUT,), 1) == {}
    assert key_of(RunStarted(1, "", "", "")) is None


def test_runs_switch_and_older_runs_stay_until_there_are_too_many():
    store = RunStore(keep_runs=2)
    for run in (1, 2, 3):
        store.put(RunStarted(run, f"{run}.png", "m", "cpu"))
        store.put(act(run, "conv", float(run)))
        store.put(RunFinished(run, "ok" if run != 2 else "error"))
    assert store.current_run == 3
    assert store.runs() == [2, 3]  # run 1 dropped
    assert store.get(("tensor", "conv", OUTPUT, 0, "")).stats.mean == 3.0
    assert store.get(("tensor", "conv", OUTPUT, 0, ""), run_id=2).stats.mean == 2.0
    assert store.status(2) == "error" and store.status(3) == "ok"
    assert store.latest_run((OUTPUT,)) == 3 and store.latest_run((GRAD_OUTPUT,)) is None


def test_a_pinned_run_stays_and_a_new_model_clears_everything():
    store = RunStore(keep_runs=1)
    store.put(act(1, "conv", 1.0))
    store.pin(1)
    for run in (2, 3, 4):
        store.put(act(run, "conv", float(run)))
        store.put(RunFinished(run, "ok"))  # until then the run before has conv's newest
    assert store.runs() == [1, 4] and store.pinned_run == 1
    store.put(ModelLoaded("m", "", False, "cpu", None))
    assert store.runs() == [] and store.current_run is None and store.pinned_run is None


def test_a_subscription_gets_only_the_keys_it_asked_for():
    store = RunStore()
    conv_outputs, gradients, cams, everything = [], [], [], []
    sub = store.subscribe(conv_outputs.append, kinds=(OUTPUT,), modules={"conv"})
    store.subscribe(gradients.append, kinds=(GRAD_OUTPUT,))
    store.subscribe(cams.append, kinds=("cam",))
    store.subscribe(everything.append)
    frames = [act(1, "conv"), act(1, "fc"), act(1, "conv", kind=INPUT), grad(1, "conv"),
              grad(1, "fc"), CamFrame(1, "gradcam", "conv", 0, np.zeros((2, 2), np.float32)),
              PredictionFrame(1, (), None), RunFinished(1, "ok")]
    for f in frames:
        store.put(f)
    assert conv_outputs == [frames[0]]
    assert gradients == [frames[3], frames[4]]
    assert cams == [frames[5]]
    assert everything == frames[:7]  # control frames are not data: nobody gets them
    sub.modules = {"fc"}  # the view now shows another module
    store.put(act(2, "conv"))
    store.put(act(2, "fc"))
    assert [f.module for f in conv_outputs] == ["conv", "fc"]
    store.unsubscribe(sub)
    store.put(act(3, "fc"))
    assert len(conv_outputs) == 2


def test_forward_order_is_the_order_of_first_activations():
    store = RunStore()
    store.put(RunStarted(1, "", "m", "cpu"))
    for module in ("", "conv", "relu", "conv", "fc"):
        store.put(act(1, module, kind=INPUT))
    store.put(grad(1, "fc"))  # gradients arrive backwards: they do not change the order
    store.put(grad(1, "late"))
    assert store.forward_order() == {"": 0, "conv": 1, "relu": 2, "fc": 3}
    assert list(store.of_kind((GRAD_OUTPUT,), 1)) == [
        ("tensor", "fc", GRAD_OUTPUT, 0, ""), ("tensor", "late", GRAD_OUTPUT, 0, "")]


def test_a_failed_run_is_shown_unless_it_produced_the_kinds_in_question():
    store = RunStore()
    for f in (RunStarted(1, "a.png", "m", "cpu"), act(1, "conv"), grad(1, "conv"),
              RunFinished(1, "ok"), RunStarted(2, "b.png", "m", "cpu"), act(2, "conv", 2.0)):
        store.put(f)
    assert store.running and store.shown_run((OUTPUT,)) == 2
    assert store.shown_run((GRAD_OUTPUT,)) == 1  # kept until run 2 has gradients
    store.put(RunFinished(2, "error"))  # failed after its forward, before the backward
    assert not store.running and store.last_finished() == 2
    assert store.shown_run((OUTPUT,)) == 2 and store.failed((OUTPUT,))
    assert store.shown_run((GRAD_OUTPUT,)) == 2  # not run 1's: that was another image
    assert store.tensors("conv", (GRAD_OUTPUT,), store.shown_run((GRAD_OUTPUT,))) == {}
    store.put(RunStarted(3, "a.png", "m", "cpu"))
    store.put(grad(3, "conv"))
    assert store.shown_run((GRAD_OUTPUT,)) == 3 and not store.failed((GRAD_OUTPUT,))
    assert store.started(3).label == "a.png" and store.status(3) is None


def test_late_frames_of_an_older_run_are_dropped_and_nobody_is_told():
    store = RunStore()
    told = []
    store.subscribe(told.append)
    store.put(act(2, "conv", 2.0))
    store.put(act(1, "conv", 1.0))  # from a run the user moved away from
    assert told == [act(2, "conv", 2.0)]
    assert store.runs() == [2] and store.latest_tensor("conv", OUTPUT).stats.mean == 2.0


def test_deferred_notifications_wait_and_arrive_in_order_per_subscriber():
    store = RunStore()
    store.deferred = True
    a, b = [], []
    sub_a = store.subscribe(a.append, kinds=(OUTPUT,), on_run=a.append,
                            on_clear=lambda: a.append("cleared"))
    store.subscribe(b.append, kinds=(GRAD_OUTPUT,))
    frames = [RunStarted(1, "", "m", "cpu"), act(1, "conv"), grad(1, "conv"), RunFinished(1, "ok")]
    for f in frames:
        store.put(f)
    assert a == b == [] and store.get(("tensor", "conv", OUTPUT, 0, "")) is not None
    store.notify([sub_a])
    assert a == [frames[0], frames[1], frames[3]] and b == []
    store.notify()
    assert b == [frames[2]]
    store.put(ModelLoaded("m", "", False, "cpu", None))
    store.notify()
    assert a[-1] == "cleared" and len(b) == 1  # b asked for no clearing


def test_a_subscriber_that_raises_is_reported_and_the_others_are_still_told():
    store = RunStore()
    reported, told = [], []

    def broken(frame):
        raise ValueError("a view bug")

    store.on_error = lambda listener, error: reported.append((listener, str(error)))
    store.subscribe(broken)
    store.subscribe(told.append)
    store.put(act(1, "conv"))
    assert reported == [(broken, "a view bug")] and len(told) == 1


def test_a_subscription_does_not_keep_its_view_alive():
    import gc

    class View:
        def __init__(self, store):
            self.seen = []
            store.subscribe(self.frame_stored)

        def frame_stored(self, frame):
            self.seen.append(frame)

    store = RunStore()
    view = View(store)
    store.put(act(1, "conv"))
    assert len(view.seen) == 1
    del view
    gc.collect()
    store.put(act(1, "fc"))  # the view is gone: its subscription ends
    assert store.subscriptions == []


# -- comparisons: the unedited run (baseline) and run A -----------------------------------------


def edited_start(run, edits=("zero conv[3]",)):
    return RunStarted(run, "a.png", "m", "cpu", edits=edits)


def preds(run, prob):
    return PredictionFrame(run, (Prediction(7, "seven", prob, 0.0),), 7)


def test_the_unedited_run_is_kept_beside_the_edited_one_in_either_order():
    for baseline, edited in ((5, 6), (6, 5)):  # submitted before, or after, the edited run
        store = RunStore()
        store.set_baseline(baseline)
        frames = {baseline: [RunStarted(baseline, "a.png", "m", "cpu"), act(baseline, "conv", 1.0),
                             preds(baseline, 0.9), RunFinished(baseline, "ok")],
                  edited: [edited_start(edited), act(edited, "conv", 0.5), preds(edited, 0.4),
                           RunFinished(edited, "ok")]}
        # Interleaved as the channel may deliver them: neither run's frames are late.
        for pair in zip(frames[5], frames[6], strict=True):
            for f in pair:
                store.put(f)
        assert store.current_run == edited, (baseline, edited)
        assert store.get(("predictions",), baseline).top[0].prob == 0.9
        assert store.get(("tensor", "conv", OUTPUT, 0, ""), baseline).stats.mean == 1.0
        # Views show the edited run, never the unedited one, even when it is newer.
        assert store.shown_run(("predictions",)) == edited
        assert store.latest_run((OUTPUT,)) == edited and store.last_finished() == edited
        assert store.latest_tensor("conv", OUTPUT).stats.mean == 0.5
        assert store.edited() and not store.edited(baseline)
        assert store.reference_run == baseline
        assert store.reference_names() == ("before", "after")


def test_the_reference_is_run_a_when_pinned_else_the_baseline_only_for_an_edited_run():
    store = RunStore()
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.set_baseline(1)
    assert store.reference_run is None  # the current run is the unedited one itself
    store.put(RunStarted(2, "a.png", "m", "cpu"))  # not edited: nothing to compare
    assert store.reference_run is None and store.reference_names() is None
    store.put(edited_start(3))
    assert store.reference_run == 1
    store.pin(4)  # submitted, nothing of it arrived yet: not a reference yet
    assert store.reference_run == 1
    store.put(edited_start(4))  # run A is current: it is not compared with itself
    assert store.current_run == 4 and store.reference_run == 1
    store.put(RunStarted(5, "b.png", "m", "cpu"))  # run B, another image, no edits
    assert store.reference_run == 4 and store.reference_names() == ("A", "B")
    store.pin(None)
    assert store.reference_run is None  # B is not edited: no before/after either


def test_late_frames_of_run_a_are_kept_but_do_not_make_it_current():
    store = RunStore()
    store.pin(1)
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.put(RunStarted(2, "b.png", "m", "cpu"))
    store.put(preds(1, 0.3))  # A's last frame, after B started
    store.put(preds(0, 0.3))  # an older run's: late, dropped
    assert store.current_run == 2 and store.get(("predictions",), 1) is not None
    assert 0 not in store.runs() and store.shown_run(("predictions",)) == 1


def test_the_baseline_and_run_a_survive_eviction_and_a_new_model_forgets_both():
    store = RunStore(keep_runs=2)
    store.set_baseline(1)
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.pin(2)
    store.put(edited_start(2))
    for run in range(3, 9):
        store.put(edited_start(run))
        store.put(act(run, "conv"))
    assert store.runs() == [1, 2, 7, 8]
    assert store.reference_run == 2
    store.pin(None)
    store.put(edited_start(9))  # unpinned: run 2 is an ordinary old run now
    assert store.runs() == [1, 8, 9] and store.reference_run == 1
    store.put(ModelLoaded("m", "", False, "cpu", None))
    assert store.runs() == [] and store.baseline_run is None and store.pinned_run is None
    assert store.reference_run is None


def test_divergence_frames_are_stored_under_their_key():
    store = RunStore()
    told = []
    store.subscribe(told.append, kinds=("divergence",))
    frame = DivergenceFrame(3, 2, ("conv", "fc"), np.array([0.0, 0.5]), np.array([1.0, 0.9]))
    store.put(frame)
    assert key_of(frame) == ("divergence",) and store.get(("divergence",)) is frame
    assert told == [frame]


def test_run_a_stays_over_other_weights_of_the_same_modules_as_a_reference_only():
    from types import SimpleNamespace

    def loaded(*modules):
        tree = SimpleNamespace(modules={m: SimpleNamespace(type_name="Conv2d") for m in modules})
        return ModelLoaded("m", "", True, "cpu", tree)

    store = RunStore()
    store.put(loaded("", "conv"))
    store.pin(1)
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.put(preds(1, 0.9))
    store.put(RunStarted(2, "b.png", "m", "cpu"))
    store.put(loaded("", "conv"))  # another weights file for the same model
    assert store.runs() == [1] and store.pinned_run == 1 and store.current_run is None
    assert store.shown_run(("predictions",)) is None  # A is not a run of these weights
    store.put(preds(1, 0.8))  # a late frame of A: kept, still not shown
    assert store.current_run is None and store.get(("predictions",), 1).top[0].prob == 0.8
    store.put(RunStarted(3, "a.png", "m", "cpu"))
    store.put(preds(3, 0.4))
    assert store.reference_run == 1 and store.reference_names() == ("A", "B")
    assert store.shown_run(("predictions",)) == 3
    store.pin(3)  # a new A: the old one, of the other weights, is of no use any more
    assert store.runs() == [3] and store.reference_run is None
    store.put(loaded("", "conv", "fc"))  # another model: A goes
    assert store.runs() == [] and store.pinned_run is None


def test_a_cancelled_or_failed_reference_is_not_compared_with():
    from inspector.core.records.frames import RunFinished, RunStarted

    store = RunStore()
    store.set_baseline(1)
    store.put(RunStarted(1, "a.png", "m", "cpu"))
    store.put(RunStarted(2, "a.png", "m", "cpu", edits=("zero channels [1] of x",)))
    assert store.reference_run == 1  # still arriving: compared as its frames come
    store.put(RunFinished(1, "cancelled"))
    assert store.reference_run is None
    store.pin(2)
    store.put(RunFinished(2, "error"))
    store.put(RunStarted(3, "b.png", "m", "cpu"))
    assert store.reference_run is None  # run A failed: nothing to compare with


def test_the_last_full_run_stays_while_live_runs_of_one_module_follow_it():
    """A video playing: each frame a live run of the selected module alone. The full run
    before them stays the newest word on the other modules until a full run replaces it;
    between still images (not streaming) the runs beyond keep_runs go as they come."""
    store = RunStore(keep_runs=2)
    store.streaming = True

    def full(run):
        store.put(RunStarted(run, f"clip.mp4 · frame {run}", "m", "cpu"))
        for module in ("conv", "fc"):
            store.put(act(run, module, float(run)))
            store.put(grad(run, module, float(run)))
        store.put(RunFinished(run, "ok"))

    full(1)
    for run in range(2, 9):
        store.put(RunStarted(run, f"clip.mp4 · frame {run}", "m", "cpu"))
        store.put(act(run, "conv", float(run)))
        store.put(RunFinished(run, "ok"))
    assert store.runs() == [1, 7, 8]
    assert store.latest_tensor("conv", OUTPUT).run_id == 8
    assert store.latest_tensor("fc", OUTPUT).run_id == 1
    assert store.latest_tensor("conv", GRAD_OUTPUT).run_id == 1
    assert store.started(1).label == "clip.mp4 · frame 1"
    assert store.latest_run((OUTPUT,)) == 8 and store.shown_run((GRAD_OUTPUT,)) == 1
    full(9)  # paused: the frame in full
    assert store.runs() == [8, 9]
    assert store.latest_tensor("fc", OUTPUT).run_id == 9
    # Still images: the gradients were turned off after the first; its gradient view
    # does not keep showing a picture long gone.
    store.streaming = False
    full(10)
    for run in range(11, 14):
        store.put(RunStarted(run, f"photo {run}.png", "m", "cpu"))
        store.put(act(run, "conv", float(run)))
        store.put(RunFinished(run, "ok"))
    assert store.runs() == [12, 13]
    assert store.shown_run((GRAD_OUTPUT,)) is None


def test_after_a_cancel_the_views_show_the_last_run_before_it_with_its_own_reference():
    """Issue 22: an edited run (3, compared with 1), then a new unedited run (4) and edited
    run (5), both cancelled: the views show run 3 against run 1 again, none of 4's or 5's
    frames."""
    from inspector.core.records.frames import RunFinished, RunStarted

    store = RunStore()
    store.set_baseline(1)
    for run, frames in ((1, [RunStarted(1, "a.png", "m", "cpu"), preds(1, 0.9)]),
                        (3, [edited_start(3), preds(3, 0.4)])):
        for frame in [*frames, RunFinished(run, "ok")]:
            store.put(frame)
    store.set_baseline(4)  # Score-CAM chosen: a new unedited run first
    store.put(RunStarted(4, "a.png", "m", "cpu"))
    store.put(preds(4, 0.8))
    store.put(edited_start(5))
    store.put(preds(5, 0.3))
    assert store.shown == 5 and store.reference_run == 4  # still running: shown as it comes
    store.put(RunFinished(4, "cancelled"))
    store.put(RunFinished(5, "cancelled"))
    assert store.cancelled and store.current_run == 5
    assert store.shown == 3 and store.shown_run(("predictions",)) == 3
    assert store.reference_run == 1 and store.reference_names() == ("before", "after")
    store.put(RunStarted(6, "a.png", "m", "cpu"))  # the next run: shown as before
    assert not store.cancelled and store.shown == 6
