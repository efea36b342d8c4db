"""`network-inspector compare-models` on the demo model: the files and their keys, the same
model against itself, a model with one layer's weights shuffled, --match, bad options, a
failed image, --resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from inspector import cli
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model, probe_tree

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "resources" / "demo" / "samples"
SHUFFLED = "stage2.0.conv"
LAYERS = ["stem.conv", "stage1.0.relu", "stage1.1.relu", SHUFFLED, "stage2.1.relu",
          "stage3.0.relu", "stage3.1.relu", "head"]


def _compare(out: Path, *options: str, inputs=(SAMPLES,)) -> int:
    return cli.main(["compare-models", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                     "--workers", "0", "--out", str(out), *options, *map(str, inputs)])


def _cka(out: Path) -> tuple[dict, np.ndarray]:
    doc = json.loads((out / "cka.json").read_text())
    return doc, np.array([[np.nan if v is None else v for v in row] for row in doc["cka"]])


@pytest.fixture(scope="module")
def shuffled_weights(tmp_path_factory) -> Path:
    """The demo's weights with the elements of one convolution's weight permuted."""
    model = load_model(ModelSpec(name="demo_shapes", device="cpu")).model
    state = {k: v.clone() for k, v in model.state_dict().items()}
    w = state[f"{SHUFFLED}.weight"]
    perm = torch.randperm(w.numel(), generator=torch.Generator().manual_seed(2))
    state[f"{SHUFFLED}.weight"] = w.flatten()[perm].view_as(w)
    path = tmp_path_factory.mktemp("weights") / "shuffled.pt"
    torch.save(state, path)
    return path


def test_the_model_against_itself(tmp_path: Path):
    assert _compare(tmp_path, "--match", "stage3.1.conv:stage3.1.conv") == 0
    doc, values = _cka(tmp_path)
    assert list(doc)[:6] == ["model_a", "model_b", "images", "layers_a", "layers_b", "cka"]
    assert doc["model_a"] == doc["model_b"] == "demo_shapes"
    assert doc["images"] == len(list(SAMPLES.glob("*.png")))
    assert doc["estimator"] == "exact" and doc["same_model"] is True
    tree = probe_tree(load_model(ModelSpec(name="demo_shapes", device="cpu")))
    order = [n for n in tree.order if n and tree[n].is_leaf and tree[n].type_name != "Flatten"]
    assert doc["layers_a"] == doc["layers_b"] == order  # auto: the leaves, forward order
    assert values.shape == (len(order), len(order))
    assert np.abs(np.diag(values) - 1).max() <= 1e-6
    assert np.allclose(values, values.T, atol=1e-6)
    with Image.open(tmp_path / "cka.png") as png:
        assert png.width > 200 and png.height > 200
    matches = json.loads((tmp_path / "matches.json").read_text())
    assert matches["channels_a"] == matches["channels_b"] == 96
    assert len(matches["pairs"]) == 96
    assert all(p["a"] == p["b"] and p["corr"] == pytest.approx(1.0, abs=1e-6)
               for p in matches["pairs"])
    assert matches["lost"] == [] and matches["new"] == [] and matches["grid"] == [16, 16]


@pytest.mark.parametrize("estimator", ["exact", "minibatch"])
def test_one_layer_shuffled_drops_there_and_after(tmp_path: Path, shuffled_weights: Path,
                                                  estimator: str):
    options = ["--weights-b", str(shuffled_weights), "--layers", ",".join(LAYERS),
               "--estimator", estimator, "--batch-size", "4" if estimator == "minibatch" else "64"]
    assert _compare(tmp_path, *options) == 0
    doc, values = _cka(tmp_path)
    assert doc["same_model"] is False and doc["estimator"] == estimator
    assert doc["layers_a"] == doc["layers_b"] == LAYERS
    diag = np.diag(values)
    at = LAYERS.index(SHUFFLED)
    assert np.abs(diag[:at] - 1).max() <= 1e-6  # the same weights before it
    assert (diag[at:] < 1 - 1e-3).all()
    assert diag[-1] < 0.5


def test_exact_in_blocks_equals_one_forward(tmp_path: Path, shuffled_weights: Path):
    options = ["--weights-b", str(shuffled_weights), "--layers", ",".join(LAYERS)]
    assert _compare(tmp_path / "one", *options) == 0
    assert _compare(tmp_path / "blocks", *options, "--batch-size", "6",
                    "--estimator", "exact") == 0
    one, blocks = _cka(tmp_path / "one"), _cka(tmp_path / "blocks")
    assert blocks[0]["blocks"] == 4 and one[0]["blocks"] == 1
    assert np.abs(one[1] - blocks[1]).max() <= 1e-5


def test_bad_options_are_refused_before_any_image_is_read(tmp_path: Path, capsys):
    assert _compare(tmp_path / "a", "--layers", "stage9") == 2
    assert "did you mean" in capsys.readouterr().err
    assert not (tmp_path / "a" / "shards").exists()
    assert _compare(tmp_path / "b", "--match", "stage3:nope") == 2
    assert "model B has no module 'nope'" in capsys.readouterr().err
    assert _compare(tmp_path / "c", "--estimator", "minibatch", "--batch-size", "3") == 2
    assert "4 or more" in capsys.readouterr().err


@pytest.mark.parametrize("count", [1, 2])
def test_fewer_than_three_images_are_refused(tmp_path: Path, capsys, count):
    """Over two images every layer pair scored 1.0 (one image: null), exit 0."""
    folder = tmp_path / "few"
    folder.mkdir()
    for p in sorted(SAMPLES.glob("*.png"))[:count]:
        shutil.copy(p, folder)
    assert _compare(tmp_path / "out", inputs=(folder,)) == 2
    err = capsys.readouterr().err
    assert f"it needs at least 3 images, and {folder} holds {count}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ['[1, 2]', '{"model": "demo_shapes", "layers": '
                                  '{"stage3": {"top": {"\u00b2": []}}}}', '{"model": 3'])
def test_a_malformed_atlas_is_refused_before_any_work(tmp_path: Path, capsys, text):
    """It ended in AttributeError or ValueError after the whole comparison."""
    atlas = tmp_path / "atlas"
    atlas.mkdir()
    (atlas / "atlas.json").write_text(text)
    assert _compare(tmp_path / "out", "--match", "stage3:stage3", "--atlas-b", str(atlas)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("network-inspector: --atlas-b: ") and str(atlas / "atlas.json") in err, err
    assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out" / "shards").exists()


def test_a_failed_image_is_listed_and_the_rest_compared(tmp_path: Path):
    folder = tmp_path / "images"
    shutil.copytree(SAMPLES, folder)
    (folder / "notes.png").write_text("not a picture\n")
    assert _compare(tmp_path / "out", "--layers", "stage3,head", inputs=(folder,)) == 1
    doc, values = _cka(tmp_path / "out")
    assert doc["images"] == len(list(SAMPLES.glob("*.png")))
    assert [Path(f["path"]).name for f in doc["failed"]] == ["notes.png"]
    assert np.isfinite(values).all()


def test_resume_reuses_finished_shards(tmp_path: Path, shuffled_weights: Path, capsys):
    options = ["--weights-b", str(shuffled_weights), "--layers", "stage1,stage3,head",
               "--estimator", "minibatch", "--batch-size", "4", "--shard-size", "4"]
    assert _compare(tmp_path, *options) == 0
    first = _cka(tmp_path)
    shards = sorted((tmp_path / "shards").glob("shard-*.pt"))
    assert len(shards) == 3
    shards[1].unlink()
    (tmp_path / "cka.json").unlink()
    capsys.readouterr()
    assert _compare(tmp_path, *options, "--resume") == 0
    assert "2 finished shard(s) reused" in capsys.readouterr().err
    again = _cka(tmp_path)
    assert again[0]["order_seed"] == first[0]["order_seed"] == 0
    assert np.array_equal(again[1], first[1])
    # Another order of the images is another job: refused, the shards kept.
    assert _compare(tmp_path, *options, "--order-seed", "1", "--resume") == 2
    assert "--order-seed" in capsys.readouterr().err
    assert len(list((tmp_path / "shards").glob("shard-*.pt"))) == 3


NET_B = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(8, 12, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 4))
'''


def test_model_b_with_random_weights_is_said_once(tmp_path: Path, capsys, monkeypatch):
    # The warning said "RANDOM weights: …, seed N: random weights (seed N)".
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-weights"))
    assert _compare(tmp_path / "out", "--model-b", "resnet18", "--layers-b", "layer1,fc") == 0
    b_warning = next(line for line in capsys.readouterr().err.splitlines() if "model B" in line)
    assert "RANDOM weights" in b_warning and "untrained network" in b_warning
    assert b_warning.count("seed") == 1 and b_warning.lower().count("random weights") == 1


def test_two_architectures(tmp_path: Path, capsys):
    """B another network (a model file's function): its own leaves as columns, a matched pair
    whose grids differ pooled to the coarser one, and channels beyond the narrower side lost."""
    (tmp_path / "net.py").write_text(NET_B)
    assert _compare(tmp_path / "out", "--model-b", f"{tmp_path / 'net.py'}:build",
                    "--match", "stage2.1.conv:2") == 0
    assert "finer grid is average-pooled" in capsys.readouterr().err
    doc, values = _cka(tmp_path / "out")
    assert doc["model_b"] != doc["model_a"] and doc["same_model"] is False
    assert doc["layers_b"] == ["0", "1", "2", "3", "4", "6"]  # the Flatten passes its input on
    assert values.shape == (len(doc["layers_a"]), 6)
    assert np.isfinite(values).all() and (values > 0).all() and (values < 1).all()
    matches = json.loads((tmp_path / "out" / "matches.json").read_text())
    assert (matches["channels_a"], matches["channels_b"]) == (64, 12)
    assert len(matches["pairs"]) == 12  # one-to-one: as many pairs as the narrower side
    assert len({p["a"] for p in matches["pairs"]}) == 12
    corr = [p["corr"] for p in matches["pairs"]]
    assert corr == sorted(corr, reverse=True)
    assert len(matches["lost"]) >= 64 - 12  # A's channels left without a partner are lost
    assert matches["grid"] == [16, 16]  # demo_shapes' stage2 at 128 px; B's finer grid pooled


def test_atlas_crops_beside_the_matched_channels(tmp_path: Path, capsys):
    atlas = tmp_path / "atlas"
    assert cli.main(["atlas", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                     "--workers", "0", "--layers", "stage3.1.conv", "--top", "2", "--out",
                     str(atlas), str(SAMPLES)]) == 0
    assert _compare(tmp_path / "out", "--layers", "stage3.1.conv,head", "--match",
                    "stage3.1.conv:stage3.1.conv", "--atlas-a", str(atlas), "--atlas-b",
                    str(tmp_path / "nothing")) == 0
    assert "no crops from" in capsys.readouterr().err  # B's folder holds no atlas: a note
    matches = json.loads((tmp_path / "out" / "matches.json").read_text())
    assert matches["crops_b"] == {}
    crops = matches["crops_a"]
    assert sorted(map(int, crops)) == list(range(96))
    for channel, paths in crops.items():
        assert [Path(p).name for p in paths] == ["0.png", "1.png"]
        assert all(Path(p).is_file() and Path(p).parent.name == channel for p in paths)
