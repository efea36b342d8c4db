"""Capture correctness: what the hooks send equals what the modules computed."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from inspector.core.hookset import HookError, remaining_hooks, tensor_leaves
from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.stats.previews import PREVIEW_ELEMENTS, preview_shape


def _clone(value, memo=None):
    """Deep copy of tensors in nested args, keeping identity: MultiheadAttention takes
    another code path when query, key and value are one tensor."""
    memo = {} if memo is None else memo
    if isinstance(value, torch.Tensor):
        if id(value) not in memo:
            memo[id(value)] = value.detach().clone()
        return memo[id(value)]
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v, memo) for k, v in value.items()}
    return value


def _record_calls(model, x):
    """Reference: every module call's (args, kwargs), cloned before the module runs."""
    calls = []
    handles = [
        m.register_forward_pre_hook(
            lambda mod, a, kw, name=name: calls.append((name, *_clone((a, kw)))),
            with_kwargs=True,
        )
        for name, m in model.named_modules()
    ]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return calls


def _frames_by_key(frames, kind):
    return {(f.module, f.call, f.path): f for f in frames if f.kind == kind}


def _check_outputs_recomputed(model, x):
    model.eval()
    reference_calls = _record_calls(model, x)
    modules = dict(model.named_modules())
    frames = []
    spec = CaptureSpec.for_modules(modules, (OUTPUT,), full=frozenset(modules))
    with Capture(model, spec, frames.append), torch.no_grad():
        model(x)
    assert not remaining_hooks(model)
    got = _frames_by_key(frames, OUTPUT)
    seen_calls: dict[str, int] = {}
    compared = 0
    with torch.no_grad():
        for name, args, kwargs in reference_calls:
            call = seen_calls.get(name, 0)
            seen_calls[name] = call + 1
            # Recompute the module directly on a copy of the input it received.
            memo = {}
            out = modules[name](*_clone(args, memo), **_clone(kwargs, memo))
            for path, t in tensor_leaves(out):
                frame = got[(name, call, path)]
                assert frame.shape == tuple(t.shape), (name, path)
                diff = (torch.from_numpy(frame.full) - t).abs().max().item()
                assert diff == 0, f"{name} call {call} {path!r}: max abs diff {diff}"
                compared += 1
    return compared


@pytest.mark.parametrize(
    "arch, size",
    [("resnet18", 64), ("densenet121", 64), ("mobilenet_v3_small", 64), ("vit_b_16", 224)],
)
def test_outputs_equal_recomputation_torchvision(arch, size):
    torch.manual_seed(0)
    model = torchvision.models.get_model(arch, weights=None)
    x = torch.randn(1, 3, size, size)
    compared = _check_outputs_recomputed(model, x)
    assert compared >= len(list(model.modules())) - 15  # out_proj etc. never run on their own


class TwiceAndDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.act = nn.ReLU(inplace=True)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        h = self.act(self.conv(x))
        h = self.act(self.conv(h))  # the same modules, called twice
        feats = self.pool(h).flatten(1)
        return {"logits": self.fc(feats), "features": (feats, [h])}


def test_module_called_twice_and_dict_output():
    torch.manual_seed(0)
    model = TwiceAndDict()
    x = torch.randn(2, 3, 8, 8)
    _check_outputs_recomputed(model, x)
    frames = []
    spec = CaptureSpec.for_modules(["conv", "act", ""], (OUTPUT,))
    with Capture(model, spec, frames.append) as cap, torch.no_grad():
        model(x)
    assert cap.calls["conv"] == 2 and cap.calls["act"] == 2
    conv_calls = sorted(f.call for f in frames if f.module == "conv")
    assert conv_calls == [0, 1]
    root_paths = sorted(f.path for f in frames if f.module == "")
    assert root_paths == ["features.0", "features.1.0", "logits"]


def _live_outputs(model, x):
    """Reference forward keeping every module's live output tensor and its version."""
    live = []
    handles = [
        m.register_forward_hook(
            lambda mod, a, out, name=name: live.extend(
                (name, p, t, t._version) for p, t in tensor_leaves(out)
            )
        )
        for name, m in model.named_modules()
        if name
    ]
    try:
        out = model(x)
    finally:
        for h in handles:
            h.remove()
    return out, live


@pytest.mark.parametrize("arch", ["resnet18", "densenet121"])
def test_gradients_equal_autograd(arch):
    torch.manual_seed(0)
    model = torchvision.models.get_model(arch, weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    names = [n for n, _ in model.named_modules() if n]
    spec = CaptureSpec.for_modules(names, (GRAD_OUTPUT,), full=frozenset(names))
    frames = []
    with Capture(model, spec, frames.append), torch.enable_grad():
        xi = x.clone().requires_grad_(True)
        logits = model(xi)
        torch.autograd.grad(logits[0, 7], xi)
    got = _frames_by_key(frames, GRAD_OUTPUT)

    # Reference: autograd.grad of the same score w.r.t. the same tensors, on tensors that
    # nothing modified in place afterwards (for those, "the same tensor" no longer exists).
    with torch.enable_grad():
        xi = x.clone().requires_grad_(True)
        logits, live = _live_outputs(model, xi)
        kept = [(n, p, t) for n, p, t, v in live if t._version == v and t.requires_grad]
        grads = torch.autograd.grad(logits[0, 7], [t for _, _, t in kept], allow_unused=True)
    calls: dict[str, int] = {}
    compared = 0
    seen = set()
    for (name, path, t), g in zip(kept, grads, strict=True):
        key = (name, path, id(t))
        if key in seen:
            continue
        seen.add(key)
        call = calls.get((name, path), 0)
        calls[(name, path)] = call + 1
        if g is None:
            continue
        frame = got[(name, call, path)]
        rel = (torch.from_numpy(frame.full) - g).abs().max() / g.abs().max().clamp_min(1e-12)
        assert rel <= 1e-5, f"{name}: relative difference {rel:.3g}"
        compared += 1
    assert compared > 20
    assert not remaining_hooks(model)


@pytest.mark.parametrize("arch", ["resnet18", "densenet121"])
def test_grad_input_matches_definition_and_model_untouched(arch):
    torch.manual_seed(0)
    model = torchvision.models.get_model(arch, weights=None).eval()
    before = copy.deepcopy(model.state_dict())
    flags = [(m.training, getattr(m, "inplace", None)) for m in model.modules()]
    modules = dict(model.named_modules())
    leaves = [n for n, m in modules.items() if n and next(m.children(), None) is None]
    spec = CaptureSpec.for_modules(
        leaves, (INPUT, GRAD_OUTPUT, GRAD_INPUT), full=frozenset(leaves)
    )
    frames = []
    x = torch.randn(1, 3, 64, 64)
    with Capture(model, spec, frames.append), torch.enable_grad():
        xi = x.clone().requires_grad_(True)
        torch.autograd.grad(model(xi)[0, 3], xi)
    inputs = _frames_by_key(frames, INPUT)
    gouts = _frames_by_key(frames, GRAD_OUTPUT)
    gins = _frames_by_key(frames, GRAD_INPUT)
    assert gins, "no grad_input captured"
    checked = 0
    for (name, call, path), gin in gins.items():
        if (name, call, "") not in gouts or path != "0":
            continue
        # The definition: re-run the module on a detached copy of its input and
        # backpropagate the captured grad_output through it.
        inp = torch.from_numpy(inputs[(name, call, path)].full).clone().requires_grad_(True)
        with torch.enable_grad():
            # (through a clone: an in-place module may not modify a leaf)
            out = copy.deepcopy(modules[name])(inp.clone())
            (ref,) = torch.autograd.grad(out, inp, torch.from_numpy(gouts[(name, call, "")].full))
        rel = (torch.from_numpy(gin.full) - ref).abs().max() / ref.abs().max().clamp_min(1e-12)
        assert rel <= 1e-5, f"{name} call {call}: relative difference {rel:.3g}"
        checked += 1
    # Every call of every leaf (the input image requires grad, so conv1 counts too).
    assert checked == len(gouts)
    assert not remaining_hooks(model)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert flags == [(m.training, getattr(m, "inplace", None)) for m in model.modules()]


class Exploding(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.fail = False

    def forward(self, x):
        x = self.a(x)
        if self.fail:
            raise RuntimeError("boom inside the model")
        return self.b(x)


def _assert_clean(model):
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks


def test_hook_that_raises_leaves_no_hooks_and_next_run_works():
    model = Exploding()
    spec = CaptureSpec.leaves(model, (OUTPUT, GRAD_OUTPUT))

    def bad_sink(frame):
        if frame.module == "b":
            raise ValueError("sink failed")

    with pytest.raises(HookError) as info:
        with Capture(model, spec, bad_sink):
            model(torch.randn(1, 4))
    assert info.value.module == "b" and "sink failed" in str(info.value)
    _assert_clean(model)
    frames = []
    with Capture(model, spec, frames.append):
        model(torch.randn(1, 4))
    assert {f.module for f in frames} == {"a", "b"}
    _assert_clean(model)


def test_module_that_raises_leaves_no_hooks_and_names_itself():
    model = Exploding()
    model.fail = True
    spec = CaptureSpec.for_modules(["", "a", "b"], (OUTPUT,))
    with pytest.raises(RuntimeError, match="boom"):
        with Capture(model, spec) as cap:
            model(torch.randn(1, 4))
    assert cap.error_module == ""  # the model itself was running when it raised
    _assert_clean(model)
    model.fail = False
    frames = []
    with Capture(model, spec, frames.append):
        model(torch.randn(1, 4))
    assert len(frames) == 3


def test_training_flag_restored_when_forward_raises():
    model = Exploding().train()
    model.fail = True
    with pytest.raises(RuntimeError):
        with Capture(model, CaptureSpec.leaves(model)):
            model.eval()
            model(torch.randn(1, 4))
    assert all(m.training for m in model.modules())


def test_unknown_module_is_a_clear_error():
    model = Exploding()
    with pytest.raises(KeyError, match="no module named 'nope'"):
        with Capture(model, CaptureSpec.for_modules(["nope"])):
            pass
    _assert_clean(model)


def test_stats_match_numpy():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 5, 3), nn.ReLU())
    frames = []
    with Capture(model, CaptureSpec.leaves(model, full=frozenset({"1"})), frames.append):
        model(torch.randn(2, 3, 9, 9))
    f = next(f for f in frames if f.module == "1")
    a = f.full.astype("float64")
    st = f.stats
    assert st.mean == pytest.approx(a.mean(), rel=1e-5)
    assert st.std == pytest.approx(a.std(), rel=1e-4)
    assert st.min == a.min() and st.max == a.max()
    assert st.zero_fraction == pytest.approx((a == 0).mean())
    assert st.abs_mean == pytest.approx(abs(a).mean(), rel=1e-5)
    per_channel = a.transpose(1, 0, 2, 3).reshape(5, -1)
    assert st.channel_std == pytest.approx(per_channel.std(1), rel=1e-4, abs=1e-6)
    assert st.channel_zero_fraction == pytest.approx((per_channel == 0).mean(1))


def test_preview_is_a_copy_and_reduced():
    model = nn.Sequential(nn.Conv2d(3, 80, 1), nn.ReLU(inplace=True))
    frames = []
    spec = CaptureSpec.leaves(model, preview=frozenset({"0"}), preview_size=16)
    x = torch.randn(1, 3, 40, 40)
    with torch.no_grad():
        conv = model[0](x)
    with Capture(model, spec, frames.append), torch.no_grad():
        out = model(x)
    f = next(f for f in frames if f.module == "0")
    # Every channel (the window pages through them); 40 > 16: means of 3 x 3 cells (the
    # smallest whole factor that fits), the last one clipped to the single remaining row
    # and column.
    assert f.preview.shape == (80, 14, 14)
    np.testing.assert_allclose(f.preview[:, 0, 0], conv[0, :, :3, :3].mean((1, 2)),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f.preview[:, -1, -1], conv[0, :, 39, 39], rtol=1e-5, atol=1e-6)
    # The ReLU ran in place on conv's output after the hook: the preview must still hold
    # the negative values the conv produced.
    assert f.preview.min() < 0 and out.min() >= 0


@pytest.mark.parametrize("channels, side, pooled", [(512, 7, (512, 7, 7)),
                                                    (256, 56, (256, 28, 28)),
                                                    (2048, 7, (2048, 7, 7)),
                                                    (64, 112, (64, 56, 56))])
def test_previews_keep_every_channel_within_the_budget(channels, side, pooled):
    # resnet's layer4, layer1 of resnet50, resnet50's layer4, conv1: every channel comes,
    # each averaged down until all fit PREVIEW_ELEMENTS (the cost of the old 64 channels).
    model = nn.Sequential(nn.Identity())
    spec = CaptureSpec.leaves(model, preview=frozenset({"0"}))
    frames = []
    x = torch.randn(1, channels, side, side)
    with Capture(model, spec, frames.append), torch.no_grad():
        model(x)
    (f,) = frames
    assert f.preview.shape == pooled == preview_shape((channels, side, side))
    assert f.preview.size <= PREVIEW_ELEMENTS
    f_ = side // pooled[1]
    expect = x[0, -1, :f_, :f_].mean().item()  # the last channel is there, averaged
    assert f.preview[-1, 0, 0] == pytest.approx(expect, rel=1e-5, abs=1e-6)


def test_a_capture_can_still_ask_for_the_first_channels_only():
    model = nn.Sequential(nn.Identity())
    spec = CaptureSpec.leaves(model, preview=frozenset({"0"}), preview_channels=10)
    frames = []
    with Capture(model, spec, frames.append), torch.no_grad():
        model(torch.randn(1, 300, 8, 8))
    assert frames[0].preview.shape == (10, 8, 8)


def test_a_failing_module_is_named_even_when_nothing_hooks_it():
    # The failing Linear (wrong input size) sits inside a Sequential inside the model, and
    # the spec captures only a sibling: the name comes from the traceback, not from hooks.
    inner = nn.Sequential(nn.ReLU(), nn.Linear(5, 2))
    model = nn.Sequential(nn.Linear(4, 3), inner)
    spec = CaptureSpec.for_modules(["0"], (OUTPUT,))
    with pytest.raises(RuntimeError):
        with Capture(model, spec) as cap:
            model(torch.randn(1, 4))
    assert cap.error_module == "1.1"
    _assert_clean(model)
    with Capture(model, spec) as cap:  # a run that does not fail names nothing
        model[0](torch.randn(1, 4))
    assert cap.error_module is None
