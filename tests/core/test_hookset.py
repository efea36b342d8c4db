"""Hooks and model flags: every user of core.hookset leaves a model as it found it, also when
the forward raises."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from inspector.core.hookset import HookSet, ModelState, remaining_hooks
from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec


class Sabotage(nn.Module):
    """A small CNN whose forward, when told to, changes its own flags and then raises."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(0.1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4, 3)
        self.fail = False

    def forward(self, x):
        x = self.drop(self.relu(self.conv(x)))
        if self.fail:
            self.relu.inplace = not self.relu.inplace
            self.head.weight.requires_grad_(not self.head.weight.requires_grad)
            self.train(not self.training)
            raise RuntimeError("boom in the forward")
        return self.head(self.pool(x).flatten(1))


def _state(model: nn.Module):
    return (
        [(n, m.training, m.__dict__.get("inplace")) for n, m in model.named_modules()],
        [(n, p.requires_grad) for n, p in model.named_parameters()],
    )


def _sabotage() -> Sabotage:
    """Mixed flags, so that restoring 'the model's mode' alone would not pass."""
    model = Sabotage().train()
    model.drop.eval()
    model.conv.bias.requires_grad_(False)
    model.fail = True
    return model


def _capture(model, x):
    spec = CaptureSpec.for_modules(["conv", "relu", "head"], (INPUT, OUTPUT, GRAD_OUTPUT,
                                                               GRAD_INPUT), keep={"conv"})
    with Capture(model, spec), torch.enable_grad():
        model(x.requires_grad_(True))


def _lean_cam(model, x):
    from inspector.core.explain.cam.compute import compute_cams

    compute_cams(model, x, ["gradcam", "scorecam"], "conv")


def _cam_default_layer(model, x):
    from inspector.core.explain.cam.compute import compute_cams

    compute_cams(model, x, ["gradcam"])  # builds the tree: the probe runs first


def _tree(model, x):
    from inspector.core.models.tree import build_tree

    build_tree(model, x)


def _attribution(method):
    def run(model, x):
        from inspector.core.explain.attributions import attribute
        from inspector.core.explain.catalog import AttributionOptions

        attribute(model, x, None, method, AttributionOptions(ig_steps=3, smoothgrad_samples=2))

    return run


def _demo_accuracy(model, x):
    from inspector.demo.evaluate import accuracy

    dataset = [{"image": torch.zeros(3, 8, 8, dtype=torch.uint8), "label": 0}] * 2
    accuracy(model, dataset, batch_size=2)


USERS = {
    "Capture": _capture,
    "compute_cams": _lean_cam,
    "compute_cams default layer": _cam_default_layer,
    "build_tree": _tree,
    "saliency": _attribution("saliency"),
    "gxi": _attribution("gxi"),
    "smoothgrad": _attribution("smoothgrad"),
    "ig": _attribution("ig"),
    "demo accuracy": _demo_accuracy,
}


@pytest.mark.parametrize("user", list(USERS))
def test_a_raising_forward_leaves_no_hook_and_every_flag_as_it_was(user):
    model = _sabotage()
    before = _state(model)
    grad_mode = torch.is_grad_enabled()
    with pytest.raises(RuntimeError, match="boom in the forward"):
        USERS[user](model, torch.randn(1, 3, 8, 8))
    assert remaining_hooks(model) == []
    assert _state(model) == before
    assert torch.is_grad_enabled() == grad_mode
    assert all(p.grad is None for p in model.parameters())
    model.fail = False  # and the model still runs as it did
    with torch.no_grad():
        assert model(torch.randn(1, 3, 8, 8)).shape == (1, 3)


def test_model_state_sets_and_restores_mode_and_requires_grad():
    model = _sabotage()
    model.fail = False
    before = _state(model)
    with ModelState(model, training=False, requires_grad=False) as state:
        assert not any(m.training for m in model.modules())
        assert not any(p.requires_grad for p in model.parameters())
        assert state.disable_inplace(model.relu) and not model.relu.inplace
        assert not state.disable_inplace(model.conv)  # no such flag: nothing to do
    assert _state(model) == before


def test_model_state_eval_puts_a_training_module_in_eval_and_skips_a_model_in_eval(
        monkeypatch):
    model = Sabotage().eval()
    model.drop.train()  # one module left in training mode: eval() must reach it
    with ModelState(model) as state:
        state.eval()
        assert not any(m.training for m in model.modules())
    assert model.drop.training and not model.conv.training  # put back on exit
    model.eval()
    calls = []
    monkeypatch.setattr(model, "train", lambda mode=True: calls.append(mode))
    with ModelState(model) as state:
        state.eval()  # every module already in eval mode: no walk of Module.train
    assert calls == []


def test_hookset_removes_module_and_tensor_hooks_when_the_body_raises():
    model = Sabotage()
    seen = []
    x = torch.randn(1, 3, 8, 8, requires_grad=True)
    with pytest.raises(ValueError, match="in the body"), HookSet() as hooks:
        hooks.forward_pre(model.conv, lambda m, args: seen.append("pre"))
        hooks.forward(model.head, lambda m, args, out: seen.append("post"))
        out = model(x)
        hooks.tensor(out, lambda g: seen.append("grad"))
        assert len(hooks) == 3
        raise ValueError("in the body")
    assert remaining_hooks(model) == [] and seen == ["pre", "post"]
    out.sum().backward()  # the graph outlived the hooks: the tensor hook is gone too
    assert seen == ["pre", "post"]


def test_capture_gradient_hooks_do_not_outlive_the_run():
    model = Sabotage().eval()
    frames = []
    spec = CaptureSpec.for_modules(["conv", "head"], (GRAD_OUTPUT,))
    with Capture(model, spec, frames.append), torch.enable_grad():
        out = model(torch.randn(1, 3, 8, 8, requires_grad=True))
        torch.autograd.grad(out[0, 0], model.conv.weight, retain_graph=True)
    during = len(frames)
    assert during == 2
    out[0, 1].backward()  # a backward after the run, on the graph the caller kept
    assert len(frames) == during
