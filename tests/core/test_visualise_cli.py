"""`network-inspector visualise`: its files, its refusals (exit 2), --resume, and Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from loopback import LOOPBACK_ONLY, require_loopback_namespace
from PIL import Image

from inspector.batch.visualise import VisualiseOptions, parse_channels, run_visualise
from inspector.core.models.base import ModelSpec, has_module

ROOT = Path(__file__).resolve().parents[2]


def _cli(out: Path, *extra: str, wrap=()) -> subprocess.CompletedProcess:
    command = [*wrap, sys.executable, "-m", "inspector.cli", "visualise", "--model",
               "demo_shapes", "--device", "cpu", "--layer", "stage3", "--steps", "8",
               "--batch-size", "2", "--quiet", "--out", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_it_writes_a_picture_per_channel_and_their_objectives(tmp_path):
    from inspector.core.explain.featurevis.render import evaluate
    from inspector.core.explain.featurevis.settings import Target
    from inspector.core.models.load import load_model

    done = _cli(tmp_path / "out", "--channels", "0-3", "--size", "128")
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "out" / "visualise.json").read_text())
    assert (doc["model"], doc["layer"], doc["steps"], doc["seed"]) == ("demo_shapes", "stage3",
                                                                        8, 0)
    assert sorted(doc["channels"], key=int) == ["0", "1", "2", "3"]
    # The demo model's weights are its own: the seed drawn for random weights built nothing.
    assert doc["model_seed"] is None
    loaded = load_model(ModelSpec(device="cpu"))
    for c, entry in doc["channels"].items():
        assert entry["path"] == f"stage3/channel_{int(c):04d}.png"
        picture = np.asarray(Image.open(tmp_path / "out" / entry["path"]).convert("RGB"))
        assert picture.shape[0] >= 128 and picture.shape[1] >= 128
        again = evaluate(loaded, "stage3", picture[None], [Target("channel", int(c))])[0]
        assert again == pytest.approx(entry["objective"], rel=1e-4, abs=1e-5)
    assert not list((tmp_path / "out").rglob("*.part"))


@pytest.mark.parametrize("extra, says", [
    (("--channels", "0-500"), "out of range"),
    (("--channels", "5-2"), "from low to high"),
    (("--channels", "0", "--size", "64"), "below the model input"),
    (("--channels", "0", "--layer", "stage9"), "stage9"),
    (("--channels", "0", "--objective", "direction"), "--directions"),
    (("--channels", "x"), "is not a channel"),
])
def test_bad_options_are_one_sentence_and_exit_2(tmp_path, extra, says):
    done = _cli(tmp_path / "out", *extra)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "visualise.json").exists()


def test_parse_channels():
    assert parse_channels("0-3,7, 5") == [0, 1, 2, 3, 5, 7]
    assert parse_channels("3,17") == [3, 17]


def test_resume_after_a_cancel_redoes_only_the_missing_batches(tmp_path):
    cancel = threading.Event()
    seen: list[int] = []

    def progress(_stage, done, _total):
        seen.append(done)
        if done >= 2 * 4:  # the first batch of 2 channels x 4 steps is done
            cancel.set()

    def options(**kw):
        return VisualiseOptions(spec=ModelSpec(device="cpu"), layer="stage3", channels="0-5",
                                out=tmp_path / "out", steps=4, batch_size=2, progress=False,
                                warn=lambda m: None, **kw)

    assert run_visualise(options(on_progress=progress, cancel=cancel)) == 1
    shards = sorted(p.name for p in (tmp_path / "out" / "shards").glob("shard-*.json"))
    assert shards == ["shard-00000.json"]
    first = (tmp_path / "out" / "stage3" / "channel_0000.png").stat().st_mtime_ns
    todo: list[int] = []
    assert run_visualise(options(resume=True, on_progress=lambda s, d, t: todo.append(t))) == 0
    assert todo and todo[-1] == 4 * 4  # two batches of two channels left, four steps each
    assert (tmp_path / "out" / "stage3" / "channel_0000.png").stat().st_mtime_ns == first
    doc = json.loads((tmp_path / "out" / "visualise.json").read_text())
    assert sorted(doc["channels"], key=int) == [str(c) for c in range(6)]


@pytest.mark.slow
@pytest.mark.skipif(not has_module("ray") and not os.environ.get("CI"),
                    reason="ray[data] is not importable; it is in the dev extra")
def test_ray_gives_the_local_pictures(tmp_path):
    require_loopback_namespace()
    local = _cli(tmp_path / "local", "--channels", "0-5")
    remote = _cli(tmp_path / "ray", "--channels", "0-5", "--engine", "ray", "--workers", "2",
                  wrap=LOOPBACK_ONLY)
    assert local.returncode == remote.returncode == 0, remote.stderr
    for c in range(6):
        name = f"stage3/channel_{c:04d}.png"
        a = np.asarray(Image.open(tmp_path / "local" / name))
        b = np.asarray(Image.open(tmp_path / "ray" / name))
        assert np.array_equal(a, b), c
    a = json.loads((tmp_path / "local" / "visualise.json").read_text())
    b = json.loads((tmp_path / "ray" / "visualise.json").read_text())
    assert a["channels"] == b["channels"]


def test_a_folder_holding_another_jobs_shards_is_refused_and_kept(tmp_path):
    """The batch commands' shared frame (batch.engine.command) answers ShardStore.start's
    JobMismatch: one sentence, exit 2, and the other job's shards are left as they were."""
    out = tmp_path / "vis"
    assert _cli(out, "--channels", "0-1", "--seed", "1").returncode == 0
    shards = sorted(p.name for p in (out / "shards").iterdir())
    other = _cli(out, "--channels", "0-3", "--seed", "1")
    assert other.returncode == 2, other.stderr
    assert "holds shards of a different visualise job" in other.stderr
    assert "Traceback" not in other.stderr and len(other.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in (out / "shards").iterdir()) == shards


def test_directions_that_are_text_or_not_finite_are_one_sentence(tmp_path):
    from inspector.batch.engine.command import OptionError
    from inspector.batch.visualise import load_directions

    text = tmp_path / "d.txt"
    text.write_text("not numbers\n")
    with pytest.raises(OptionError, match="is not an NPZ file") as e:
        load_directions(text)
    assert "pickle" not in str(e.value)
    bad = tmp_path / "nan.npz"
    np.savez(bad, vectors=np.array([[1.0, np.nan]], np.float32))
    with pytest.raises(OptionError, match="not finite"):
        load_directions(bad)
    good = tmp_path / "ok.npz"
    np.savez(good, vectors=np.ones((2, 3), np.float32))
    assert load_directions(good).shape == (2, 3)


@pytest.mark.parametrize("option, value", [("steps", 1_000_000_000), ("size", 100_000)])
def test_huge_steps_or_size_are_refused_before_work(tmp_path, option, value):
    from inspector.batch.engine.command import OptionError

    opts = VisualiseOptions(spec=ModelSpec(device="cpu"), layer="stage3", channels="0",
                            out=tmp_path, **{option: value})
    with pytest.raises(OptionError, match="must be from"):
        opts.check()


def test_a_huge_channel_range_is_refused_without_expanding_it():
    import time

    from inspector.batch.engine.command import OptionError

    t0 = time.perf_counter()
    with pytest.raises(OptionError, match="more channels than any layer has"):
        parse_channels("0-100000000000")
    assert time.perf_counter() - t0 < 1.0
