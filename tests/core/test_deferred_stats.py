"""Statistics handed to the idle-core thread (core.stats.deferred): the same numbers as in
the hook, never numbers of a tensor that an in-place op changed meanwhile."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec, leaf_names
from inspector.core.stats import deferred as deferred_stats
from inspector.core.stats import fused as fused_stats
from inspector.core.stats.tensor_stats import tensor_stats


@pytest.fixture(autouse=True)
def kernel(monkeypatch):
    # Without the compiled kernel nothing is handed over and these tests would check
    # nothing.
    assert fused_stats.available(), fused_stats.fallback_note()
    # Hand over everything eligible however far behind the thread is (at SCHED_IDLE it
    # may get no core at all while the tests keep both busy): counts are then exact.
    monkeypatch.setattr(deferred_stats, "BACKLOG", 1 << 30)


def _assert_same_stats(got, want, where):
    for field in ("mean", "std", "min", "max", "zero_fraction", "abs_mean", "numel"):
        assert getattr(got, field) == getattr(want, field), (where, field)
    for field in ("channel_mean", "channel_std", "channel_min", "channel_max"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=where)
    np.testing.assert_array_equal(got.channel_zero_fraction, want.channel_zero_fraction)


class _HandedOver:
    """Per run (per Deferred), how many statistics its hooks handed to the thread: the
    submits that said True, counted by wrapping Deferred.submit."""

    def __init__(self, monkeypatch) -> None:
        self.runs: dict[deferred_stats.Deferred, int] = {}
        real = deferred_stats.Deferred.submit

        def submit(deferred, *args, **kwargs):
            handed = real(deferred, *args, **kwargs)
            self.runs[deferred] = self.runs.get(deferred, 0) + handed
            return handed

        monkeypatch.setattr(deferred_stats.Deferred, "submit", submit)

    @property
    def last(self) -> int:
        """The latest run's count."""
        return list(self.runs.values())[-1]


@pytest.fixture
def handed(monkeypatch) -> _HandedOver:
    return _HandedOver(monkeypatch)


def _run(model, spec, x, backward=False, extra_hooks=()):
    frames = []
    handles = [m.register_forward_hook(h) for m, h in extra_hooks]
    try:
        xi = x.clone().requires_grad_(backward)
        with Capture(model, spec, frames.append) as cap, torch.set_grad_enabled(backward):
            out = model(xi)
            if backward:
                torch.autograd.grad(out[0, 0], xi)
    finally:
        for h in handles:
            h.remove()
    return cap, frames


class _Transposed(nn.Module):
    def forward(self, x):
        return x.transpose(2, 3)  # a non-contiguous output


def test_handed_over_statistics_equal_those_of_the_output_at_hook_time(handed):
    torch.manual_seed(0)
    r = torchvision.models.resnet18(num_classes=10)
    # A transposed (non-contiguous) view of conv1's output feeds bn1, and layer1's
    # blocks call one ReLU twice.
    model = nn.Sequential(r.conv1, _Transposed(), r.bn1, r.relu, r.layer1,
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).eval()
    spec = CaptureSpec.leaves(model, (OUTPUT, GRAD_OUTPUT))
    x = torch.randn(2, 3, 64, 64)
    # The reference: statistics of a copy taken when the module returned. ReLU(inplace=True)
    # and the residual `out += identity` change several outputs after their hooks.
    want = {}

    def reference(name):
        def hook(mod, args, out):
            calls = sum(1 for key in want if key[0] == name)
            want[(name, calls)] = tensor_stats(out.detach().clone())
        return hook

    modules = dict(model.named_modules())
    for run in range(3):
        want.clear()
        extra = [(modules[n], reference(n)) for n in leaf_names(model)]
        cap, frames = _run(model, spec, x, backward=True, extra_hooks=extra)
        outputs = [f for f in frames if f.kind == OUTPUT]
        assert len(outputs) == len(want) > len(leaf_names(model))
        for f in outputs:
            _assert_same_stats(f.stats, want[(f.module, f.call)], f"run {run}: {f.module}")
        assert len([f for f in frames if f.kind == GRAD_OUTPUT]) == len(outputs)
        assert cap.stats_dropped == 0
    # The first run learns what is modified in place; later runs hand the rest over.
    counts = list(handed.runs.values())
    assert len(counts) == 3 and counts[0] == 0 and counts[1] == counts[2] > len(want)
    memory = deferred_stats.memory_for(model)
    assert memory[("2", 0, OUTPUT, "")] is False  # bn1's output: ReLU(inplace=True) after it
    assert memory[("0", 0, OUTPUT, "")] is True  # conv1's: read by the transpose, never changed


class _LateInPlace(nn.Module):
    """a's output is scaled in place after b's hook, on runs with `mutate` set."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3)
        self.b = nn.Conv2d(4, 4, 1)
        self.c = nn.Conv2d(4, 4, 1)
        self.mutate = False

    def forward(self, x):
        y = self.a(x)
        z = self.b(y)
        if self.mutate:
            y.mul_(-3.0)
        return self.c(y) + z


@contextlib.contextmanager
def _race_in_place(model: _LateInPlace, monkeypatch):
    """Turn on the in-place op and hold the thread inside a's computation until module c
    runs, after that op: the thread then reads the changed values, and only the version
    check stands between them and the user."""
    gate = threading.Event()
    real = deferred_stats._compute

    def slow_compute(item):
        if threading.current_thread().name == "deferred-stats" and item.key[0] == "a":
            gate.wait(10)
        real(item)

    monkeypatch.setattr(deferred_stats, "_compute", slow_compute)
    model.mutate = True
    release = model.c.register_forward_hook(lambda *args: gate.set())
    try:
        yield
    finally:
        release.remove()
        gate.set()


def test_an_output_changed_in_place_while_the_thread_reads_it_is_dropped_not_shown(
        monkeypatch, handed):
    torch.manual_seed(0)
    model = _LateInPlace().eval()
    spec = CaptureSpec.leaves(model)
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        a_out = model.a(x)
    truth = tensor_stats(a_out)
    for _ in range(2):  # learn: nothing is modified in place yet
        cap, frames = _run(model, spec, x)
    assert handed.last == 3

    with _race_in_place(model, monkeypatch):
        cap, frames = _run(model, spec, x)
    assert cap.stats_dropped == 1
    assert "a" not in {f.module for f in frames}
    assert {f.module for f in frames} == {"b", "c"}

    # Learned: from now on a's statistics are computed in the hook, before the change.
    cap, frames = _run(model, spec, x)
    assert cap.stats_dropped == 0
    _assert_same_stats(next(f for f in frames if f.module == "a").stats, truth, "a")


class _Blowup(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.scale = 1.0

    def forward(self, x):
        return self.conv(x) * self.scale


def test_non_finite_values_handed_over_are_counted_exactly(handed):
    model = nn.Sequential(_Blowup(), nn.Conv2d(4, 2, 1)).eval()
    spec = CaptureSpec.leaves(model)
    x = torch.randn(1, 3, 12, 12)
    for _ in range(2):
        cap, frames = _run(model, spec, x)
    assert handed.last == 2
    with torch.no_grad():
        model[0].conv.weight[0] = float("inf")  # channel 0: inf, -inf and (inf - inf) NaN
        expected = int((~torch.isfinite(model[0].conv(x))).sum())
    cap, frames = _run(model, spec, x)
    assert handed.last == 2 and cap.stats_dropped == 0
    conv = next(f for f in frames if f.module == "0.conv")
    assert expected > 0 and conv.stats.nonfinite == expected


def test_a_busy_thread_means_the_hook_computes(monkeypatch, handed):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 2, 1)).eval()
    spec = CaptureSpec.leaves(model)
    x = torch.randn(1, 3, 12, 12)
    _run(model, spec, x)
    monkeypatch.setattr(deferred_stats, "BACKLOG", 0)  # as if the thread were always behind
    cap, frames = _run(model, spec, x)
    assert handed.last == 0 and len(frames) == 2
    assert all(f.stats is not None for f in frames)


def test_the_thread_ends_when_idle_and_comes_back_for_the_next_run(handed):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 2, 1)).eval()
    spec = CaptureSpec.leaves(model)
    x = torch.randn(1, 3, 12, 12)

    def running():
        return any(t.name == "deferred-stats" for t in threading.enumerate())

    for _ in range(2):
        cap, frames = _run(model, spec, x)
    assert handed.last == 2
    deadline = time.monotonic() + 10 * deferred_stats.IDLE_EXIT
    while running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not running()  # an app that stops running models keeps no thread
    cap, frames = _run(model, spec, x)
    assert handed.last == 2 and cap.stats_dropped == 0 and len(frames) == 2


class _LateInPlaceClassifier(_LateInPlace):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(super().forward(x).mean((2, 3)))


def test_a_session_counts_dropped_statistics_in_run_finished(monkeypatch):
    from inspector.core.inputs.preprocess import Preprocess
    from inspector.core.models.base import LoadedModel
    from inspector.core.records.frames import ActivationFrame, RunFinished
    from inspector.core.run.session import Session

    torch.manual_seed(0)
    model = _LateInPlaceClassifier().eval()
    session = Session()
    pre = Preprocess(crop_size=(16, 16), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)
    session.loaded = LoadedModel(model, "late", "test model", True, ["x", "y", "z"], pre,
                                 torch.device("cpu"))
    capture = CaptureSpec.leaves(model)
    def run():
        run_id = session.submit(torch.rand(3, 16, 16), capture=capture, gradients=False)
        frames = []
        while not (frames and isinstance(frames[-1], RunFinished)):
            frame = session.channel.get(timeout=30)
            assert frame is not None, "no RunFinished"
            if frame.run_id == run_id:
                frames.append(frame)
        return frames

    try:
        for _ in range(2):  # learn: nothing is modified in place yet
            assert run()[-1].frames_dropped == 0
        with _race_in_place(model, monkeypatch):
            frames = run()
        assert frames[-1].status == "ok" and frames[-1].frames_dropped == 1
        assert "a" not in {f.module for f in frames if isinstance(f, ActivationFrame)}
        assert run()[-1].frames_dropped == 0  # learned: computed in the hook now
    finally:
        session.close()
