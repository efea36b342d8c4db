"""`network-inspector atlas` on one machine: figures against a brute-force loop, the files,
bad options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from atlas_images import BROKEN, draw_folder
from PIL import Image

from inspector import cli
from inspector.core.inputs.images import expand_paths, load_image
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["stage1.0.conv", "stage3"]
TOP = 4


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return draw_folder(tmp_path_factory.mktemp("atlas") / "images")


@pytest.fixture(scope="module")
def atlas(folder: Path, tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas_out")
    rc = cli.main([
        "atlas", "--model", "demo_shapes", "--device", "cpu", "--layers", ",".join(LAYERS),
        "--top", str(TOP), "--batch-size", "8", "--shard-size", "16", "--workers", "1",
        "--quiet", "--out", str(out), str(folder),
    ])
    return rc, out, json.loads((out / "atlas.json").read_text())


@pytest.fixture(scope="module")
def brute(folder: Path):
    """One image at a time, a plain forward hook per layer, the whole output kept."""
    loaded = load_model(ModelSpec(name="demo_shapes", device="cpu"))
    modules = dict(loaded.model.named_modules())
    figures: dict[str, dict[str, list]] = {n: {"path": [], "max": [], "mean": []} for n in LAYERS}
    predicted = []
    seen: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(module, args, output):
            seen[name] = output.detach().clone()

        return hook

    for path in expand_paths([folder]):
        try:
            x = loaded.preprocess(load_image(path))
        except Exception:
            continue
        seen.clear()
        handles = [modules[n].register_forward_hook(keep(n)) for n in LAYERS]
        try:
            with torch.no_grad():
                predicted.append(int(loaded.model(x[None]).argmax()))
        finally:
            for h in handles:
                h.remove()
        for n in LAYERS:
            t = seen[n][0].flatten(1)  # (C, positions)
            figures[n]["path"].append(str(path))
            figures[n]["max"].append(t.amax(dim=1).numpy())
            figures[n]["mean"].append(t.mean(dim=1).numpy())
    return figures, predicted, loaded


def test_top_k_and_values_match_a_brute_force_loop(atlas, brute):
    rc, out, doc = atlas
    figures, _, _ = brute
    assert doc["model"] == "demo_shapes"
    assert doc["images"] == len(figures[LAYERS[0]]["path"]) == 60
    checked_exact = 0
    for name in LAYERS:
        paths = figures[name]["path"]
        maxima = np.stack(figures[name]["max"])  # (images, C)
        layer = doc["layers"][name]
        assert layer["channels"] == maxima.shape[1]
        for c in range(maxima.shape[1]):
            # Expected order: value descending, ties to the path that comes first.
            order = sorted(range(len(paths)), key=lambda i: (-maxima[i, c], i))
            expected = [(paths[i], float(maxima[i, c])) for i in order[: TOP + 1]]
            got = layer["top"][str(c)]
            assert len(got) == TOP
            by_path = dict(zip(paths, maxima[:, c]))
            for r, entry in enumerate(got):
                assert entry["value"] == pytest.approx(expected[r][1], abs=1e-5)
                assert entry["value"] == pytest.approx(float(by_path[entry["path"]]), abs=1e-5)
                # Where no other image comes within 1e-4, the very same image must be there.
                gaps = [abs(expected[r][1] - expected[q][1]) for q in range(TOP + 1) if q != r]
                if min(gaps) > 1e-4:
                    assert entry["path"] == expected[r][0]
                    checked_exact += 1
        means = np.stack(figures[name]["mean"]).mean(axis=0)
        np.testing.assert_allclose(layer["mean"], means, rtol=1e-5, atol=1e-5)
        active = (maxima > 0).mean(axis=0)
        np.testing.assert_allclose(layer["active_fraction"], active, rtol=1e-6)
        assert layer["dead"] == [c for c in range(maxima.shape[1]) if (maxima[:, c] <= 0).all()]
    assert checked_exact > 100  # most places are not near-ties: the test compares images


def test_broken_files_are_listed_and_the_exit_status_is_1(atlas):
    rc, out, doc = atlas
    assert rc == 1
    failed = {Path(f["path"]).name: f["error"] for f in doc["failed"]}
    assert set(failed) == set(BROKEN)
    assert "not an image" in failed["notes.png"]
    assert "truncated" in failed["cut.png"]


def test_boxes_and_crops(atlas):
    rc, out, doc = atlas
    for name in LAYERS:
        folder = "stage1.0.conv" if name.startswith("stage1") else name
        for c, entries in doc["layers"][name]["top"].items():
            for r, entry in enumerate(entries):
                x0, y0, x1, y1 = entry["box"]
                w, h = Image.open(entry["path"]).size
                assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
                crop = Image.open(out / "crops" / folder / c / f"{r}.png")
                assert max(crop.size) == 96
                bw, bh = x1 - x0, y1 - y0
                assert crop.size[0] / crop.size[1] == pytest.approx(bw / bh, rel=0.1)
    # A first conv sees a few pixels; the last stage sees most of a 48 x 40 image.
    small = [e["box"] for es in doc["layers"]["stage1.0.conv"]["top"].values() for e in es]
    big = [e["box"] for es in doc["layers"]["stage3"]["top"].values() for e in es]
    area = lambda b: (b[2] - b[0]) * (b[3] - b[1])  # noqa: E731
    assert max(map(area, small)) < min(map(area, big))


def test_class_maps(atlas, brute):
    rc, out, doc = atlas
    _, predicted, loaded = brute
    classes = json.loads((out / "classes.json").read_text())
    assert classes["layer"] == "stage3" and classes["map_size"] == [16, 16]
    counts = {loaded.categories[c]: predicted.count(c) for c in set(predicted)}
    assert {k: v["count"] for k, v in classes["classes"].items()} == counts
    for entry in classes["classes"].values():
        m = np.asarray(entry["map"])
        assert m.shape == (16, 16) and 0 <= m.min() and m.max() <= 1 and m.max() > 0
        assert Image.open(out / entry["png"]).size == (128, 128)


def test_unknown_layer_is_exit_2_naming_it(folder, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["atlas", "--model", "demo_shapes", "--layers", "stage1,stage9", "--out",
                   str(out), "--quiet", str(folder)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "'stage9'" in err and "stage1" not in err.split("'stage9'")[0]
    assert not (out / "shards").exists() and not (out / "atlas.json").exists()


def test_bad_numbers_are_exit_2(folder, tmp_path, capsys):
    rc = cli.main(["atlas", "--layers", "stage1", "--top", "0", "--out", str(tmp_path),
                   str(folder)])
    assert rc == 2 and "--top must be 1 or more" in capsys.readouterr().err


def test_another_jobs_folder_is_refused(folder, tmp_path, capsys):
    out = tmp_path / "out"
    one = ["atlas", "--model", "demo_shapes", "--layers", "stage3", "--shard-size", "32",
           "--workers", "0", "--quiet", "--out", str(out), str(folder)]
    assert cli.main(one) == 1
    capsys.readouterr()
    assert cli.main([*one[:-1], "--top", "3", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "different atlas job" in err and "top" in err
    assert cli.main(one) == 1  # the same job again, without --resume: redone, and said so
    assert "not resuming: 2 finished shard(s)" in capsys.readouterr().err


RANDOM_FACTORY = """
from torch import nn


def build():  # random weights: which ones depends on the seed
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))
"""


def test_the_seed_of_random_weights_is_part_of_the_job(folder, tmp_path, capsys):
    factory = tmp_path / "random_model.py"
    factory.write_text(RANDOM_FACTORY)
    out = tmp_path / "out"
    one = ["atlas", "--model", f"{factory}:build", "--layers", "0", "--shard-size", "32",
           "--workers", "0", "--quiet", "--out", str(out)]
    assert cli.main([*one, str(folder)]) == 1
    seed = json.loads((out / "shards" / "job.json").read_text())["seed"]
    assert isinstance(seed, int)
    first = (out / "atlas.json").read_bytes()
    # Resumed without --seed: the stored seed, so the same weights (a new draw would mix two).
    (out / "shards" / "shard-00001.pt").unlink()
    assert cli.main([*one, "--resume", str(folder)]) == 1
    assert "resuming: 1 finished shard(s) reused" in capsys.readouterr().err
    assert (out / "atlas.json").read_bytes() == first
    # Another seed is another job: refused, the shards kept.
    assert cli.main([*one, "--resume", "--seed", str(seed + 1), str(folder)]) == 2
    assert "the seed (--seed) differ" in capsys.readouterr().err
    assert (out / "shards" / "shard-00000.pt").is_file()
    # Not resumed and no --seed: a new draw redoes the same job (the stored seed is replaced).
    assert cli.main([*one, str(folder)]) == 1
    assert "not resuming" in capsys.readouterr().err


def test_a_fresh_run_removes_an_earlier_runs_atlas_json_first(folder, tmp_path, monkeypatch):
    out = tmp_path / "out"
    one = ["atlas", "--model", "demo_shapes", "--layers", "stage3", "--shard-size", "32",
           "--workers", "0", "--quiet", "--out", str(out), str(folder)]
    assert cli.main(one) == 1
    assert (out / "atlas.json").is_file() and (out / "crops").is_dir()
    import inspector.batch.atlas as atlas

    def killed(*args, **kwargs):
        raise RuntimeError("killed in the statistics pass")

    monkeypatch.setattr(atlas, "_statistics", killed)
    assert cli.main(one) == 1  # stopped, said so
    for name in ("atlas.json", "classes.json", "crops", "classes"):
        assert not (out / name).exists(), name


def test_missing_ray_is_a_message_and_exit_2(folder, tmp_path):
    code = ("import sys; sys.modules['ray'] = None\n"
            "from inspector.cli import main\n"
            "raise SystemExit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, "atlas", "--engine", "ray", "--layers", "stage3",
         "--out", str(tmp_path / "out"), str(folder)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'network-inspector[cluster]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hooks_are_removed_when_a_forward_fails():
    from inspector.batch.probe import LayerPlan, Probe

    class Fails(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            self.conv(x)
            raise RuntimeError("boom")

    model = Fails()
    plans = {"conv": LayerPlan("conv", 4, False, False, 1)}
    with pytest.raises(RuntimeError, match="boom"):
        with Probe(model, plans, cam_layer=None) as probe:
            probe.run(torch.zeros(2, 3, 8, 8))
    assert not model.conv._forward_hooks


def test_a_model_that_fails_on_its_own_input_size_is_one_sentence(folder, tmp_path, capsys):
    factory = tmp_path / "narrow.py"
    factory.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),\n"
        "                               torch.nn.Linear(7, 2))\n"
    )
    rc = cli.main(["atlas", "--model", f"{factory}:build", "--layers", "0", "--quiet",
                   "--out", str(tmp_path / "out"), str(folder)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "fails on an input of 1 x 3 x" in err and "Traceback" not in err
