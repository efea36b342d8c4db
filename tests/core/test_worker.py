"""The worker thread and the Session's runs: cancel, close, errors, the next run works."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

from inspector.core.edits.interventions import ZeroChannels
from inspector.core.hookset import remaining_hooks
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import build_tree
from inspector.core.records.frames import (
    ActivationFrame,
    ErrorFrame,
    GradientFrame,
    PredictionFrame,
    RunFinished,
    RunStarted,
)
from inspector.core.records.kinds import OUTPUT
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session
from inspector.core.run.worker import InferenceWorker


class Slow(nn.Module):
    """Many cheap layers that each sleep: a long run with a hook point every 10 ms."""

    def __init__(self, layers=300, delay=0.01):
        super().__init__()
        self.delay = delay
        self.layers = nn.ModuleList(nn.Linear(3 * 8 * 8, 3 * 8 * 8) for _ in range(layers))
        self.head = nn.Linear(3 * 8 * 8, 4)
        self.started = threading.Event()

    def forward(self, x):
        self.started.set()
        h = x.flatten(1)
        for layer in self.layers:
            time.sleep(self.delay)
            h = layer(h)
        return self.head(h)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)
        self.fail = False

    def forward(self, x):
        h = self.act(self.conv(x))
        if self.fail:
            raise RuntimeError("tiny failed on purpose")
        return self.fc(self.pool(h).flatten(1))


PRE = Preprocess(crop_size=(8, 8), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)


def session_with(model: nn.Module) -> Session:
    s = Session()
    s.loaded = LoadedModel(model.eval(), "test", "test model", True, ["a", "b", "c", "d"], PRE,
                           torch.device("cpu"))
    s.tree = build_tree(model, torch.zeros(1, 3, 8, 8))
    return s


def frames_of(session, run_id, timeout=30):
    out, deadline = [], time.time() + timeout
    while time.time() < deadline:
        f = session.channel.get(timeout=0.5)
        if f is None:
            continue
        out.append(f)
        if isinstance(f, RunFinished) and f.run_id == run_id:
            return out
    raise AssertionError("no RunFinished")


def test_worker_runs_jobs_in_order_and_reports_exceptions():
    w = InferenceWorker()
    try:
        seen = []
        futures = [w.submit(lambda c, i=i: seen.append(i) or i) for i in range(5)]
        assert [f.result(5) for f in futures] == list(range(5))
        assert seen == list(range(5))
        bad = w.submit(lambda c: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            bad.result(5)
        assert w.submit(lambda c: torch.is_grad_enabled()).result(5) is False  # per thread
    finally:
        assert w.close()


def test_close_during_slow_run_returns_quickly():
    model = Slow()
    s = session_with(model)
    s.submit(torch.zeros(1, 3, 8, 8))
    assert model.started.wait(10)
    t = time.perf_counter()
    assert s.close(timeout=2.0)
    assert time.perf_counter() - t < 2.0
    assert not remaining_hooks(model)


def test_cancel_discards_that_runs_frames():
    model = Slow(layers=200)
    s = session_with(model)
    try:
        run = s.submit(torch.zeros(1, 3, 8, 8))
        assert model.started.wait(10)
        time.sleep(0.2)  # some layers have sent frames by now
        s.cancel(run)
        frames = frames_of(s, run)
        assert frames[-1].status == "cancelled"
        assert not [f for f in frames if isinstance(f, (ActivationFrame, GradientFrame))]
        assert not remaining_hooks(model)
        model.delay = 0
        nxt = s.submit(torch.zeros(1, 3, 8, 8))
        frames = frames_of(s, nxt)
        assert frames[-1].status == "ok"
        assert len([f for f in frames if isinstance(f, ActivationFrame)]) > 100
    finally:
        s.close()


def test_run_sends_frames_and_errors_keep_session_usable(tmp_path):
    model = Tiny()
    s = session_with(model)
    try:
        run = s.submit(torch.rand(3, 8, 8))
        frames = frames_of(s, run)
        kinds = [type(f) for f in frames]
        assert kinds[0] is RunStarted and kinds[-1] is RunFinished
        assert PredictionFrame in kinds and GradientFrame in kinds
        assert frames[-1].status == "ok" and "forward" in frames[-1].timings

        model.fail = True
        run = s.submit(torch.rand(3, 8, 8))
        frames = frames_of(s, run)
        err = next(f for f in frames if isinstance(f, ErrorFrame))
        assert "tiny failed on purpose" in err.message and err.module == ""
        assert frames[-1].status == "error"
        assert not remaining_hooks(model)

        bad = tmp_path / "bad.png"
        bad.write_text("not an image")
        run = s.submit(str(bad))
        frames = frames_of(s, run)
        err = next(f for f in frames if isinstance(f, ErrorFrame))
        assert "bad.png" in err.message

        model.fail = False
        run = s.submit(torch.rand(3, 8, 8))
        assert frames_of(s, run)[-1].status == "ok"
    finally:
        s.close()


def test_interventions_listed_and_gone_after_run():
    # Seeded: with some random weights the zeroed channels are ones ReLU zeroes anyway, and
    # the edit would change nothing to see.
    torch.manual_seed(0)
    model = Tiny()
    s = session_with(model)
    try:
        x = torch.rand(3, 8, 8)
        capture = CaptureSpec.for_modules(["conv"], (OUTPUT,), full=frozenset({"conv"}))
        edited = s.run(x, capture=capture,
                       interventions=(ZeroChannels("conv", channels=(1, 2)),))
        frames = s.channel.drain()
        conv = next(f for f in frames if isinstance(f, ActivationFrame))
        assert (conv.full[:, 1:3] == 0).all() and (conv.full[:, 0] != 0).any()
        finished = next(f for f in frames if isinstance(f, RunFinished))
        assert finished.interventions == ("zero channels [1, 2] of conv",)
        plain = s.run(x)
        with torch.no_grad():
            expected = model(x[None] * 1)
        assert torch.equal(plain.logits, expected)
        assert not torch.equal(edited.logits, expected)
        assert not remaining_hooks(model)
    finally:
        s.close()


def test_target_out_of_range_is_an_error_not_a_crash():
    s = session_with(Tiny())
    try:
        run = s.submit(torch.rand(3, 8, 8), target=99)
        frames = frames_of(s, run)
        assert any("out of range" in f.message for f in frames if isinstance(f, ErrorFrame))
    finally:
        s.close()


@pytest.mark.parametrize("kernel", [True, False])
def test_a_model_load_says_when_statistics_take_the_slower_path(monkeypatch, kernel):
    from inspector.core.records.frames import ModelLoaded
    from inspector.core.stats import fused as fused_stats

    if not kernel:
        monkeypatch.setattr(fused_stats, "_failure", "no compiler at install time")
    s = Session()
    try:
        s.load_model("demo_shapes").result(timeout=120)
        loaded = None
        while loaded is None:
            f = s.channel.get(timeout=5)
            assert f is not None, "no ModelLoaded frame"
            loaded = f if isinstance(f, ModelLoaded) else None
        slow = [n for n in loaded.notes if n.startswith("Statistics use torch reductions")]
        assert slow == ([] if kernel else [fused_stats.fallback_note()])
    finally:
        s.close()


def test_each_run_captures_what_its_own_value_says_and_the_session_keeps_none_of_it():
    from inspector.core.run.request import RunRequest

    s = session_with(Tiny())
    try:
        x = torch.rand(3, 8, 8)
        conv_only = RunRequest(x, capture=CaptureSpec.for_modules(["conv"], (OUTPUT,)))
        fc_only = conv_only.with_(capture=CaptureSpec.for_modules(["fc"], (OUTPUT,)))
        captured = []
        for request in (conv_only, fc_only, conv_only.with_(capture=None)):
            run_id, future = s.submit_request(request)
            assert future.result(timeout=30).status == "ok"
            captured.append({f.module for f in frames_of(s, run_id)
                             if isinstance(f, ActivationFrame) and f.kind == OUTPUT})
        assert captured[0] == {"conv"} and captured[1] == {"fc"}
        assert captured[2] == {"conv", "act", "pool", "fc"}  # no value: every leaf
        # Nothing of a run's capture is parked in the session for the next one.
        assert not hasattr(s, "set_capture") and not hasattr(s, "capture")
        assert not [k for k in vars(s) if "capture" in k]
    finally:
        s.close()


def test_the_default_cam_layer_comes_with_model_loaded():
    from inspector.core.records.frames import ModelLoaded

    s = Session()
    try:
        s.load_model("demo_shapes").result(timeout=120)
        frames = s.channel.drain()
        loaded = next(f for f in frames if isinstance(f, ModelLoaded))
        assert loaded.cam_layer is not None and loaded.cam_layer in loaded.tree.modules
        assert loaded.cam_layer == s.default_cam_layer()
    finally:
        s.close()


def test_a_run_asks_for_input_attributions_and_gets_signed_arrays_and_maps():
    from inspector.core.explain.catalog import ATTRIBUTION_LAYER
    from inspector.core.records.frames import CamFrame

    torch.manual_seed(0)
    model = Tiny()
    s = session_with(model)
    try:
        x = torch.rand(3, 8, 8)
        out = s.run(x, gradients=False, attributions=("saliency", "gxi"))
        assert out.status == "ok", out.error
        maps = [f for f in s.channel.drain() if isinstance(f, CamFrame)]
        assert {f.method for f in maps} == {"saliency", "gxi"}
        assert all(f.layer == ATTRIBUTION_LAYER and f.cam.shape == (8, 8) for f in maps)
        assert all(0 <= f.cam.min() and f.cam.max() <= 1 for f in maps)
        # The signed arrays are the input gradient of the target (times the input for gxi).
        leaf = x[None].clone().requires_grad_(True)
        model.eval()
        model(leaf)[0, out.target].backward()
        grad = leaf.grad[0].numpy()
        assert out.attributions["saliency"].shape == (3, 8, 8)
        assert abs(out.attributions["saliency"] - abs(grad)).max() < 1e-6
        assert abs(out.attributions["gxi"] - grad * x.numpy()).max() < 1e-6
        assert not remaining_hooks(model)
    finally:
        s.close()
