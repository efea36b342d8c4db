"""`atlas --engine ray` on a local Ray with 2 CPUs gives the local engine's atlas (a folder,
and a short video's frames where PyAV is installed).

Ray always serves on the machine's network address, never loopback alone (it turns
127.0.0.1 into the address of the default route). So the Ray run is made in a network
namespace of its own that has only loopback (`unshare -n`), where Ray's servers and all
their traffic stay on 127.0.0.1; where no such namespace can be made, the test is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from atlas_images import draw_folder
from loopback import LOOPBACK_ONLY, require_loopback_namespace

ROOT = Path(__file__).resolve().parents[2]

try:
    import ray  # noqa: F401
    import ray.data  # noqa: F401

    RAY = None
except ImportError as e:
    RAY = f"ray[data] is not importable ({e}); it is in the dev extra"

EVERY = 5  # of the video's frames, ranked: 0, 5, ...


def _run(inputs: list[Path], out: Path, *engine: str, wrap=()) -> subprocess.CompletedProcess:
    command = [*wrap, sys.executable, "-m", "inspector.cli", "atlas", "--model", "demo_shapes",
               "--device", "cpu", "--layers", "stage1,stage3", "--top", "3", "--batch-size", "8",
               "--shard-size", "16", "--every", str(EVERY), "--quiet", "--out", str(out),
               *engine, *map(str, inputs)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(RAY is not None and not os.environ.get("CI"), reason=RAY or "")
def test_ray_engine_equals_the_local_engine(tmp_path: Path):
    require_loopback_namespace()
    inputs = [draw_folder(tmp_path / "images", count=40)]
    frames = 0
    try:
        from video_clip import FRAMES, write_clip

        inputs.append(write_clip(tmp_path / "clip.mp4", size=64))
        frames = FRAMES // EVERY
    except ImportError:  # no PyAV here (CI has it): the folder alone
        pass
    local = _run(inputs, tmp_path / "local", "--workers", "1")
    assert local.returncode == 1, local.stderr
    # Two actors on a Ray of this machine's CPUs (2 on the machines this was written on).
    remote = _run(inputs, tmp_path / "ray", "--engine", "ray", "--workers", "2",
                  wrap=LOOPBACK_ONLY)
    assert remote.returncode == 1, remote.stderr
    assert "Traceback" not in remote.stderr

    a = json.loads((tmp_path / "local" / "atlas.json").read_text())
    b = json.loads((tmp_path / "ray" / "atlas.json").read_text())
    assert b["images"] == a["images"] == 40 + frames
    assert b["failed"] == a["failed"] and len(a["failed"]) == 2
    for name, layer in a["layers"].items():
        theirs = b["layers"][name]
        assert theirs["dead"] == layer["dead"]
        assert theirs["active_fraction"] == layer["active_fraction"]
        assert theirs["mean"] == pytest.approx(layer["mean"], abs=1e-5)
        for c, entries in layer["top"].items():
            assert [(e["path"], e.get("frame")) for e in theirs["top"][c]] == [
                (e["path"], e.get("frame")) for e in entries]
            assert [e["box"] for e in theirs["top"][c]] == [e["box"] for e in entries]
            assert [e["value"] for e in theirs["top"][c]] == pytest.approx(
                [e["value"] for e in entries], abs=1e-5)
    if frames:  # the video's frames rank among the images somewhere
        assert any("frame" in e for layer in a["layers"].values()
                   for entries in layer["top"].values() for e in entries)
    ca = json.loads((tmp_path / "local" / "classes.json").read_text())
    cb = json.loads((tmp_path / "ray" / "classes.json").read_text())
    assert {k: v["count"] for k, v in cb["classes"].items()} == {
        k: v["count"] for k, v in ca["classes"].items()}
    # The shards of one engine are the shards of the other: a Ray run resumes a local one.
    assert sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir()) == sorted(
        p.name for p in (tmp_path / "local" / "shards").iterdir())


def test_a_row_that_arrives_twice_is_counted_once(tmp_path: Path):
    """What a retried Ray task can do: send rows again. The gatherer keys them by image."""
    import numpy as np

    from inspector.batch.engine.shards import JobKey, ShardStore
    from inspector.batch.job import StatsJob
    from inspector.batch.probe import LayerPlan
    from inspector.batch.ray_engine import _ShardGatherer
    from inspector.batch.reduce import Reduction
    from inspector.core.models.base import DEFAULT_PREPROCESS, ModelSpec

    paths = tuple(Path(f"img{i}.png") for i in range(6))
    job = StatsJob(paths=paths, preprocess=DEFAULT_PREPROCESS,
                   plans={"conv": LayerPlan("conv", 2, False, False, 1)}, cam_layer=None,
                   cam_shape=None, top=2, shard_size=4, batch_size=2)
    store = ShardStore(tmp_path)
    store.prepare(JobKey.of("atlas", ModelSpec(name="m"), 1, {"layers": ["conv"], "top": 2}, 4,
                             paths), resume=False)

    def rows(indices):
        idx = np.asarray(indices, dtype=np.int64)
        return {"index": idx, "error": np.asarray([""] * len(idx), dtype=object),
                "max0": np.stack([idx, -idx]).T.astype(np.float32),
                "argmax0": np.zeros((len(idx), 2), np.int64),
                "mean0": np.ones((len(idx), 2), np.float32),
                "predicted": np.zeros(len(idx), np.int64)}

    gather = _ShardGatherer(job, store, on_failed=lambda m: None)
    assert gather.add(rows([0, 1, 2])) == 3
    assert gather.add(rows([1, 2])) == 0  # again: ignored
    assert gather.add(rows([3, 4])) == 2  # shard 0 complete and saved
    assert gather.add(rows([3])) == 0  # a row of a saved shard
    assert gather.add(rows([5])) == 1
    assert gather.open_shards() == []
    first = Reduction.from_state(store.load_state(0))
    assert first.images == 4
    assert first.layers["conv"].sum_mean.tolist() == [4.0, 4.0]
    assert first.layers["conv"].top_index.tolist() == [[3, 2], [0, 1]]
    assert Reduction.from_state(store.load_state(1)).images == 2


def test_the_actor_decodes_a_video_frame_row_as_the_local_engine_does(tmp_path: Path):
    """AtlasActor, called as Ray Data calls it (no Ray needed): image and frame rows in one
    batch give the figures of the local engine's Dataset for the same sources."""
    pytest.importorskip("av")
    import numpy as np
    import torch
    from video_clip import write_clip

    from inspector.batch.inputs import ImageFiles, Source, collate
    from inspector.batch.job import StatsJob
    from inspector.batch.probe import Probe, plan_layers
    from inspector.batch.ray_engine import AtlasActor
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model, probe_tree

    folder = draw_folder(tmp_path / "images", count=2)
    clip = write_clip(tmp_path / "clip.mp4", size=64)
    sources = [Source(p) for p in sorted(folder.glob("img*.png"))] + [
        Source(clip, 0), Source(clip, 5), Source(clip, 15)]
    spec = ModelSpec(name="demo_shapes", device="cpu")
    loaded = load_model(spec)
    plans = plan_layers(probe_tree(loaded), ["stage2"], loaded.preprocess.crop_size)
    job = StatsJob(paths=(), preprocess=loaded.preprocess, plans=plans, cam_layer=None,
                   cam_shape=None, top=3, shard_size=8, batch_size=8, every=EVERY)
    actor = AtlasActor(job, spec, "cpu")
    out = actor({"index": np.arange(len(sources)),
                 "path": np.asarray([str(s.path) for s in sources], dtype=object),
                 "frame": np.asarray([-1 if s.frame is None else s.frame for s in sources])})
    assert list(out["error"]) == [""] * len(sources)

    actor.videos.close()
    dataset = ImageFiles(sources, loaded.preprocess, every=EVERY)
    batch = collate([dataset[i] for i in range(len(sources))])
    dataset.close()
    with Probe(loaded.model, plans, None) as probe:
        expected = probe.run(batch.x).maxima["stage2"]
    torch.testing.assert_close(torch.from_numpy(out["max0"]), expected, atol=1e-5, rtol=1e-5)
    assert not torch.equal(expected[-1], expected[-2])  # the frames differ: a real check
