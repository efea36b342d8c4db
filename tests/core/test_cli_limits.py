"""Options whose values would take all the memory are refused in one sentence before any
work, in a process that could not have taken it (an address-space limit); Ctrl+C stops a
running command with exit status 130 and leaves shards that --resume continues."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# torch (a CUDA build) maps about 3 GiB of address space on import: 4 GiB leaves no room for
# what --channels 0-100000000000 as a set (12 GB) or a billion steps' transforms would take.
ADDRESS_SPACE = 4 << 30


def _cli(*args: str, limit: bool = True, **kwargs) -> subprocess.CompletedProcess:
    def prepare() -> None:
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], preexec_fn=prepare,
                          capture_output=True, text=True, env=env, timeout=300, **kwargs)


VISUALISE = ["visualise", "--model", "demo_shapes", "--device", "cpu", "--layer", "stage3"]


@pytest.mark.parametrize("options, said", [
    (["--channels", "0-100000000000"],
     "--channels: '0-100000000000' goes past 1048575, more channels than any layer has"),
    (["--channels", "0-3", "--steps", "1000000000"], "--steps must be from 1 to 100000"),
    (["--channels", "0-3", "--size", "100000"], "--size must be from 8 to 4096 pixels"),
])
def test_an_option_that_would_take_all_memory_is_one_sentence(tmp_path, options, said):
    out = tmp_path / "out"
    done = _cli(*VISUALISE, *options, "--out", str(out))
    err = done.stderr.strip()
    assert done.returncode == 2, err
    assert err == f"network-inspector: {said}"
    assert not out.exists()


def test_ctrl_c_stops_visualise_with_130_and_resume_continues(tmp_path):
    out = tmp_path / "out"
    args = [*VISUALISE, "--channels", "0-5", "--batch-size", "1", "--steps", "400",
            "--out", str(out), "--quiet"]

    def default_sigint() -> None:  # a shell's background job inherits SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "inspector.cli", *args], env=env,
                             stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        shards = out / "shards"
        deadline = time.monotonic() + 240
        while not list(shards.glob("shard-*")) and time.monotonic() < deadline:
            assert child.poll() is None, child.stderr.read()
            time.sleep(0.05)
        assert list(shards.glob("shard-*")), "no batch finished in 240 s"
        child.send_signal(signal.SIGINT)
        err = child.communicate(timeout=60)[1]  # a hang guard, not a speed target
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
    kept = len(list(shards.glob("shard-*")))
    assert (shards / "job.json").is_file() and 1 <= kept < 6
    assert not list(out.rglob("*.part"))

    done = _cli(*args, "--resume", limit=False)
    assert done.returncode == 0, done.stderr
    assert f"resuming: {kept} finished shard(s) reused" in done.stderr
    assert len(list((out / "stage3").glob("*.png"))) == 6
