"""A successful `--engine ray` run keeps Ray's own log lines (its Python loggers' and its C++
core's, which the driver prints to descriptor 2) off the terminal: they are in DIR/ray.log,
and on the terminal with --verbose.

Run in a loopback-only network namespace, as the other Ray tests (tests/loopback.py); there
Ray's C++ core always warns that it has no route to 8.8.8.8, and Ray Data's actor pool logs an
ERROR about its constructor arguments: lines a successful run printed before.
"""

from __future__ import annotations

import os
import re
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

# Ray's Python log line ("2026-12-01 11:19:05,171\tWARNING file.py:85 -- ...") and its C++
# core's ("[2026-12-01 11:19:05,193 W 20831 20831] file.cc:330: ...").
RAY_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+\s+(DEBUG|INFO|WARNING|ERROR)\s+\S+:\d+ --"
                      r"|^\[\d{4}-\d\d-\d\d [\d:,]+ [DIWEF] \d+ \d+\]", re.MULTILINE)


def _atlas(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [*LOOPBACK_ONLY, sys.executable, "-m", "inspector.cli", "atlas", "--model",
               "demo_shapes", "--device", "cpu", "--layers", "stage3", "--top", "2",
               "--engine", "ray", "--workers", "1", "--quiet", "--out", str(out), *extra,
               str(folder)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(RAY is not None and not os.environ.get("CI"), reason=RAY or "")
def test_a_successful_ray_run_prints_no_ray_log_lines_unless_verbose(tmp_path: Path):
    require_loopback_namespace()
    folder = draw_folder(tmp_path / "images", count=4)
    for broken in folder.glob("*.png"):  # the folder's broken files: a run without a failure
        broken.unlink()

    quiet = _atlas(folder, tmp_path / "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "4 images in the atlas, 0 failed" in quiet.stdout
    assert RAY_LINE.findall(quiet.stderr) == [], quiet.stderr
    log = (tmp_path / "quiet" / "ray.log").read_text()
    assert RAY_LINE.search(log), log  # kept, not lost

    verbose = _atlas(folder, tmp_path / "verbose", "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    assert RAY_LINE.search(verbose.stderr), verbose.stderr
    assert not (tmp_path / "verbose" / "ray.log").exists()
