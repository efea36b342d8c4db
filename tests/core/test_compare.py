"""Comparisons between runs: the measures alone (core.compare.divergence), and the Session keeping a
run's outputs and comparing a later run with them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from inspector.core.compare.divergence import KEPT_RUNS, KeptOutputs, _from_sums, _sums
from inspector.core.edits.interventions import ScaleChannels, ZeroChannels
from inspector.core.hookset import remaining_hooks
from inspector.core.records.frames import DivergenceFrame
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session

# -- the measures -------------------------------------------------------------------------------


def rel_l2_cosine(a, b):
    """||b - a|| / ||a|| and cos(a, b): the sums an OutputRecorder's hook takes, read as it
    reads them when the run ends."""
    return _from_sums(*_sums(a, b).tolist())


def test_rel_l2_and_cosine_of_known_pairs():
    a = torch.tensor([[3.0, 4.0]])
    assert rel_l2_cosine(a, a.clone()) == (0.0, 1.0)
    assert rel_l2_cosine(a, 2 * a) == pytest.approx((1.0, 1.0))
    assert rel_l2_cosine(a, -a) == pytest.approx((2.0, -1.0))
    assert rel_l2_cosine(a, torch.tensor([[-4.0, 3.0]])) == pytest.approx((math.sqrt(2), 0.0))
    # Over the whole tensor, whatever its shape; half precision is measured in float32.
    x = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(0))
    y = x + 0.1 * torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    rel, cos = rel_l2_cosine(x, y)
    assert rel == pytest.approx(float((y - x).norm() / x.norm()), rel=1e-5)
    assert cos == pytest.approx(float(torch.nn.functional.cosine_similarity(
        x.flatten(), y.flatten(), dim=0)), abs=1e-6)
    assert rel_l2_cosine(x.half(), y.half()) == pytest.approx((rel, cos), rel=1e-2)


def test_all_zero_outputs():
    z = torch.zeros(1, 4)
    assert rel_l2_cosine(z, z) == (0.0, 1.0)  # identical, as two dead layers are
    rel, cos = rel_l2_cosine(z, torch.ones(1, 4))
    assert math.isinf(rel) and math.isnan(cos)
    rel, cos = rel_l2_cosine(torch.ones(1, 4), z)
    assert rel == 1.0 and math.isnan(cos)


def test_a_kept_output_modified_in_place_is_dropped_not_shown_wrong():
    t = torch.ones(3)
    kept = KeptOutputs(1, {"relu": (t, t._version), "fc": (torch.ones(2), 0)})
    assert torch.equal(kept.get("relu"), torch.ones(3))
    t.mul_(2)
    assert kept.get("relu") is None
    assert kept.modules() == ["fc"] and len(kept) == 1


# -- through the Session ------------------------------------------------------------------------


@pytest.fixture
def session(demo_session):
    demo_session.forget_outputs()
    demo_session.channel.drain()
    yield demo_session
    demo_session.forget_outputs()
    demo_session.channel.drain()


def image(seed=0, size=128):
    return torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(seed))


def test_the_same_image_twice_does_not_diverge_anywhere(session):
    # The demo's BatchNorm outputs are modified in place by the ReLU after them: kept by
    # reference they would hold the ReLU's values, and the comparison would see a difference.
    x = image()
    a = session.run(x, keep_outputs=True)
    b = session.run(x, compare_with=a.run_id)
    d = b.divergence
    assert b.status == "ok" and b.notes == []
    leaves = [n for n in session.tree.order if n and session.tree[n].is_leaf]
    assert list(d.modules) == leaves  # the default capture: every leaf, in forward order
    assert d.reference_run == a.run_id and d.run_id == b.run_id
    assert np.all(d.rel_l2 == 0.0) and np.all(d.cosine == 1.0)
    assert not remaining_hooks(session.loaded.model)


def test_an_edit_diverges_from_the_module_it_edits_on(session):
    x = image(1)
    a = session.run(x, keep_outputs=True)
    session.channel.drain()
    edit = ZeroChannels("stage2.0.conv", channels=(1, 2, 3))
    b = session.run(x, compare_with=a.run_id, interventions=(edit,))
    frames = [f for f in session.channel.drain() if isinstance(f, DivergenceFrame)]
    assert frames == [b.divergence]  # the same frame on the channel as in the outcome
    d = b.divergence
    at = d.modules.index("stage2.0.conv")
    assert np.all(d.rel_l2[:at] == 0.0) and np.all(d.cosine[:at] == 1.0)
    assert np.all(d.rel_l2[at:] > 0) and np.all(d.cosine[at:] < 1.0)
    assert d.modules[at:at + 3] == ("stage2.0.conv", "stage2.0.bn", "stage2.0.relu")
    # The distance is that of the module's whole output: here, 3 zeroed channels.
    plain = session.run(x, capture=CaptureSpec.for_modules(["stage2.0.conv"],
                                                           full=frozenset({"stage2.0.conv"})))
    full = next(f.full for f in session.channel.drain() if getattr(f, "full", None) is not None)
    assert plain.status == "ok"
    out = torch.from_numpy(full)
    expected = float(out[:, 1:4].norm() / out.norm())
    assert d.rel_l2[at] == pytest.approx(expected, rel=1e-5)


def test_only_captured_modules_are_compared_and_a_shape_change_leaves_modules_out(session):
    spec = CaptureSpec.for_modules(["stem", "stage1", "stage3", "pool", "head"])
    a = session.run(image(2), capture=spec, keep_outputs=True)
    b = session.run(image(3, size=96), capture=spec, compare_with=a.run_id)
    # 96 x 96 gives other spatial sizes; the pooled features and logits still compare.
    assert b.divergence.modules == ("pool", "head")
    assert np.all(b.divergence.rel_l2 > 0)


def test_at_most_the_latest_kept_runs_and_a_comparison_counts_as_use(session, monkeypatch):
    x = image(4)
    assert session.keep_runs == KEPT_RUNS
    monkeypatch.setattr(session, "keep_runs", 2)  # the bound under test
    plain = session.run(x)  # asks for nothing: keeps nothing
    assert session.kept_runs() == ()
    first = session.run(x, keep_outputs=True).run_id
    second = session.run(x, keep_outputs=True).run_id
    assert session.kept_runs() == (first, second)
    session.run(x, compare_with=first)  # used: now the most recent
    assert session.kept_runs() == (second, first)
    third = session.run(x, keep_outputs=True).run_id
    assert session.kept_runs() == (first, third)
    session.channel.drain()
    gone = session.run(x, compare_with=second)
    frames = session.channel.drain()
    # The run is fine; the comparison could not be made, and says so in one line.
    assert gone.status == "ok" and gone.divergence is None
    assert not any(isinstance(f, DivergenceFrame) for f in frames)
    assert len(gone.notes) == 1 and f"run {second}" in gone.notes[0]
    assert "\n" not in gone.notes[0]
    assert torch.equal(gone.logits, plain.logits)
    session.forget_outputs(first)
    assert session.kept_runs() == (third,)


def test_a_failed_run_keeps_nothing(session):
    bad = ZeroChannels("stage2.0.conv", channels=(999,))
    out = session.run(image(5), keep_outputs=True, interventions=(bad,))
    assert out.status == "error"
    assert session.kept_runs() == ()
    assert not remaining_hooks(session.loaded.model)


def test_a_run_that_keeps_and_compares_at_once(session):
    x = image(6)
    a = session.run(x, keep_outputs=True)
    b = session.run(x, keep_outputs=True, compare_with=a.run_id,
                    interventions=(ScaleChannels("head", factor=2.0),))
    c = session.run(x, compare_with=b.run_id)
    # c (unedited) against b: only the scaled head differs, by a factor 2 back: 1/2.
    assert c.divergence.modules[-1] == "head"
    assert np.all(c.divergence.rel_l2[:-1] == 0.0)
    assert c.divergence.rel_l2[-1] == pytest.approx(0.5, rel=1e-6)
    assert b.divergence.rel_l2[-1] == pytest.approx(1.0, rel=1e-6)


class Tokens(torch.nn.Module):
    def forward(self, x):
        return x.flatten(2).transpose(1, 2)  # (B, 64, 3)


class ClassToken(torch.nn.Module):
    def forward(self, t):
        return t[:, 0]  # a view of one token: (B, 3)


def test_kept_outputs_are_float32_cpu_and_small_views_do_not_hold_their_base():
    from inspector.core.inputs.preprocess import Preprocess
    from inspector.core.models.base import LoadedModel
    from inspector.core.models.tree import build_tree

    model = torch.nn.Sequential(Tokens(), ClassToken(), torch.nn.Linear(3, 2)).eval()
    s = Session()
    pre = Preprocess(crop_size=(8, 8), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)
    s.loaded = LoadedModel(model, "t", "t", True, ["a", "b"], pre, torch.device("cpu"))
    s.tree = build_tree(model, torch.zeros(1, 3, 8, 8))
    try:
        x = torch.rand(1, 3, 8, 8)
        run = s.run(x, keep_outputs=True)
        kept = s.kept_outputs(run.run_id)
        assert list(kept) == ["0", "1", "2"]
        assert all(t.dtype == torch.float32 and t.device.type == "cpu" for t in kept.values())
        assert torch.equal(kept["1"], x.flatten(2).transpose(1, 2)[:, 0])
        # The class token is 3 values: kept alone, not with the 64 tokens it was a view of.
        assert kept["1"].untyped_storage().nbytes() == 3 * 4
        assert torch.equal(kept["2"], run.logits)
        assert s.kept_outputs(run.run_id + 1) is None
    finally:
        s.close()
