"""Activation patching: the patch edit against a hand-written pair of hooks (logits exact),
and the patch sweep (core.compare.patch_sweep): its last module is image A's run, a chain
recovers everywhere, an unused branch nowhere, its batched rows equal one-by-one patched
runs, an aliasing output is not written through, a reused module is patched at each call;
`analyse --edit MODULE:patch=PATH` and `analyse --patch-sweep PATH`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from inspector import cli
from inspector.core.compare.patch_sweep import patch_sweep, sweep_modules
from inspector.core.edits.spec import EditSpecError, format_edit, parse_edit
from inspector.core.hookset import remaining_hooks
from inspector.core.inputs.images import load_image
from inspector.core.models.tree import build_tree
from inspector.core.run.sweep_job import submit_patch_sweep

ROOT = Path(__file__).resolve().parents[2]
A = ROOT / "resources" / "demo" / "samples" / "circle_01.png"
B = ROOT / "resources" / "demo" / "samples" / "heart_01.png"


def hand_patched(model: nn.Module, module: str, a: torch.Tensor, b: torch.Tensor):
    """B's logits with `module`'s outputs (each call) stored from a run on A: two plain hooks."""
    mod = dict(model.named_modules())[module]
    stored = []
    h = mod.register_forward_hook(lambda m, i, o: stored.append(o.detach().clone()))
    with torch.no_grad():
        model(a)
    h.remove()
    calls = iter(stored)
    h = mod.register_forward_hook(lambda m, i, o: next(calls))
    with torch.no_grad():
        out = model(b)
    h.remove()
    return out


def _inputs(loaded):
    return (loaded.preprocess(load_image(A))[None], loaded.preprocess(load_image(B))[None])


def test_the_spec_reads_and_writes_back():
    edit = parse_edit(f"stage3.1:patch={A}")
    assert edit.module == "stage3.1" and edit.source == str(A)
    assert format_edit(edit) == f"stage3.1:patch={A}"
    assert parse_edit("x:patch=C:/pics/a.png").source == "C:/pics/a.png"
    with pytest.raises(EditSpecError, match="patch needs arguments"):
        parse_edit("stage3:patch")


@pytest.mark.parametrize("module", ["stage2.1", "stage3.0.conv", "pool"])
def test_a_patch_edit_equals_the_hand_written_hooks(demo_session, module):
    loaded = demo_session.loaded
    edits = demo_session.check_edits([parse_edit(f"{module}:patch={A}")])
    for gradients in (False, True):
        run = demo_session.run(str(B), interventions=edits, gradients=gradients)
        assert run.status == "ok", run.error
        expected = hand_patched(loaded.model, module, *_inputs(loaded))
        assert torch.equal(run.logits, expected)
    demo_session.channel.drain()
    assert remaining_hooks(loaded.model) == []


def test_a_patch_of_another_shape_is_refused_in_one_sentence(demo_session):
    loaded = demo_session.loaded
    edits = demo_session.check_edits([parse_edit(f"stage3:patch={A}")])
    small = torch.zeros(1, 3, 96, 96)  # another input size: stage3 is 12 x 12, not 16 x 16
    run = demo_session.run(small, interventions=edits, gradients=False)
    demo_session.channel.drain()
    assert run.status == "error"
    assert "must give outputs of one shape" in run.error and "96\u00d716\u00d716" in run.error
    assert remaining_hooks(loaded.model) == []
    assert demo_session.run(str(B), gradients=False).status == "ok"  # the next run works
    demo_session.channel.drain()


def test_a_missing_source_is_refused_before_the_run(demo_session):
    with pytest.raises(EditSpecError, match="no such file"):
        demo_session.check_edits([parse_edit("stage3:patch=missing.png")])


def test_the_sweep_of_a_chain(demo_session):
    loaded = demo_session.loaded
    sweep = submit_patch_sweep(demo_session, str(A), str(B)).result()
    modules, _ = sweep_modules(demo_session.tree)
    assert list(sweep.modules) == modules and modules[-1] == "head"
    # The last module's row is image A's run, bitwise within the sweep, and a run of A
    # alone to float rounding.
    assert sweep.logit[-1] == sweep.clean_logit
    a, b = _inputs(loaded)
    with torch.no_grad():
        alone = loaded.model(a)[0]
    assert abs(sweep.clean_logit - float(alone[sweep.target])) <= 1e-5
    assert sweep.target == int(loaded.model(b).argmax())
    # The demo model is a chain: every module is a cut, and recovers A's logit.
    assert np.abs(np.array(sweep.recovered()) - 1).max() <= 1e-6
    assert remaining_hooks(loaded.model) == []


class Branchy(nn.Module):
    """A residual block, an Identity on the skip, a module called twice, an unused head."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.skip = nn.Identity()
        self.act = nn.ReLU()
        self.aux = nn.Linear(8, 3)  # its output is never used
        self.fc = nn.Linear(8, 5)
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=g) * 0.5

    def forward(self, x):
        x = self.act(self.stem(x))
        s = self.skip(x)  # an alias of x, which conv reads after it
        y = self.act(self.conv(x)) + s  # act runs twice
        v = y.mean((2, 3))
        self.aux(v)
        return self.fc(v)


def test_the_batched_sweep_equals_one_by_one_patched_runs():
    model = Branchy().eval()
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(1, 3, 12, 12, generator=g), torch.randn(1, 3, 12, 12, generator=g)
    tree = build_tree(model, a)
    modules, _ = sweep_modules(tree)
    assert modules == ["stem", "act", "skip", "conv", "aux", "fc"]  # first calls, in order
    sweep = patch_sweep(model, a, b, modules)
    for name, value in zip(modules, sweep.logit, strict=True):
        expected = float(hand_patched(model, name, a, b)[0, sweep.target])
        assert abs(value - expected) <= 1e-5, name
    recovered = dict(zip(modules, sweep.recovered(), strict=True))
    assert recovered["aux"] == pytest.approx(0.0, abs=1e-6)  # off the path: no effect
    assert recovered["fc"] == pytest.approx(1.0, abs=1e-6)
    assert recovered["act"] == pytest.approx(1.0, abs=1e-6)  # its second call is the block's
    assert remaining_hooks(model) == []


def test_a_sweep_on_a_model_whose_rows_mix_is_refused():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(400, 3))
    model.train()  # patch_sweep runs in eval mode: the rows do not mix, and it works
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(1, 3, 12, 12, generator=g), torch.randn(1, 3, 12, 12, generator=g)
    assert len(patch_sweep(model, a, b, ["0", "1"]).logit) == 2
    assert model.training  # put back

    class Mixing(nn.Module):
        def forward(self, x):
            return x - x.mean(0, keepdim=True)

    mixing = nn.Sequential(nn.Flatten(), Mixing(), nn.Linear(432, 3))
    with pytest.raises(ValueError, match="not independent"):
        patch_sweep(mixing, a, b, ["0"])
    assert remaining_hooks(mixing) == []


def _analyse(out: Path, *options: str) -> dict:
    rc = cli.main(["analyse", "--model", "demo_shapes", "--device", "cpu", "--cam", "none",
                   "--no-tensorboard", "--quiet", "--out", str(out), *options])
    assert rc == 0
    return json.loads((out / "summary.json").read_text())


def test_analyse_with_a_patch_edit_writes_the_hand_patched_logits(tmp_path: Path):
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model

    doc = _analyse(tmp_path, "--edit", f"stage2.1:patch={A}", "--layers", "stage3", str(B))
    entry = doc["images"][0]
    npz = np.load(tmp_path / entry["files"]["npz"])
    loaded = load_model(ModelSpec(name="demo_shapes", device="cpu"))
    expected = hand_patched(loaded.model, "stage2.1", *_inputs(loaded))
    assert np.array_equal(npz["logits"], expected.numpy())
    assert doc["edits"][0]["spec"] == f"stage2.1:patch={A}"


def test_analyse_patch_sweep(tmp_path: Path, capsys):
    doc = _analyse(tmp_path / "sweep", "--patch-sweep", str(A), "--sweep-depth", "1", str(B))
    entry = doc["images"][0]
    assert [s["module"] for s in entry["patch_sweep"]] == [
        "stem", "stage1", "stage2", "stage3", "pool", "flatten", "head"]
    ref = entry["patch_reference"]
    assert ref["class"] == entry["target"]
    assert entry["patch_sweep"][-1]["logit"] == ref["logit_a"]
    # The value at the last module is the run on image A.
    a_run = _analyse(tmp_path / "a", "--target", str(entry["target"]), str(A))["images"][0]
    logits = np.load(tmp_path / "a" / a_run["files"]["npz"])["logits"]
    assert abs(float(logits.reshape(-1)[entry["target"]]) - ref["logit_a"]) <= 1e-5
    assert cli.main(["analyse", "--model", "demo_shapes", "--quiet", "--out",
                     str(tmp_path / "bad"), "--patch-sweep", "missing.png", str(B)]) == 2
    assert "--patch-sweep missing.png" in capsys.readouterr().err
