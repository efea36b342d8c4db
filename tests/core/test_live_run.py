"""A video's live run (issue 16): gradients=False with a gradient CAM runs the forward without
autograd up to the CAM layer and a backward that stops there. Its CAM and the selected
module's activations must be those of the full run of the same frame (a backward down to
the input, every leaf captured), and no hook may stay behind."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

from inspector.core.edits.interventions import ScaleGradient, ZeroChannels
from inspector.core.explain.catalog import ATTENTION_CAMS, CAM_METHODS
from inspector.core.hookset import remaining_hooks
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import (
    ActivationFrame,
    ErrorFrame,
    GradientFrame,
    PredictionFrame,
    RunFinished,
)
from inspector.core.records.kinds import DEFAULT_KINDS, OUTPUT
from inspector.core.run.capture_spec import CaptureSpec, leaf_names
from inspector.core.run.session import Session

# `block`'s output is modified in place right after it (an inplace ReLU), as in torchvision's
# ResNets; the probes record whether autograd records where they run.
MODELS = textwrap.dedent('''
    import torch
    from torch import nn


    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.grad_enabled = []

        def forward(self, x):
            self.grad_enabled.append(torch.is_grad_enabled())
            return x


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.early = Probe()
            self.block = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.block_relu = nn.ReLU(inplace=True)
            self.late = Probe()
            self.head = nn.Conv2d(16, 16, 3, padding=1)
            self.head_relu = nn.ReLU()
            self.unused = nn.Conv2d(16, 16, 1)  # never called
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            x = self.early(self.relu(self.bn(self.stem(x))))
            x = self.late(self.block_relu(self.block(x)))
            x = self.head_relu(self.head(x))
            return self.fc(x.mean((2, 3)))


    def build_net():
        return Net().eval()
''')

# The CAMs of a layer (this model has no attention: its maps are tested in test_attention_*).
GRADIENT_CAMS = sorted(n for n, m in CAM_METHODS.items() if m.needs_grad and n not in ATTENTION_CAMS)
SELECTED = "stem"
LIVE_CAPTURE = CaptureSpec(modules={SELECTED: frozenset({OUTPUT})}, preview={SELECTED})


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("live") / "live_models.py"
    path.write_text(MODELS)
    s = Session()
    s.load_model(ModelSpec(name=None, factory=f"{path}:build_net")).result(timeout=120)
    s.channel.drain()
    yield s
    s.close()


@pytest.fixture
def frame():
    torch.manual_seed(1)
    return torch.rand(1, 3, 32, 32)


def _run(session, x, **options):
    model = session.loaded.model
    model.early.grad_enabled.clear()
    model.late.grad_enabled.clear()
    outcome = session.run(x, timeout=120, **options)
    frames = session.channel.drain()
    assert outcome.status == "ok", outcome.error
    assert remaining_hooks(model) == []
    return outcome, frames


def _live(session, x, cams, **options):
    return _run(session, x, capture=LIVE_CAPTURE, gradients=False, cams=cams, **options)


def _full(session, x, cams, **options):
    """The window's full run: every leaf's input, output and output gradient, with
    previews, and a backward down to the input."""
    model = session.loaded.model
    capture = CaptureSpec.leaves(model, DEFAULT_KINDS, preview=leaf_names(model))
    return _run(session, x, capture=capture, gradients=True, cams=cams, **options)


def _finished(frames) -> RunFinished:
    return next(f for f in frames if isinstance(f, RunFinished))


@pytest.mark.parametrize("layer", ["block", "head"])
@pytest.mark.parametrize("method", [*GRADIENT_CAMS, "eigencam"])
def test_the_live_cam_equals_the_full_runs(session, frame, method, layer):
    cams = ((method, layer),)
    full, _ = _full(session, frame, cams)
    live, _ = _live(session, frame, cams)
    assert live.target == full.target
    torch.testing.assert_close(live.logits, full.logits)
    np.testing.assert_allclose(live.cams[(method, layer)], full.cams[(method, layer)],
                               rtol=1e-5, atol=1e-6)
    assert live.cams[(method, layer)].max() > 0  # a map, not an empty one


def test_the_live_run_sends_the_selected_modules_activations_as_the_full_run_does(
        session, frame):
    cams = (("gradcam", "block"),)
    _, full_frames = _full(session, frame, cams)
    _, live_frames = _live(session, frame, cams)

    def selected(frames):
        return [f for f in frames if isinstance(f, ActivationFrame)
                and f.module == SELECTED and f.kind == OUTPUT]

    (full,), (live,) = selected(full_frames), selected(live_frames)
    assert live.preview is not None and live.preview.size > 0
    np.testing.assert_allclose(live.preview, full.preview, rtol=1e-6, atol=1e-7)
    assert live.shape == full.shape
    assert live.stats.mean == pytest.approx(full.stats.mean, rel=1e-6, abs=1e-7)
    # Nothing else: no other module's frames, no gradient frames.
    tensors = [f for f in live_frames if isinstance(f, (ActivationFrame, GradientFrame))]
    assert tensors == [live]
    # The class explained is said, as for a full run.
    (prediction,) = [f for f in live_frames if isinstance(f, PredictionFrame)]
    assert prediction.target is not None


def test_autograd_records_only_from_the_cam_layer_on(session, frame):
    model = session.loaded.model
    _live(session, frame, (("gradcam", "block"),))
    assert model.early.grad_enabled == [False]  # before the CAM layer: no graph
    assert model.late.grad_enabled == [True]
    _full(session, frame, (("gradcam", "block"),))
    assert model.early.grad_enabled == [True]


def test_two_cam_layers_one_after_the_other_get_both_gradients(session, frame):
    # `head` lies after `block`: its output is already in the graph and must not be cut,
    # or no gradient would reach `block` through it.
    cams = (("gradcam", "block"), ("layercam", "head"))
    full, _ = _full(session, frame, cams)
    live, _ = _live(session, frame, cams)
    for key in full.cams:
        np.testing.assert_allclose(live.cams[key], full.cams[key], rtol=1e-5, atol=1e-6)


def test_a_gradient_free_cam_without_backward_runs_no_backward(session, frame):
    outcome, frames = _live(session, frame, (("eigencam", "head"),))
    assert session.loaded.model.late.grad_enabled == [False]
    assert "backward" not in _finished(frames).timings
    assert ("eigencam", "head") in outcome.cams


def test_an_edit_of_gradients_takes_the_backward_down_to_the_input(session, frame):
    # A gradient scaled at the CAM layer itself changes the gradient the CAM reads: the
    # live run then goes the full way, and agrees with the full run with the same edit.
    edits = (ScaleGradient("block", factor=-1.0),)
    cams = (("gradcam++", "block"),)
    full, _ = _full(session, frame, cams, interventions=edits)
    live, _ = _live(session, frame, cams, interventions=edits)
    assert session.loaded.model.early.grad_enabled == [True]
    np.testing.assert_allclose(live.cams[cams[0]], full.cams[cams[0]], rtol=1e-5, atol=1e-6)
    plain, _ = _live(session, frame, cams)
    assert not np.allclose(plain.cams[cams[0]], live.cams[cams[0]])  # the edit mattered


def test_an_edit_of_outputs_applies_to_the_live_cam(session, frame):
    edits = (ZeroChannels("block", channels=(0, 1, 2)),)
    cams = (("gradcam", "head"),)
    full, _ = _full(session, frame, cams, interventions=edits)
    live, _ = _live(session, frame, cams, interventions=edits)
    assert session.loaded.model.early.grad_enabled == [False]
    np.testing.assert_allclose(live.cams[cams[0]], full.cams[cams[0]], rtol=1e-5, atol=1e-6)


def test_a_cam_layer_that_never_runs_is_a_one_line_error_and_leaves_no_hook(session, frame):
    model = session.loaded.model
    outcome = session.run(frame, capture=LIVE_CAPTURE, gradients=False,
                          cams=(("gradcam", "unused"),), timeout=120)
    frames = session.channel.drain()
    assert outcome.status == "error"
    (error,) = [f for f in frames if isinstance(f, ErrorFrame)]
    assert "unused" in error.message and "\n" not in error.message
    assert remaining_hooks(model) == []
    ok, _ = _live(session, frame, (("gradcam", "block"),))  # and the next run is fine
    assert ("gradcam", "block") in ok.cams
