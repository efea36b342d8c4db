"""`network-inspector analyse --edit SPEC [--compare]`: refused before any image is read when a
spec cannot work; the NPZ's logits are the edited run's; compare.json says where the edited
run parts from the unedited one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from inspector import cli
from inspector.core.edits.spec import check_edits, parse_edit
from inspector.core.hookset import remaining_hooks
from inspector.core.inputs import images as core_images
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session

LAYERS = ["stem", "stage1", "stage2", "stage3", "head"]
EDIT = "stage2.0.conv:zero=1,2,3"


@pytest.fixture
def no_image_read(monkeypatch):
    """Fails the test if analyse opens any image."""
    def refuse(*args, **kwargs):
        raise AssertionError("an image was read")

    monkeypatch.setattr(core_images, "load_image", refuse)


@pytest.mark.parametrize("spec, message", [
    ("stage2.0.conv:zap=1", "bad edit 'stage2.0.conv:zap=1': unknown operation 'zap'"),
    ("stage9:zero=1", "edit 'stage9:zero=1': no module named 'stage9'"),
    ("stage2.0.conv:zero=1,64", "edit 'stage2.0.conv:zero=1,64': 'stage2.0.conv' outputs "
                                "[1, 64, 16, 16]: channels [64] out of range"),
    ("input:occlude=0,0,129,8", "not inside the model input of 128 x 128"),
])
def test_a_spec_that_cannot_work_exits_2_before_any_image_is_read(
        spec, message, demo_samples, tmp_path, capsys, no_image_read):
    out = tmp_path / "out"
    missing = tmp_path / "no_such_image.png"
    rc = cli.main(["analyse", "--quiet", "--no-tensorboard", "--out", str(out),
                   "--edit", "stem:scale=2", "--edit", spec, str(missing), str(demo_samples[0])])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert "no_such_image" not in err  # the message is about the spec, not the images
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_patch_source_that_is_not_an_image_is_refused_before_any_run(
        demo_samples, tmp_path, capsys):
    """It failed on every image (exit 1) with the same reason."""
    text = tmp_path / "notes.png"
    text.write_text("not a picture\n")
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--quiet", "--no-tensorboard", "--out", str(out),
                   "--edit", f"stage2:patch={text}", *map(str, demo_samples[:2])])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"edit 'stage2:patch={text}': {text}: not an image file (looks like text)" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_compare_needs_an_edit(demo_samples, tmp_path, capsys):
    rc = cli.main(["analyse", "--quiet", "--compare", "--out", str(tmp_path / "o"),
                   str(demo_samples[0])])
    assert rc == 2
    assert "--compare" in capsys.readouterr().err


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, demo_samples_module):
    out = tmp_path_factory.mktemp("edited")
    rc = cli.main(["analyse", "--quiet", "--no-tensorboard", "--cam", "gradcam",
                   "--layers", ",".join(LAYERS), "--out", str(out), "--edit", EDIT,
                   "--edit", "stage3:grad-scale=0.5", "--compare",
                   *[str(p) for p in demo_samples_module[:2]]])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def demo_samples_module():
    from inspector import demo

    return demo.sample_images()


def test_compare_json_says_where_the_edited_run_parts_ways(analysed, demo_samples_module):
    compare = json.loads((analysed / "compare.json").read_text())
    assert [e["spec"] for e in compare["edits"]] == [EDIT, "stage3:grad-scale=0.5"]
    assert [Path(i["path"]) for i in compare["images"]] == list(demo_samples_module[:2])
    for item in compare["images"]:
        assert item["error"] is None and item["notes"] == []
        modules = item["modules"]
        assert list(modules) == LAYERS  # forward order
        for name in ["stem", "stage1"]:  # before the edited module: the same outputs
            assert modules[name] == {"rel_l2": 0.0, "cosine": 1.0}
        for name in ["stage2", "stage3", "head"]:
            assert modules[name]["rel_l2"] > 0 and modules[name]["cosine"] < 1
        for key in ("top_before", "top_after"):
            top = item[key]
            assert len(top) == 5 and set(top[0]) == {"index", "label", "prob"}
            assert [p["prob"] for p in top] == sorted((p["prob"] for p in top), reverse=True)
        assert item["top_before"] != item["top_after"]


def test_summary_names_the_edits(analysed):
    summary = json.loads((analysed / "summary.json").read_text())
    assert summary["edits"] == [
        {"spec": EDIT, "description": "zero channels [1, 2, 3] of stage2.0.conv"},
        {"spec": "stage3:grad-scale=0.5", "description": "scale the gradient into stage3 by 0.5"},
    ]
    assert summary["compare"] == "compare.json"
    compare = json.loads((analysed / "compare.json").read_text())
    for entry, item in zip(summary["images"], compare["images"], strict=True):
        assert entry["top"] == item["top_after"]  # everything written is the edited run's


def test_npz_logits_equal_the_sessions_edited_run(analysed, demo_samples_module):
    summary = json.loads((analysed / "summary.json").read_text())
    s = Session()
    try:
        loaded = s.load_model("demo_shapes").result()
        edits = check_edits([parse_edit(EDIT), parse_edit("stage3:grad-scale=0.5")], s.tree,
                            loaded.preprocess.crop_size)
        for entry, path in zip(summary["images"], demo_samples_module[:2], strict=True):
            npz = np.load(analysed / entry["files"]["npz"])
            x = loaded.preprocess(core_images.load_image(path))
            stage2 = CaptureSpec.for_modules(["stage2"], full=frozenset({"stage2"}))
            expected = s.run(x, interventions=edits, capture=stage2).logits
            edited_stage2 = _full(s, "stage2")
            assert npz["logits"].shape == (1, len(loaded.categories))
            assert np.array_equal(npz["logits"], expected.numpy())
            plain = s.run(x, capture=stage2).logits.numpy()
            assert not np.allclose(npz["logits"], plain, atol=1e-4)
            # The activations are the edited run's too: what the modules after it saw.
            assert np.array_equal(npz["activation/stage2"], edited_stage2)
            assert not np.allclose(npz["activation/stage2"], _full(s, "stage2"), atol=1e-4)
        assert not remaining_hooks(loaded.model)
    finally:
        s.close()


def _full(session, module):
    frames = session.channel.drain()
    return next(f.full for f in frames if getattr(f, "module", None) == module
                and getattr(f, "full", None) is not None and f.kind == "output")


def test_without_edits_summary_says_none_and_no_compare_json(demo_samples, tmp_path):
    out = tmp_path / "plain"
    assert cli.main(["analyse", "--quiet", "--no-tensorboard", "--cam", "none", "--out",
                     str(out), str(demo_samples[0])]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["edits"] == [] and summary["compare"] is None
    assert not (out / "compare.json").exists()
    npz = np.load(out / summary["images"][0]["files"]["npz"])
    assert npz["logits"].dtype == np.float32 and torch.from_numpy(npz["logits"]).ndim == 2
