"""The output folder of `analyse` and `atlas` (inspector.batch.engine.out_dir): one that cannot be
written is refused before any work in one sentence (exit 2); a disk that fills up stops the
run at the first failed write with one sentence about the disk, blaming no image and leaving
no `.part` file; a folder another run is writing is refused; a stale lock is taken over; the
lock goes at the end, also after a failure and Ctrl+C.

A full disk and a read-only one are real: a 300 KiB tmpfs, mounted read-only for the second.
Mounting needs root (CI runs as root); where it is not permitted those tests are skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from atlas_images import draw_folder

from inspector import cli
from inspector.batch.engine.out_dir import LOCK_NAME, OutDirError, claim

ROOT = Path(__file__).resolve().parents[2]

ANALYSE = ["analyse", "--device", "cpu", "--quiet"]
ATLAS = ["atlas", "--device", "cpu", "--quiet", "--layers", "stage3", "--workers", "0"]

# Holds the lock of sys.argv[1] as an `analyse` run would, says so, and waits to be killed.
HOLDER = """
import sys, time
from pathlib import Path
from inspector.batch.engine.out_dir import claim

with claim(Path(sys.argv[1]), "analyse"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(3600)
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def _one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def _parts(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.name.endswith((".part", ".part.npz"))]


@contextlib.contextmanager
def _tmpfs(where: Path, read_only: bool = False):
    """A 300 KiB tmpfs at `where` (read-only: with an empty folder `out` made first)."""
    where.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.strip()}")
    try:
        if read_only:
            (where / "out").mkdir()
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


# -- checked before any work ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [ANALYSE, ATLAS], ids=["analyse", "atlas"])
def test_an_out_that_is_a_file_is_refused_in_one_sentence(tmp_path: Path, command):
    folder = draw_folder(tmp_path / "images", count=2)
    out = tmp_path / "results.txt"
    out.write_text("mine\n")
    done = _cli(*command, "--out", str(out), str(folder))
    assert done.returncode == 2
    assert "is a file, not a folder" in _one_sentence(done.stderr)
    assert out.read_text() == "mine\n"


@pytest.mark.parametrize("command", [ANALYSE, ATLAS], ids=["analyse", "atlas"])
@pytest.mark.parametrize("existing", [True, False], ids=["existing", "to-create"])
def test_a_read_only_out_is_refused_in_one_sentence(tmp_path: Path, command, existing):
    folder = draw_folder(tmp_path / "images", count=2)
    with _tmpfs(tmp_path / "disk", read_only=True) as disk:
        out = disk / "out" if existing else disk / "new" / "out"
        done = _cli(*command, "--out", str(out), str(folder))
    assert done.returncode == 2
    sentence = _one_sentence(done.stderr)
    assert str(out) in sentence and "Read-only file system" in sentence


# -- a disk that fills up -------------------------------------------------------------------------


@pytest.mark.parametrize("command", [ANALYSE, ATLAS], ids=["analyse", "atlas"])
def test_a_full_disk_stops_the_run_with_one_sentence_about_the_disk(tmp_path: Path, command):
    folder = draw_folder(tmp_path / "images", count=12)
    with _tmpfs(tmp_path / "disk") as disk:
        out = disk / "out"
        done = _cli(*command, "--out", str(out), str(folder))
        parts = _parts(disk)
        lock = (out / LOCK_NAME).exists()
    assert done.returncode == 1
    # The broken files of the folder are skipped, each in its own line; then one sentence.
    lines = [line for line in done.stderr.splitlines() if "skipped" not in line]
    sentence = _one_sentence("\n".join(lines))
    assert f"cannot write to {out}: No space left on device" in sentence
    assert "free there" in sentence and "--resume" in sentence
    blamed = [line for line in done.stderr.splitlines()
              if "skipped" in line and "img" in line]
    assert blamed == []  # no readable image is blamed for the disk
    assert parts == [] and not lock
    assert "images analysed" not in done.stdout and "in the atlas" not in done.stdout


# -- the lock -------------------------------------------------------------------------------------


def test_a_folder_another_run_writes_is_refused(tmp_path: Path):
    folder = draw_folder(tmp_path / "images", count=2)
    out, held = tmp_path / "out", tmp_path / "held"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), str(held)], env=env)
    try:
        for _ in range(600):
            if held.exists() or holder.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
        assert held.exists(), "the holder never took the lock"
        for command in (ANALYSE, ATLAS):
            done = _cli(*command, "--out", str(out), str(folder))
            assert done.returncode == 2
            sentence = _one_sentence(done.stderr)
            assert f"{out} is being written by another network-inspector analyse run " \
                   f"(pid {holder.pid}" in sentence
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written
    finally:
        holder.kill()
        holder.wait(timeout=60)


def _lock_file(out: Path, pid: int, host: str | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                             "command": "atlas", "started": "earlier"}))


def test_a_lock_file_naming_a_live_process_refuses(tmp_path: Path):
    """Without the flock (a file system whose locks are not shared), the pid still counts."""
    folder = draw_folder(tmp_path / "images", count=2)
    out = tmp_path / "out"
    _lock_file(out, os.getpid())  # this test's process: it runs
    done = _cli(*ATLAS, "--out", str(out), str(folder))
    assert done.returncode == 2
    assert f"another network-inspector atlas run (pid {os.getpid()}, since earlier)" in \
        _one_sentence(done.stderr)
    assert (out / LOCK_NAME).exists()  # not ours to remove


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


@pytest.mark.parametrize("command", [ANALYSE, ATLAS], ids=["analyse", "atlas"])
def test_a_stale_lock_is_taken_over_and_the_lock_goes_at_the_end(tmp_path: Path, command):
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    pid = _dead_pid()
    _lock_file(out, pid)
    done = _cli(*command, "--out", str(out), str(folder))
    assert done.returncode == 1, done.stderr  # the two broken files of the folder
    assert f"locked by a run that no longer runs (pid {pid}); taking it over" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / LOCK_NAME).exists()
    assert (out / ("summary.json" if command is ANALYSE else "atlas.json")).is_file()


def test_a_lock_of_another_host_whose_flock_is_free_is_taken_over(tmp_path: Path):
    out = tmp_path / "out"
    _lock_file(out, os.getpid(), host="elsewhere.invalid")
    notes = []
    with claim(out, "atlas", warn=notes.append):
        mine = json.loads((out / LOCK_NAME).read_text())
    assert mine["pid"] == os.getpid() and mine["host"] == socket.gethostname()
    assert "no longer runs (pid" in notes[0] and "on elsewhere.invalid" in notes[0]
    assert not (out / LOCK_NAME).exists()


def test_a_second_claim_in_the_same_process_is_refused(tmp_path: Path):
    out = tmp_path / "a" / "b"
    with claim(out, "analyse"):
        with pytest.raises(OutDirError, match="being written by another"):
            claim(out, "atlas")
        assert (out / LOCK_NAME).exists()
    assert not (out / LOCK_NAME).exists()
    assert not (tmp_path / "a").exists()  # made by the claim, left empty: removed


def test_the_lock_goes_after_ctrl_c_and_after_a_failure(tmp_path: Path, capsys, monkeypatch):
    import inspector.batch.analyse.shards as analyse_shards
    import inspector.batch.atlas as atlas

    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"

    held = []

    def interrupt(*args, **kwargs):
        held.append((out / LOCK_NAME).exists() or (tmp_path / "atlas" / LOCK_NAME).exists())
        raise KeyboardInterrupt

    def fail(*args, **kwargs):
        held.append((out / LOCK_NAME).exists() or (tmp_path / "atlas" / LOCK_NAME).exists())
        raise RuntimeError("a model that fails")

    monkeypatch.setattr(analyse_shards, "analyse_image", interrupt)
    assert cli.main([*ANALYSE, "--no-tensorboard", "--out", str(out), str(folder)]) == 130
    assert not (out / LOCK_NAME).exists() and _parts(out) == []

    monkeypatch.setattr(analyse_shards, "analyse_image", fail)
    with pytest.raises(RuntimeError, match="a model that fails"):
        cli.main([*ANALYSE, "--no-tensorboard", "--out", str(out), str(folder)])
    assert not (out / LOCK_NAME).exists()

    monkeypatch.setattr(atlas, "_statistics", interrupt)
    assert cli.main([*ATLAS, "--out", str(tmp_path / "atlas"), str(folder)]) == 130
    assert not (tmp_path / "atlas" / LOCK_NAME).exists()
    monkeypatch.setattr(atlas, "_statistics", fail)
    assert cli.main([*ATLAS, "--out", str(tmp_path / "atlas"), str(folder)]) == 1
    assert "the run stopped: RuntimeError: a model that fails" in capsys.readouterr().err
    assert not (tmp_path / "atlas" / LOCK_NAME).exists()
    assert held == [True] * 4  # each run held the lock while it worked
