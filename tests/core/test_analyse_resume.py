"""`analyse --resume` after the process was killed in the middle of a shard gives the
uninterrupted run's summary.json, compare.json and per-image files, without redoing the
shards that were finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from atlas_images import draw_folder

from inspector import cli

ROOT = Path(__file__).resolve().parents[2]
EDIT = "stage2.0.conv:zero=1,2,3"

# The child analyses as the CLI does, but once image STOP_AFTER is written (the second image
# of the second shard: the first shard finished, the second cut short) it says so in a file
# and waits to be killed. The test kills it only then: no race with a run that is too fast.
CHILD = """
import sys, time
from pathlib import Path
import inspector.batch.analyse.shards as shards
from inspector.cli import main

marker, stop_after, argv = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
real = shards.analyse_image

def analyse_image(*args, **kwargs):
    result = real(*args, **kwargs)
    if args[6] == stop_after:  # the step: the image's place in the input list
        marker.write_text("ready")
        time.sleep(3600)
    return result

shards.analyse_image = analyse_image
sys.exit(main(argv))
"""


def _args(folder: Path, out: Path, *extra: str) -> list[str]:
    return ["analyse", "--quiet", "--no-tensorboard", "--cam", "gradcam",
            "--layers", "stage1,stage3", "--edit", EDIT, "--compare", "--shard-size", "4",
            "--out", str(out), *extra, str(folder)]


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow
def test_resume_after_a_kill_mid_shard_gives_the_uninterrupted_result(tmp_path: Path, capsys):
    folder = draw_folder(tmp_path / "images", count=10)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert cli.main(_args(folder, whole)) == 1  # the two broken files
    capsys.readouterr()

    marker = tmp_path / "killed-here"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(marker), "5",
                             *_args(folder, cut)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the run never reached the second shard: {proc.stderr.read()}"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    shards = cut / "shards"
    assert sorted(p.name for p in shards.glob("shard-*")) == ["shard-00000.json"]
    assert not (cut / "summary.json").exists() and not (cut / "compare.json").exists()
    first = json.loads((shards / "shard-00000.json").read_text())["images"]
    kept = {p: p.stat().st_mtime_ns for e in first for p in (cut / f for f in e["files"].values())}
    assert len(kept) >= 2 * 3  # the first shard's readable images: NPZ, CAM, two mosaics
    shard_time = (shards / "shard-00000.json").stat().st_mtime_ns

    assert cli.main(_args(folder, cut, "--resume")) == 1
    err = capsys.readouterr().err
    assert "resuming: 1 finished shard(s) reused" in err
    assert (shards / "shard-00000.json").stat().st_mtime_ns == shard_time  # not redone
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())

    for name in ("summary.json", "compare.json"):
        assert json.loads((cut / name).read_text()) == json.loads((whole / name).read_text())
    summary = json.loads((whole / "summary.json").read_text())
    assert len(summary["images"]) == 12 and sum(1 for e in summary["images"] if e["error"]) == 2
    for entry in summary["images"]:
        for key, rel in entry["files"].items():
            if key == "npz":
                a, b = _npz(whole / rel), _npz(cut / rel)
                assert a.keys() == b.keys()
                for k in a:
                    np.testing.assert_array_equal(a[k], b[k], err_msg=f"{rel} {k}")
            else:
                assert (cut / rel).read_bytes() == (whole / rel).read_bytes(), rel


def test_resume_refuses_another_jobs_shards_and_a_fresh_run_drops_the_old_summary(
        tmp_path: Path, capsys):
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    args = ["analyse", "--quiet", "--no-tensorboard", "--shard-size", "2", "--out", str(out)]
    assert cli.main([*args, str(folder)]) == 1
    job = json.loads((out / "shards" / "job.json").read_text())
    assert job["command"] == "analyse" and job["options"]["topk"] == 5
    assert cli.main([*args, "--topk", "3", "--resume", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "different analyse job (--topk differ)" in err
    before = (out / "summary.json").read_bytes()  # refused: nothing of the other job touched
    assert json.loads(before)["images"][0]["top"]

    # A fresh run of the same job that is stopped before its end leaves no summary.json of
    # the earlier run behind.
    import inspector.batch.analyse.shards as shards

    def stop(*a, **k):
        raise KeyboardInterrupt

    original = shards.analyse_image
    shards.analyse_image = stop
    try:
        assert cli.main([*args, str(folder)]) == 130
    finally:
        shards.analyse_image = original
    # What the stopped run did (nothing), not the earlier run's five images.
    assert json.loads((out / "summary.json").read_text())["images"] == []


RANDOM_FACTORY = """
from torch import nn


def build():  # random weights: which ones depends on the seed
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))
"""


def test_resumed_without_seed_random_weights_are_the_stored_runs(tmp_path: Path, capsys):
    factory = tmp_path / "random_model.py"
    factory.write_text(RANDOM_FACTORY)
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    args = ["analyse", "--model", f"{factory}:build", "--quiet", "--no-tensorboard",
            "--cam", "none", "--layers", "0", "--shard-size", "2", "--out", str(out)]
    assert cli.main([*args, str(folder)]) == 1
    whole = json.loads((out / "summary.json").read_text())
    # A factory's model counts as its own weights (summary's seed: null), but they are drawn
    # here: the job holds the seed that built them.
    seed = json.loads((out / "shards" / "job.json").read_text())["seed"]
    assert isinstance(seed, int)
    (out / "shards" / "shard-00001.json").unlink()  # as if killed in the second shard
    capsys.readouterr()
    assert cli.main([*args, "--resume", str(folder)]) == 1
    assert "resuming: 2 finished shard(s) reused" in capsys.readouterr().err  # of 3
    assert json.loads((out / "summary.json").read_text()) == whole  # the same weights
    assert cli.main([*args, "--resume", "--seed", str(seed + 1), str(folder)]) == 2
    assert "the seed (--seed)" in capsys.readouterr().err  # and SmoothGrad's, which it sets


def test_resumed_without_seed_records_the_seed_the_uncut_run_was_given(tmp_path: Path, capsys):
    """It recorded "seed": null where the uncut run recorded 0."""
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    args = ["analyse", "--model", "demo_shapes", "--device", "cpu", "--quiet",
            "--no-tensorboard", "--cam", "none", "--shard-size", "2", "--out", str(out)]
    assert cli.main([*args, "--seed", "0", str(folder)]) == 1  # the broken file fails
    whole = json.loads((out / "summary.json").read_text())
    assert whole["seed"] == 0
    (out / "shards" / "shard-00001.json").unlink()  # as if killed in the second shard
    capsys.readouterr()
    assert cli.main([*args, "--resume", str(folder)]) == 1
    assert "resuming: 2 finished shard(s) reused" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text()) == whole
