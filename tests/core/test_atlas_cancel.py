"""The atlas run from a program (the window's File ▸ New atlas…): progress after each batch,
and a cancel that stops at the next batch with the finished shards kept, so that a resumed
run gives the uninterrupted run's atlas.json."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from inspector.batch.atlas import AtlasOptions, run_atlas
from inspector.core.models.base import ModelSpec


def _options(out: Path, **extra) -> AtlasOptions:
    return AtlasOptions(spec=ModelSpec(name="demo_shapes", device="cpu", seed=0),
                        layers=["stage2", "stage3"], out=out, top=3, batch_size=1, workers=0,
                        shard_size=2, progress=False, **extra)


def test_a_cancelled_atlas_keeps_its_shards_and_resumes_to_the_same_result(tmp_path,
                                                                           demo_samples):
    folder = [str(Path(demo_samples[0]).parent)]
    count = len(demo_samples)
    assert run_atlas(_options(tmp_path / "whole"), folder) == 0
    whole = json.loads((tmp_path / "whole" / "atlas.json").read_text())

    cancel, progress, said = threading.Event(), [], []

    def on_progress(stage: str, done: int, total: int) -> None:
        progress.append((stage, done, total))
        if done >= 3:
            cancel.set()  # looked at after this batch: the run stops here

    out = tmp_path / "cut"
    assert run_atlas(_options(out, on_progress=on_progress, cancel=cancel,
                              warn=said.append), folder) == 1
    assert progress == [("atlas", n, count) for n in range(4)]
    assert said[-1].startswith("the atlas was cancelled") and "--resume" in said[-1]
    assert not (out / "atlas.json").exists()
    assert len(list((out / "shards").glob("shard-*.pt"))) == 1  # images 0-1: one shard of 2

    progress.clear()
    assert run_atlas(_options(out, resume=True, on_progress=lambda *a: progress.append(a)),
                     folder) == 0
    assert progress[0] == ("atlas", 0, count - 2)  # the finished shard is not redone
    assert ("boxes", progress[-1][1], progress[-1][1]) == progress[-1]
    assert json.loads((out / "atlas.json").read_text())["layers"] == whole["layers"]
