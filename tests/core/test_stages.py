"""Each stage of a run (core.run.stages) on its own, on the demo model, outside a Session."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from PIL import Image

from inspector.core.edits.interventions import ScaleGradient
from inspector.core.inputs.images import ImageLoadError
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model
from inspector.core.records.frames import CamFrame, PredictionFrame
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run import stages
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.request import RunRequest
from inspector.core.run.session import RunOutcome


@pytest.fixture(scope="module")
def demo():
    return load_model(ModelSpec(device="cpu"))


def in_flight(demo, **request) -> tuple[stages.InFlight, list]:
    frames: list = []
    req = RunRequest(**{"image": torch.rand(3, 128, 128), **request})
    return stages.InFlight(1, req, demo, frames.append, threading.Event(), RunOutcome(1, "ok")), frames


def test_prepare_input_copies_a_tensor_and_reads_a_picture(demo, demo_samples, tmp_path):
    tensor = torch.rand(3, 128, 128)
    run, _ = in_flight(demo, image=tensor)
    stages.prepare_input(run)
    assert run.x.shape == (1, 3, 128, 128) and run.x.data_ptr() != tensor.data_ptr()
    run.x += 1  # the caller's tensor stays as it was
    assert tensor.max() <= 1
    run, _ = in_flight(demo, image=Image.open(demo_samples[0]))
    stages.prepare_input(run)
    assert run.x.shape == (1, 3, *demo.preprocess.crop_size) and run.size is not None
    assert run.label.endswith(demo_samples[0].name)
    (tmp_path / "notes.png").write_text("not a picture")
    run, _ = in_flight(demo, image=str(tmp_path / "notes.png"))
    with pytest.raises(ImageLoadError):
        stages.prepare_input(run)


def test_plan_encodes_gradients_once(demo):
    capture = CaptureSpec.for_modules(["stage1", "stage3"], (OUTPUT, GRAD_OUTPUT))
    off, _ = in_flight(demo, capture=capture, gradients=False, cams=(("gradcam", None),))
    plan = stages.plan(off, "stage3")
    # No gradient kinds, whatever the capture lists; the CAM's layer is kept, and the
    # backward stops there.
    assert all(GRAD_OUTPUT not in k for k in plan.capture.modules.values())
    assert plan.cams == (("gradcam", "stage3"),) and "stage3" in plan.capture.keep
    assert not plan.full_backward and plan.graph_from == {"stage3"}
    on, _ = in_flight(demo, capture=capture, cams=(("eigencam", None),))
    plan = stages.plan(on, "stage3")
    assert plan.full_backward and plan.graph_from == frozenset()
    assert plan.capture.modules["stage1"] == {OUTPUT, GRAD_OUTPUT}
    edited, _ = in_flight(demo, capture=capture, gradients=False,
                          interventions=(ScaleGradient("stage2", factor=2.0),))
    assert stages.plan(edited, "stage3").full_backward  # an edit of gradients goes all the way
    none, _ = in_flight(demo, capture=capture, gradients=False, cams=(("eigencam", None),))
    assert not stages.plan(none, "stage3").needs_grad  # EigenCAM reads no gradient


def test_forward_backward_and_explain_in_a_capture(demo):
    run, frames = in_flight(demo, cams=(("gradcam", None),), gradients=False)
    stages.prepare_input(run)
    plan = stages.plan(run, "stage3")
    cap = Capture(demo.model, plan.capture, frames.append, 1, (), run.cancel, plan.graph_from)
    with cap, torch.set_grad_enabled(plan.full_backward):
        cap.eval()
        plan = stages.forward(run, plan)
        stages.backward(run, plan, cap)
    predictions = [f for f in frames if isinstance(f, PredictionFrame)]
    assert len(predictions) == 1 and predictions[0].target == run.target
    assert run.outcome.logits.shape == (1, len(demo.categories))
    assert run.score is not None and cap.graph_roots  # the graph started at stage3
    assert cap.kept_tensor("stage3", GRAD_OUTPUT) is not None
    stages.explain(run, plan, cap)
    cams = [f for f in frames if isinstance(f, CamFrame)]
    assert [(f.method, f.layer) for f in cams] == [("gradcam", "stage3")]
    cam = run.outcome.cams[("gradcam", "stage3")]
    assert np.asarray(cam).shape == tuple(run.x.shape[-2:])
    assert {"forward", "backward", "cam"} <= set(run.timings)


def test_a_classifier_refuses_a_detection_target(demo):
    from inspector.core.records.targets import DetectionTarget

    run, _ = in_flight(demo, target=DetectionTarget(0))
    stages.prepare_input(run)
    plan = stages.plan(run, "stage3")
    with Capture(demo.model, plan.capture, None, 1), pytest.raises(ValueError, match="classifier"):
        stages.forward(run, plan)
