"""Edits: each one through the Session equals the same edit written by hand as a hook; specs
are read and checked against the model; nothing is left on the model afterwards."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from inspector.core.edits.interventions import (
    AddNoise,
    Clamp,
    KeepChannels,
    Occlude,
    ReplaceWithMean,
    ScaleChannels,
    ScaleGradient,
    ZeroChannels,
)
from inspector.core.edits.spec import EditSpecError, check_edits, format_edit, parse_edit
from inspector.core.hookset import remaining_hooks
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import build_tree
from inspector.core.records.frames import GradientFrame
from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session

# -- models -----------------------------------------------------------------------------------


class Gate(nn.Module):
    """An output with no channel dimension: (B,)."""

    def forward(self, x):
        return torch.sigmoid(x.mean(dim=(1, 2, 3)))


class Pair(nn.Module):
    def forward(self, x):
        return x, x


class TinyConv(nn.Module):
    """A conv net with an output without channels, a tuple output and a module never called."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.act = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(6, 6, 3, padding=1)
        self.gate = Gate()
        self.pair = Pair()
        self.unused = nn.Linear(2, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        h = self.conv2(self.act(self.bn(self.conv(x))))
        h = self.pair(h)[0]
        return self.fc(self.pool(h).flatten(1)) * (1 + self.gate(h))[:, None]


class ChannelsLast(nn.Module):
    """Blocks that work on (B, H, W, C) tensors, as torchvision's ConvNeXt and Swin do."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 4, stride=4)
        self.mlp = nn.Linear(5, 7)
        self.fc = nn.Linear(7, 4)

    def forward(self, x):
        h = self.mlp(self.conv(x).permute(0, 2, 3, 1))  # (B, 4, 4, 7)
        return self.fc(h.mean(dim=(1, 2)))


PRE = Preprocess(crop_size=(16, 16), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)


def session_with(model: nn.Module, size: int = 16) -> Session:
    torch.manual_seed(0)
    for m in model.modules():  # BatchNorm statistics that are not the identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    s = Session()
    s.loaded = LoadedModel(model.eval(), "test", "test model", True, ["a", "b", "c", "d"], PRE,
                           torch.device("cpu"))
    s.tree = build_tree(model, torch.zeros(1, 3, size, size))
    return s


@pytest.fixture
def tiny():
    s = session_with(TinyConv())
    yield s
    s.close()


def by_hand(model: nn.Module, x: torch.Tensor, module: str, edit) -> torch.Tensor:
    """The model's logits with `edit(output)` as a plain forward hook on `module`."""
    target = dict(model.named_modules())[module]
    handle = target.register_forward_hook(lambda mod, args, out: edit(out))
    try:
        with torch.no_grad():
            return model(x)
    finally:
        handle.remove()


def channel_mask(n: int, channels, value: float, keep: bool = False) -> torch.Tensor:
    mask = torch.full((n,), value) if keep else torch.ones(n)
    mask[list(channels)] = 1.0 if keep else value
    return mask


def noise_of(shape, std: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return std * torch.randn(shape, generator=gen)


# Each spec, and the same edit written by hand on the module's (B, C, H, W) output.
DEMO_CASES = [
    ("stage2.0.conv:zero=3,17", lambda o: o * channel_mask(64, [3, 17], 0.0)[:, None, None]),
    ("stage1.1.relu:keep=5", lambda o: o * channel_mask(32, [5], 0.0, keep=True)[:, None, None]),
    ("stage2:scale=0.5", lambda o: o * 0.5),
    ("stage3.0.bn:scale=-2,1,40", lambda o: o * channel_mask(96, [1, 40], -2.0)[:, None, None]),
    ("stage1.0.bn:clamp=-1,1", lambda o: o.clamp(-1, 1)),
    ("stem:clamp=,0.25", lambda o: o.clamp(max=0.25)),
    ("stage2.1.conv:noise=0.1,7", lambda o: o + noise_of(o.shape, 0.1, 7)),
    ("stage3.1.conv:mean", lambda o: o.mean(dim=(2, 3), keepdim=True).expand_as(o)),
    ("head:zero=0", lambda o: o * channel_mask(o.shape[1], [0], 0.0)),
]


@pytest.mark.parametrize("spec, edit", DEMO_CASES, ids=[c[0] for c in DEMO_CASES])
def test_each_edit_equals_the_same_edit_written_as_a_hook(demo_session, spec, edit):
    model = demo_session.loaded.model
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(1))
    edits = check_edits([parse_edit(spec)], demo_session.tree, demo_session.loaded.preprocess.crop_size)
    plain = demo_session.run(x)
    edited = demo_session.run(x, interventions=edits)
    demo_session.channel.drain()
    assert edited.status == "ok", edited.error
    module = edits[0].module
    expected = by_hand(model, x, module, edit)
    assert torch.allclose(edited.logits, expected, rtol=0, atol=1e-5)
    assert not torch.allclose(edited.logits, plain.logits, rtol=0, atol=1e-4)  # it did edit
    assert not remaining_hooks(model)
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in state.items())


def test_occlusion_equals_filling_the_input_by_hand(demo_session):
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(2))
    spec = "input:occlude=10,20,70,90"
    edits = check_edits([parse_edit(spec)], demo_session.tree, (128, 128))
    edited = demo_session.run(x, interventions=edits)
    demo_session.channel.drain()
    filled = x.clone()
    filled[..., 20:90, 10:70] = 0.0
    with torch.no_grad():
        expected = demo_session.loaded.model(filled)
    assert torch.allclose(edited.logits, expected, rtol=0, atol=1e-5)
    assert not torch.allclose(edited.logits, demo_session.run(x).logits, atol=1e-4)
    assert not remaining_hooks(demo_session.loaded.model)
    demo_session.channel.drain()


def test_edits_on_a_tiny_net_equal_hand_written_hooks(tiny):
    model = tiny.loaded.model
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    cases = [
        (ZeroChannels("conv2", channels=(0, 5)), "conv2",
         lambda o: o * channel_mask(6, [0, 5], 0.0)[:, None, None]),
        (KeepChannels("bn", channels=(2,)), "bn",
         lambda o: o * channel_mask(6, [2], 0.0, keep=True)[:, None, None]),
        (AddNoise("conv", std=0.3, seed=11), "conv", lambda o: o + noise_of(o.shape, 0.3, 11)),
        (ReplaceWithMean("conv2"), "conv2", lambda o: o.mean(dim=(2, 3), keepdim=True).expand_as(o)),
        (Clamp("fc", min=0.0), "fc", lambda o: o.clamp(min=0.0)),
    ]
    for edit, module, hand in cases:
        (checked,) = check_edits([edit], tiny.tree, (16, 16))
        got = tiny.run(x, interventions=(checked,))
        assert got.status == "ok", got.error
        assert torch.allclose(got.logits, by_hand(model, x, module, hand), rtol=0, atol=1e-5)
    tiny.channel.drain()
    assert not remaining_hooks(model)


def test_channels_last_outputs_are_edited_on_their_last_dim():
    s = session_with(ChannelsLast())
    try:
        (edit,) = check_edits([parse_edit("mlp:zero=1,6")], s.tree, (16, 16))
        assert edit.dim == -1  # the (1, 4, 4, 7) output is channels last
        x = torch.randn(1, 3, 16, 16)
        got = s.run(x, interventions=(edit,))
        expected = by_hand(s.loaded.model, x, "mlp", lambda o: o * channel_mask(7, [1, 6], 0.0))
        assert torch.allclose(got.logits, expected, rtol=0, atol=1e-5)
        # Read as channels first, channel 6 would not even exist (dim 1 has 4).
        (first,) = check_edits([parse_edit("conv:zero=4")], s.tree, (16, 16))
        assert first.dim is None
        with pytest.raises(EditSpecError, match="out of range"):
            check_edits([ZeroChannels("mlp", channels=(6,), dim=1)], s.tree, (16, 16))
    finally:
        s.close()


# -- gradients ----------------------------------------------------------------------------------


def gradients(session, x, edits, modules):
    """(module, kind) -> the whole gradient tensor of one run."""
    spec = CaptureSpec(
        modules={m: frozenset({GRAD_OUTPUT, GRAD_INPUT}) for m in modules},
        full=frozenset(modules), stats=False,
    )
    out = session.run(x, capture=spec, interventions=edits, target=0)
    assert out.status == "ok", out.error
    return {(f.module, f.kind): torch.from_numpy(f.full) for f in session.channel.drain()
            if isinstance(f, GradientFrame) and f.call == 0}


@pytest.mark.parametrize("k", [0.5, 4.0])
def test_grad_scale_multiplies_every_gradient_upstream_exactly(demo_session, k):
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(4))
    upstream = ["stem.conv", "stage1.0.conv", "stage2.0.bn", "stage2.1.relu"]
    downstream = ["stage3.0.conv", "head"]
    edit = parse_edit(f"stage2:grad-scale={k:g}")
    assert edit == ScaleGradient("stage2", factor=k)
    plain = gradients(demo_session, x, (), upstream + downstream)
    edited = gradients(demo_session, x, (edit,), upstream + downstream)
    assert set(plain) == set(edited)
    # stem.conv's input gradient is the gradient w.r.t. the model input.
    assert ("stem.conv", GRAD_INPUT) in plain
    for (module, kind), g in plain.items():
        # k is a power of two: scaling commutes with every rounding, so equal bit for bit.
        want = g * k if module in upstream else g
        assert torch.equal(edited[(module, kind)], want), (module, kind)
        assert g.abs().sum() > 0
    assert not remaining_hooks(demo_session.loaded.model)


def test_grad_scale_leaves_the_forward_alone(demo_session):
    x = torch.rand(1, 3, 128, 128)
    plain = demo_session.run(x)
    edited = demo_session.run(x, interventions=(ScaleGradient("stage2", factor=0.5),))
    demo_session.channel.drain()
    assert torch.equal(plain.logits, edited.logits)


# -- reading specs ------------------------------------------------------------------------------


GOOD = [
    ("layer4.1.conv2:zero=3,17", ZeroChannels("layer4.1.conv2", channels=(3, 17))),
    ("layer4:zero=3, 3 ,17", ZeroChannels("layer4", channels=(3, 17))),
    ("layer4:keep=3", KeepChannels("layer4", channels=(3,))),
    ("layer4:scale=0.5", ScaleChannels("layer4", factor=0.5)),
    ("layer4:scale=2,0,1", ScaleChannels("layer4", channels=(0, 1), factor=2.0)),
    ("layer4:clamp=-1,1", Clamp("layer4", min=-1.0, max=1.0)),
    ("layer4:clamp=0,", Clamp("layer4", min=0.0)),
    ("layer4:noise=0.1,7", AddNoise("layer4", std=0.1, seed=7)),
    ("layer4:noise=0.1", AddNoise("layer4", std=0.1, seed=None)),
    ("layer4:mean", ReplaceWithMean("layer4")),
    ("layer4:grad-scale=0.5", ScaleGradient("layer4", factor=0.5)),
    ("input:occlude=1,2,30,40", Occlude("", box=(1, 2, 30, 40))),
    (":occlude=1,2,30,40,-1.5", Occlude("", box=(1, 2, 30, 40), value=-1.5)),
    (":scale=3", ScaleChannels("", factor=3.0)),  # the model's own output
    ("odd:name:zero=1", ZeroChannels("odd:name", channels=(1,))),  # the last ':' before an op
]


@pytest.mark.parametrize("spec, edit", GOOD, ids=[g[0] for g in GOOD])
def test_parse_edit_reads_each_op(spec, edit):
    assert parse_edit(spec) == edit
    assert parse_edit(format_edit(edit)) == edit  # and writes it back


BAD = [
    ("layer4", "expected MODULE:OP"),
    ("layer4:zap=1", "unknown operation 'zap'"),
    ("layer4:zer=1", "did you mean zero"),
    ("layer4:zero", "zero needs arguments"),
    ("layer4:zero=", "zero needs arguments"),
    ("layer4:zero=a", "whole numbers, got 'a'"),
    ("layer4:zero=-1", "count from 0"),
    ("layer4:scale=big", "must be a number"),
    ("layer4:scale=nan", "finite"),
    ("layer4:clamp=1", "MIN,MAX"),
    ("layer4:clamp=2,1", "above its maximum"),
    ("layer4:clamp=,", "at least one bound"),
    ("layer4:noise=-0.1", "cannot be negative"),
    ("layer4:noise=0.1,1.5", "seed must be whole"),
    ("layer4:mean=2", "takes no arguments"),
    ("layer4:occlude=0,0,5,5", "edits the model input"),
    ("input:occlude=0,0,5", "X0,Y0,X1,Y1"),
    ("input:occlude=5,0,5,5", "empty"),
]


@pytest.mark.parametrize("spec, message", BAD, ids=[b[0] for b in BAD])
def test_parse_edit_names_the_spec_and_what_is_wrong(spec, message):
    with pytest.raises(EditSpecError) as info:
        parse_edit(spec)
    text = str(info.value)
    assert f"'{spec}'" in text and message in text
    assert "\n" not in text
    assert isinstance(info.value, ValueError)


# -- checking against the model -----------------------------------------------------------------


@pytest.mark.parametrize("edit, message", [
    (ZeroChannels("cnov2", channels=(1,)), "no module named 'cnov2' in this model (did you "
                                           "mean conv2"),
    (ZeroChannels("conv2", channels=(1, 6, 9)), "channels [6, 9] out of range"),
    (KeepChannels("gate", channels=(0,)), "has no channel dimension"),
    (ReplaceWithMean("gate"), "has no channel dimension"),
    (Clamp("pair", max=1.0), "returns a tuple"),
    (ScaleGradient("unused", factor=2.0), "never called"),
    (Occlude("", box=(0, 0, 17, 4)), "not inside the model input of 16 x 16"),
])
def test_check_edits_refuses_what_the_model_cannot_take(tiny, edit, message):
    with pytest.raises(EditSpecError) as info:
        check_edits([ScaleChannels("conv", factor=2.0), edit], tiny.tree, (16, 16))
    assert message in str(info.value)
    assert format_edit(edit) in str(info.value)


def test_check_edits_passes_good_edits_through(tiny):
    edits = [ScaleChannels("conv", factor=2.0), ScaleChannels("gate", factor=0.5),
             Occlude("", box=(0, 0, 16, 16)), ZeroChannels("", channels=(3,))]
    assert check_edits(edits, tiny.tree, (16, 16)) == tuple(edits)


def test_a_failing_edit_is_a_run_error_and_leaves_no_hook(tiny):
    # Not checked first: the run reports the module, and the next run is clean.
    out = tiny.run(torch.rand(3, 16, 16), interventions=(ZeroChannels("conv2", channels=(9,)),))
    assert out.status == "error" and "conv2" in out.error
    tiny.channel.drain()
    assert not remaining_hooks(tiny.loaded.model)
    assert tiny.run(torch.rand(3, 16, 16)).status == "ok"
    tiny.channel.drain()


def test_the_session_checks_edits_against_its_model(demo_session):
    (edit,) = demo_session.check_edits([parse_edit("stage3.1.relu:keep=95")])
    assert edit == KeepChannels("stage3.1.relu", channels=(95,))
    with pytest.raises(EditSpecError, match="channels \\[96\\] out of range"):
        demo_session.check_edits([KeepChannels("stage3.1.relu", channels=(96,))])
    empty = Session()
    try:
        with pytest.raises(EditSpecError, match="no model is loaded"):
            empty.check_edits([edit])
    finally:
        empty.close()


def test_score_cam_and_attributions_explain_the_edited_model(demo_session):
    """Score-CAM's masked forwards and the attributions run the model after the run's own
    forward: the edits are on for them too (occlusion equals one computed by hand on the
    model with the same edit as a plain hook)."""
    from inspector.core.edits.interventions import ZeroChannels
    from inspector.core.explain.occlusion import occlusion_sensitivity

    x = torch.rand(1, 3, 128, 128)
    edit = ZeroChannels("stage3.1.conv", tuple(range(0, 96, 2)))
    plain = demo_session.run(x, gradients=False, attributions=("occlusion",))
    edited = demo_session.run(x, gradients=False, attributions=("occlusion",), interventions=(edit,))
    assert plain.status == edited.status == "ok"
    model = demo_session.loaded.model
    module = dict(model.named_modules())["stage3.1.conv"]
    handle = module.register_forward_hook(lambda m, a, out: edit.edit_output(out, 0))
    try:
        expected = occlusion_sensitivity(model, x, edited.target)[0].numpy()[0]
    finally:
        handle.remove()
    assert remaining_hooks(model) == []
    assert not torch.allclose(torch.from_numpy(plain.attributions["occlusion"]),
                              torch.from_numpy(expected))
    assert torch.allclose(torch.from_numpy(edited.attributions["occlusion"]),
                          torch.from_numpy(expected), atol=1e-5)


def test_a_tensor_given_as_the_image_is_left_as_it_was(demo_session):
    x = torch.rand(1, 3, 128, 128)
    before = x.clone()
    outcome = demo_session.run(x, interventions=(parse_edit("input:occlude=0,0,64,64"),))
    assert outcome.status == "ok"
    assert not x.requires_grad and torch.equal(x, before)


def test_score_cam_runs_the_edited_model_too(demo_session):
    """Score-CAM's masked forwards see the run's edits: its map equals the one of a plain
    run of the model with the same edit as a hook written by hand."""
    from inspector.core.edits.interventions import ScaleChannels

    x = torch.rand(1, 3, 128, 128)
    edit = ScaleChannels("stage3.1.conv", tuple(range(48)), 0.0)
    edited = demo_session.run(x, gradients=False, cams=(("scorecam", None),), interventions=(edit,))
    model = demo_session.loaded.model
    module = dict(model.named_modules())["stage3.1.conv"]
    handle = module.register_forward_hook(lambda m, a, out: edit.edit_output(out, 0))
    try:
        by_hand = demo_session.run(x, gradients=False, cams=(("scorecam", None),))
    finally:
        handle.remove()
    assert edited.status == by_hand.status == "ok"
    (key,) = edited.cams
    assert np.allclose(edited.cams[key], by_hand.cams[key], atol=1e-5)
