"""`network-inspector analyse --metrics ...`: each image's "metrics" in summary.json (only the
keys asked for), the run's metrics_summary and metrics.csv, --metric-baseline, --boxes,
--resume and --engine ray as for the rest of analyse, and bad input in one sentence with
exit status 2 before any image is read."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from loopback import LOOPBACK_ONLY, require_loopback_namespace

from inspector import cli, demo

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ["circle_01.png", "square_01.png", "heart_with_star_01.png", "star_01.png"]
KEYS = {
    "deletion": {"deletion", "deletion_curve"},
    "insertion": {"insertion", "insertion_curve"},
    "avgdrop": {"avg_drop", "increase"},
    "pointing": {"pointing", "energy_pointing"},
}


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for name in SAMPLES:
        shutil.copy(demo.DEMO_DIR / "samples" / name, folder / name)
    return folder


def _boxes(tmp_path: Path, value) -> Path:
    path = tmp_path / "boxes.json"
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def _analyse(out: Path, *extra: str) -> list[str]:
    return ["analyse", "--quiet", "--no-tensorboard", "--cam", "gradcam", "--attr",
            "saliency", "--out", str(out), *extra]


def _refused(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().removeprefix("network-inspector: ")


def test_bad_metric_options_are_one_sentence_and_exit_2(tmp_path, images, capsys):
    out = tmp_path / "out"
    one = str(images / SAMPLES[0])
    assert _refused(capsys, _analyse(out, "--metrics", "deletion,foo", one)) == (
        "unknown metric 'foo'; known: deletion, insertion, avgdrop, road, sanity, pointing")
    assert _refused(capsys, ["analyse", "--quiet", "--cam", "none", "--metrics", "deletion",
                             "--out", str(out), one]) == (
        "the metrics score maps: ask for a --cam or an --attr")
    assert _refused(capsys, _analyse(out, "--metrics", "pointing", one)) == (
        "the pointing game needs the objects' boxes: give --boxes FILE.json")
    between = ("--metric-steps must be between 1 and 1000 (each step is a forward of every "
               "map's perturbed image), not ")
    assert _refused(capsys, _analyse(out, "--metrics", "deletion", "--metric-steps", "0",
                                     one)) == between + "0"
    # It ran 3 minutes at one pixel a step, and recorded "1000000000 steps".
    assert _refused(capsys, _analyse(out, "--metrics", "deletion", "--metric-steps",
                                     "1000000000", one)) == between + "1000000000"
    bad = _boxes(tmp_path, '{"circle_01.png": [[1, 2, 3, 4]],\n "x": [[1, 2,}')
    err = _refused(capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(bad), one))
    assert err.startswith(f"--boxes {bad}: not JSON (") and "line 2, column" in err
    empty = _boxes(tmp_path, {"circle_01.png": [[10, 10, 5, 20]]})
    assert "is empty (x1 <= x0 or y1 <= y0)" in _refused(
        capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(empty), one))
    flat = _boxes(tmp_path, {"circle_01.png": [1, 2, 3, 4]})
    assert "a box of 'circle_01.png' is 1, not four numbers [x0, y0, x1, y1]" in _refused(
        capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(flat), one))
    shape = _boxes(tmp_path, {"circle_01.png": 12})
    assert "'circle_01.png' must list its boxes as [[x0, y0, x1, y1], ...]" in _refused(
        capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(shape), one))
    no_mask = _boxes(tmp_path, {"circle_01.png": "everywhere.png"})
    assert _refused(capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(no_mask),
                                     one)).startswith(
        f"--boxes {no_mask}: the object's mask {tmp_path / 'everywhere.png'} cannot be read")
    other = _boxes(tmp_path, {"nothere.png": [[1, 2, 3, 4]]})
    assert _refused(capsys, _analyse(out, "--metrics", "pointing", "--boxes", str(other),
                                     one)) == (
        "--boxes names none of the images given (it names nothere.png)")
    assert not (out / "summary.json").exists()


ONE_OUTPUT = '''
import torch
from torch import nn

CLASSES = ["score"]
PREPROCESS = {"crop_size": (32, 32), "resize_size": None,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}


def build():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 1))
'''


def test_a_model_without_class_scores_is_refused(tmp_path, images, capsys):
    factory = tmp_path / "one.py"
    factory.write_text(ONE_OUTPUT)
    err = _refused(capsys, ["analyse", "--quiet", "--model", f"{factory}:build", "--cam",
                            "gradcam", "--cam-layer", "0", "--metrics", "deletion", "--out",
                            str(tmp_path / "out"), str(images)])
    assert err.endswith("the model's output is (1, 1), not class scores: the metrics need a "
                        "class probability")


def test_summary_metrics_summary_and_csv(tmp_path, images, capsys):
    out = tmp_path / "out"
    boxes = _boxes(tmp_path, {"circle_01.png": [[20, 20, 110, 110]],
                              "images/star_01.png": [[0, 0, 40, 40]]})
    argv = _analyse(out, "--metrics", "deletion,insertion,avgdrop,pointing", "--metric-steps",
                    "10", "--boxes", str(boxes), str(images))
    assert cli.main(argv) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"] == ["deletion", "insertion", "avgdrop", "pointing"]
    assert "10 steps" in summary["metrics_protocol"] and "RISE" in summary["metrics_protocol"]
    entries = summary["images"]
    for entry in entries:
        assert set(entry["metrics"]) == {"gradcam", "saliency"}
        for method, found in entry["metrics"].items():
            keys = set().union(*KEYS.values())
            named = Path(entry["path"]).name in ("circle_01.png", "star_01.png")
            assert set(found) == keys | (set() if named else {"notes"}), (method, found)
            curve = found["deletion_curve"]
            assert len(curve) == 11 and curve[0][0] == 0.0 and curve[-1][0] == 1.0
            probs = [p["prob"] for p in entry["top"] if p["index"] == entry["target"]]
            assert curve[0][1] == pytest.approx(probs[0], abs=1e-5)
            fractions, scores = np.array(curve).T
            trapezoid = np.sum(np.diff(fractions) * (scores[1:] + scores[:-1]) / 2)
            assert found["deletion"] == pytest.approx(trapezoid, abs=1e-5)
            if not named:
                assert found["pointing"] is None and "no boxes" in found["notes"]["pointing"]
    means = summary["metrics_summary"]
    for method in ("gradcam", "saliency"):
        values = [e["metrics"][method] for e in entries]
        assert means[method]["deletion"] == pytest.approx(
            np.mean([v["deletion"] for v in values]), abs=1e-6)
        assert means[method]["increase"] == pytest.approx(
            np.mean([v["increase"] for v in values]), abs=1e-6)
        pointed = [v["pointing"] for v in values if v["pointing"] is not None]
        assert len(pointed) == 2 and means[method]["pointing"] == pytest.approx(np.mean(pointed))
        assert means[method]["images"] == len(SAMPLES)
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert len(rows) == len(SAMPLES) * 2
    assert list(rows[0]) == ["path", "frame", "method", "deletion", "insertion", "avg_drop",
                             "increase", "pointing", "energy_pointing", "undefined"]
    first = entries[0]["metrics"]["gradcam"]
    assert float(rows[0]["deletion"]) == pytest.approx(first["deletion"])


def test_a_mask_points_as_the_box_it_fills(tmp_path, images, capsys):
    from PIL import Image

    mask = np.zeros((128, 128), np.uint8)
    mask[20:110, 30:100] = 255
    Image.fromarray(mask).save(tmp_path / "circle_mask.png")
    one = str(images / "circle_01.png")
    found = {}
    for name, value in (("box", [[30, 20, 100, 110]]), ("mask", "circle_mask.png")):
        boxes = _boxes(tmp_path, {"circle_01.png": value})
        out = tmp_path / name
        assert cli.main(_analyse(out, "--metrics", "pointing", "--boxes", str(boxes), one)) == 0
        found[name] = json.loads((out / "summary.json").read_text())["images"][0]["metrics"]
    for method in ("gradcam", "saliency"):
        box, by_mask = found["box"][method], found["mask"][method]
        assert by_mask["pointing"] == box["pointing"] and by_mask["pointing"] is not None
        assert by_mask["energy_pointing"] == pytest.approx(box["energy_pointing"], abs=1e-9)
        assert 0 < by_mask["energy_pointing"] < 1


def test_a_zero_baseline_is_both_curves(tmp_path, images, capsys):
    out = tmp_path / "out"
    argv = _analyse(out, "--metrics", "deletion,insertion", "--metric-baseline", "zero",
                    str(images / SAMPLES[1]))
    assert cli.main(argv) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    found = summary["images"][0]["metrics"]["gradcam"]
    # The all-zero input ends deletion and starts insertion.
    assert found["insertion_curve"][0][1] == found["deletion_curve"][-1][1]
    assert "deletion to and insertion from zero" in summary["metrics_protocol"]


def test_resume_equals_the_whole_run_and_refuses_other_metrics(tmp_path, images, capsys):
    out = tmp_path / "out"
    argv = _analyse(out, "--metrics", "deletion,insertion,sanity", "--metric-steps", "8",
                    "--shard-size", "2", str(images))
    assert cli.main(argv) == 0
    whole = json.loads((out / "summary.json").read_text())
    whole_csv = (out / "metrics.csv").read_text()
    # As if killed during the second shard: its record and the run's files are gone.
    (out / "shards" / "shard-00001.json").unlink()
    (out / "summary.json").unlink()
    (out / "metrics.csv").unlink()
    assert cli.main([*argv[:-1], "--resume", argv[-1]]) == 0
    assert "resuming: 1 finished shard(s) reused" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text()) == whole
    assert (out / "metrics.csv").read_text() == whole_csv
    other = _analyse(out, "--metrics", "deletion", "--metric-steps", "8", "--shard-size", "2",
                     "--resume", str(images))
    assert cli.main(other) == 2
    assert "holds shards of a different analyse job" in capsys.readouterr().err


@pytest.mark.slow
def test_the_ray_engine_writes_the_same_metrics(tmp_path, images):
    pytest.importorskip("ray")
    require_loopback_namespace()

    def run(out: Path, *extra: str, wrap=()):
        command = [*wrap, sys.executable, "-m", "inspector.cli",
                   *_analyse(out, "--metrics", "deletion,insertion,avgdrop", "--metric-steps",
                             "6", "--shard-size", "2", "--device", "cpu", *extra),
                   str(images)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)

    local = run(tmp_path / "local")
    assert local.returncode == 0, local.stderr
    remote = run(tmp_path / "ray", "--engine", "ray", "--workers", "2", wrap=LOOPBACK_ONLY)
    assert remote.returncode == 0, remote.stderr
    a = json.loads((tmp_path / "local" / "summary.json").read_text())
    b = json.loads((tmp_path / "ray" / "summary.json").read_text())
    _close(a, b)
    for method, means in a["metrics_summary"].items():
        assert b["metrics_summary"][method] == pytest.approx(means, abs=1e-5)
    assert (tmp_path / "ray" / "metrics.csv").read_text().count("\n") == 1 + 2 * len(SAMPLES)


def _close(a, b) -> None:
    for x, y in zip(a["images"], b["images"], strict=True):
        assert x["path"] == y["path"]
        for method in x["metrics"]:
            for key in ("deletion", "insertion", "avg_drop", "increase"):
                assert y["metrics"][method][key] == pytest.approx(x["metrics"][method][key],
                                                                  abs=1e-5)
