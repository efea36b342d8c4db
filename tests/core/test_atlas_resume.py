"""`atlas --resume` after the process was killed gives the uninterrupted run's atlas.json,
without redoing the shards that were finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from atlas_images import draw_folder

ROOT = Path(__file__).resolve().parents[2]

# The child runs the CLI, but once its third shard is on disk it says so in a file and waits
# to be killed: polling the shard files instead raced a fast run that finished (or wrote more
# shards) between the look and the kill.
CHILD = """
import sys, time
from pathlib import Path
from inspector.batch.engine.shards import ShardStore
from inspector.cli import main

marker, argv = Path(sys.argv[1]), sys.argv[2:]
real = ShardStore.save

def save(self, shard, reduction):
    real(self, shard, reduction)
    if len(self.finished()) == 3:
        marker.write_text("ready")
        time.sleep(3600)

ShardStore.save = save
sys.exit(main(argv))
"""


def _command(folder: Path, out: Path, *extra: str, child: Path | None = None) -> list[str]:
    start = ["-m", "inspector.cli"] if child is None else ["-c", CHILD, str(child)]
    return [sys.executable, *start, "atlas", "--model", "demo_shapes",
            "--device", "cpu", "--layers", "stage2,stage3", "--top", "3", "--batch-size", "2",
            "--shard-size", "4", "--workers", "1", "--quiet", "--out", str(out), *extra,
            str(folder)]


def test_resume_after_a_kill_gives_the_uninterrupted_result(tmp_path: Path):
    folder = draw_folder(tmp_path / "images")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    done = subprocess.run(_command(folder, whole), env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr  # the two broken files
    n_shards = len(list((whole / "shards").glob("shard-*.pt")))
    assert n_shards == 16  # 62 files in shards of 4

    marker = tmp_path / "killed-here"
    proc = subprocess.Popen(_command(folder, cut, child=marker), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the run never finished its third shard"
        os.killpg(proc.pid, signal.SIGKILL)  # the process and its DataLoader worker
    finally:
        proc.wait(timeout=60)
    finished = {p.name: p.stat().st_mtime_ns for p in (cut / "shards").glob("shard-*.pt")}
    assert len(finished) == 3
    assert not (cut / "atlas.json").exists()

    resumed = subprocess.run(_command(folder, cut, "--resume"), env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 1, resumed.stderr
    assert f"resuming: {len(finished)} finished shard(s) reused" in resumed.stderr
    for name, mtime in finished.items():  # not redone
        assert (cut / "shards" / name).stat().st_mtime_ns == mtime
    assert (cut / "atlas.json").read_bytes() == (whole / "atlas.json").read_bytes()
    assert (cut / "classes.json").read_bytes() == (whole / "classes.json").read_bytes()
