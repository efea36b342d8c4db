"""A run that asks for metrics (RunRequest.metrics) scores every map it makes, after them,
with the run's edits on: its outcome and MetricsFrames, its progress and cancel, a stop of
the scoring alone (the maps scored so far kept, the run finishing well), no hook left, a model whose output is not class scores, and detection and segmentation models."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from task_models import DETECTION_FACTORY, SEGMENTATION_FACTORY, picture

from inspector.core.edits.hooks import EditHooks
from inspector.core.edits.interventions import ZeroChannels
from inspector.core.explain.catalog import ATTRIBUTION_LAYER
from inspector.core.explain.metrics.curves import deletion_insertion
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.names import MetricOptions
from inspector.core.explain.metrics.scores import class_probability
from inspector.core.inputs.images import load_image
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import CamFrame, MetricsFrame, ProgressFrame, RunFinished
from inspector.core.run.request import RunRequest
from inspector.core.run.session import Session

FAST = MetricOptions(metrics=("deletion", "insertion", "avgdrop", "sanity"), steps=10)


def _hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               for m in model.modules())


def test_every_map_is_scored_and_sent_as_a_frame(demo_session, demo_samples):
    s = demo_session
    out = s.run(demo_samples[0], cams=(("gradcam", None), ("eigencam", None)),
                attributions=("saliency",), metrics=FAST)
    frames = s.channel.drain()
    assert out.status == "ok", out.error
    keys = {("gradcam", "stage3"), ("eigencam", "stage3"), ("saliency", ATTRIBUTION_LAYER)}
    assert set(out.metrics) == keys
    metrics = {(f.method, f.layer): f for f in frames if isinstance(f, MetricsFrame)}
    cams = {(f.method, f.layer): f for f in frames if isinstance(f, CamFrame)}
    assert set(metrics) == keys
    for key, frame in metrics.items():
        assert frame.scores is out.metrics[key] and frame.options == FAST
        assert np.array_equal(frame.cam, cams[key].cam)  # the map the window shows
        assert "20 steps" not in frame.protocol and "10 steps" in frame.protocol
        assert len(frame.scores.sanity) == 6 and frame.scores.sanity_flag is not None
    p = float(out.logits.softmax(-1)[0, out.target])
    assert out.metrics[("gradcam", "stage3")].deletion.scores[0] == pytest.approx(p, abs=1e-6)
    progress = [f for f in frames if isinstance(f, ProgressFrame) and f.step == "Faithfulness"]
    assert progress and progress[-1].done == progress[-1].total
    assert _hooks(s.loaded.model) == 0


def test_the_perturbed_forwards_run_with_the_edits_on(demo_session, demo_samples):
    s = demo_session
    edit = ZeroChannels("stage3", channels=tuple(range(0, 96, 2)))
    options = MetricOptions(metrics=("deletion", "insertion"), steps=8)
    plain = s.run(demo_samples[3], cams=(("gradcam", None),), metrics=options)
    edited = s.run(demo_samples[3], cams=(("gradcam", None),), metrics=options,
                   interventions=(edit,))
    s.channel.drain()
    key = ("gradcam", "stage3")
    ours = edited.metrics[key]
    assert not np.allclose(ours.deletion.scores, plain.metrics[key].deletion.scores)
    # The same curves computed by hand on the model with the edit's hooks on.
    x = s.loaded.preprocess(load_image(demo_samples[3]))[None]
    with EditHooks(s.loaded.model, (edit,), run_id=0):
        forwarder = Forwarder(class_probability(s.loaded.model, edited.target), x)
        (d, i), = deletion_insertion(forwarder, x, edited.cams[key], steps=8)
    assert np.allclose(d.scores, ours.deletion.scores, atol=1e-5)
    assert np.allclose(i.scores, ours.insertion.scores, atol=1e-5)


def test_a_cancel_stops_the_metrics_and_the_next_run_works(demo_session, demo_samples):
    s = demo_session
    slow = MetricOptions(metrics=("road",), road_noise=0.0)
    seen = threading.Event()
    original_put = s.channel.put

    def put(frame):
        original_put(frame)
        if isinstance(frame, ProgressFrame) and frame.step == "Faithfulness":
            seen.set()

    s.channel.put = put
    try:
        run_id, future = s.submit_request(
            RunRequest(image=demo_samples[1], cams=(("gradcam", None), ("layercam", None)),
                      metrics=slow))
        assert seen.wait(60)
        s.cancel(run_id)
        assert future.result(60).status == "cancelled"
    finally:
        s.channel.put = original_put
    s.channel.drain()
    assert _hooks(s.loaded.model) == 0
    again = s.run(demo_samples[1], cams=(("gradcam", None),), metrics=FAST)
    assert again.status == "ok" and again.metrics


THREE = (("gradcam", None), ("layercam", None), ("eigencam", None))


def _finished(frames, run_id) -> RunFinished:
    return next(f for f in frames if isinstance(f, RunFinished) and f.run_id == run_id)


def test_a_stop_of_the_scoring_keeps_the_maps_scored_and_the_run(demo_session, demo_samples,
                                                                 monkeypatch):
    """Issue 32: the Faithfulness tab's Cancel. A stop asked during the second map's ROAD
    lands at the next progress check: the first map keeps all its scores (its sanity check
    not reached says so), the others get none, and the run is a complete run."""
    from inspector.core.explain.metrics import score_maps
    from inspector.core.run.metrics_stage import SANITY_STOPPED

    s = demo_session
    options = MetricOptions(metrics=("deletion", "insertion", "road", "sanity"), steps=4,
                            road_noise=0.0)
    s.channel.drain()
    real, calls, run = score_maps.road, [], {}

    def road(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            assert s.stop_scoring(run["id"])
        return real(*args, **kwargs)

    monkeypatch.setattr(score_maps, "road", road)
    out, frames = _score_three(s, demo_samples[0], options, run)
    assert out.status == "ok", out.error
    first = ("gradcam", "stage3")
    assert set(out.metrics) == {first}
    scores = out.metrics[first]
    assert scores.deletion is not None and scores.road_morf is not None
    assert not scores.sanity and scores.notes["sanity"] == SANITY_STOPPED
    mine = [f for f in frames if getattr(f, "run_id", None) == run["id"]]
    assert [(f.method, f.layer) for f in mine if isinstance(f, MetricsFrame)] == [first]
    assert {f.method for f in mine if isinstance(f, CamFrame)} == {m for m, _ in THREE}
    assert _finished(frames, run["id"]).scoring_stopped == (1, 3)
    assert out.notes == ["the scoring was cancelled: 1 of 3 maps scored"]
    assert _hooks(s.loaded.model) == 0
    assert not s.stop_scoring(run["id"])  # finished: nothing to stop
    # The next run scores every map.
    monkeypatch.setattr(score_maps, "road", real)
    again_id, future = s.submit_request(RunRequest(image=demo_samples[0], cams=THREE,
                                                   metrics=FAST))
    again = future.result(120)
    frames = s.channel.drain()
    assert again.status == "ok" and len(again.metrics) == 3
    assert all(len(m.sanity) == 6 for m in again.metrics.values())
    assert _finished(frames, again_id).scoring_stopped is None and not again.notes


def _score_three(s, image, options, run: dict):
    """THREE's maps of `image` scored with `options`: (the run's outcome, its frames); the
    run's id is in run["id"] as soon as it is submitted (a stand-in stops it by that)."""
    run["id"], future = s.submit_request(RunRequest(image=image, cams=THREE, metrics=options))
    out = future.result(120)
    return out, s.channel.drain()


def test_a_stop_in_the_sanity_check_or_before_the_metrics(demo_session, demo_samples,
                                                          monkeypatch):
    """Stopped in the sanity check: every map keeps its other scores. Stopped before the
    metrics began: the run's maps are all made, none scored."""
    from inspector.core.run import metrics_stage

    s = demo_session
    real, run = metrics_stage.sanity_check, {}

    def sanity_check(*args, **kwargs):
        s.stop_scoring(run["id"])
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics_stage, "sanity_check", sanity_check)
    out, frames = _score_three(s, demo_samples[0], FAST, run)
    assert out.status == "ok" and len(out.metrics) == 3
    for scores in out.metrics.values():
        assert scores.deletion is not None and not scores.sanity
        assert scores.notes["sanity"] == metrics_stage.SANITY_STOPPED
    assert _finished(frames, run["id"]).scoring_stopped == (3, 3)
    monkeypatch.setattr(metrics_stage, "sanity_check", real)
    run_id, future = s.submit_request(RunRequest(image=demo_samples[0], cams=THREE,
                                                 metrics=FAST))
    s.stop_scoring(run_id)
    out = future.result(120)
    frames = s.channel.drain()
    assert out.status == "ok" and out.metrics == {} and len(out.cams) == 3
    assert _finished(frames, run_id).scoring_stopped == (0, 3)
    assert _hooks(s.loaded.model) == 0


ONE_OUTPUT = '''
import torch
from torch import nn

CLASSES = ["score"]
PREPROCESS = {"crop_size": (32, 32), "resize_size": None,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 1))
'''


def test_a_model_without_class_scores_leaves_the_maps_and_says_why(tmp_path):
    factory = tmp_path / "one.py"
    factory.write_text(ONE_OUTPUT)
    s = Session()
    try:
        s.load_model(ModelSpec(name=None, factory=f"{factory}:build", device="cpu")).result()
        out = s.run(picture(32, 32), cams=(("gradcam", "0"),), metrics=FAST)
        s.channel.drain()
        assert out.status == "ok" and ("gradcam", "0") in out.cams
        assert out.metrics[("gradcam", "0")].undefined == (
            "the model's output is (1, 1), not class scores: the metrics need a class "
            "probability")
    finally:
        s.close()


@pytest.mark.slow
@pytest.mark.parametrize("factory", [DETECTION_FACTORY, SEGMENTATION_FACTORY])
def test_detection_and_segmentation_scores(tmp_path, factory):
    path = tmp_path / "task.py"
    path.write_text(factory)
    s = Session()
    try:
        s.load_model(ModelSpec(name=None, factory=f"{path}:build", device="cpu")
                     ).result(timeout=300)
        options = MetricOptions(metrics=("deletion", "insertion", "avgdrop", "sanity"),
                                steps=3)
        out = s.run(picture(), cams=(("gradcam", None),), metrics=options)
        s.channel.drain()
        assert out.status == "ok", out.error
        (key, scores), = out.metrics.items()
        d = scores.deletion
        assert d is not None and len(d.scores) == 4 and np.isfinite(d.scores).all()
        assert 0.0 <= d.scores.min() and d.scores.max() <= 1.0
        if s.loaded.task == "detection":  # the explained detection's own score first
            assert d.scores[0] == pytest.approx(out.detections[out.target].score, abs=1e-4)
        assert scores.notes["sanity"] == "the sanity check remakes maps of classifiers only"
        assert _hooks(s.loaded.model) == 0
    finally:
        s.close()
