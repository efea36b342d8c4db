"""`analyse --engine ray` on a local Ray with 2 CPUs writes what the local engine writes, and
without Ray it says what to install.

As in test_atlas_ray: Ray always serves on the machine's network address, so the Ray run is
made in a network namespace that has only loopback (`unshare -n`); where none can be made,
the test is skipped, except in CI (which installs what it needs), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from atlas_images import draw_folder
from loopback import LOOPBACK_ONLY, require_loopback_namespace

ROOT = Path(__file__).resolve().parents[2]

try:
    import ray  # noqa: F401

    RAY = None
except ImportError as e:
    RAY = f"ray is not importable ({e}); it is in the dev extra"


def _run(folder: Path, out: Path, *extra: str, wrap=(), code=None) -> subprocess.CompletedProcess:
    start = ["-m", "inspector.cli"] if code is None else ["-c", code]
    command = [*wrap, sys.executable, *start, "analyse", "--model", "demo_shapes",
               "--device", "cpu", "--cam", "gradcam,layercam", "--layers", "stage1,stage3",
               "--edit", "stage2.0.conv:zero=1,2", "--compare", "--shard-size", "3",
               "--quiet", "--out", str(out), *extra, str(folder)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _same_json(a, b, where=""):
    """Equal, floats within 1e-5."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _same_json(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_json(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, abs=1e-5), where
    else:
        assert a == b, where


@pytest.mark.slow
@pytest.mark.skipif(RAY is not None and not os.environ.get("CI"), reason=RAY or "")
def test_ray_engine_writes_what_the_local_engine_writes(tmp_path: Path):
    require_loopback_namespace()
    folder = draw_folder(tmp_path / "images", count=8)
    local = _run(folder, tmp_path / "local")
    assert local.returncode == 1, local.stderr  # the two broken files
    remote = _run(folder, tmp_path / "ray", "--engine", "ray", "--workers", "2",
                  wrap=LOOPBACK_ONLY)
    assert remote.returncode == 1, remote.stderr
    assert "Traceback" not in remote.stderr

    a, b = tmp_path / "local", tmp_path / "ray"
    for name in ("summary.json", "compare.json"):
        _same_json(json.loads((a / name).read_text()), json.loads((b / name).read_text()), name)
    summary = json.loads((a / "summary.json").read_text())
    assert len(summary["images"]) == 10 and sum(bool(e["error"]) for e in summary["images"]) == 2
    checked = 0
    for entry in summary["images"]:
        for key, rel in entry["files"].items():
            assert (b / rel).is_file(), rel
            if key == "npz":
                with np.load(a / rel) as x, np.load(b / rel) as y:
                    assert x.files == y.files
                    for k in x.files:
                        np.testing.assert_allclose(y[k], x[k], atol=1e-5, err_msg=f"{rel} {k}")
                checked += 1
    assert checked == 8
    assert sorted(p.name for p in (b / "shards").iterdir()) == sorted(
        p.name for p in (a / "shards").iterdir())  # a Ray run resumes a local one, and back
    if any((a / "tensorboard").glob("events.*")):  # tensorboard installed: replayed here
        assert any((b / "tensorboard").glob("events.*"))


def test_missing_ray_is_a_message_and_exit_2(tmp_path: Path):
    folder = draw_folder(tmp_path / "images", count=1)
    code = ("import sys; sys.modules['ray'] = None\n"
            "from inspector.cli import main\n"
            "raise SystemExit(main(sys.argv[1:]))")
    proc = _run(folder, tmp_path / "out", "--engine", "ray", code=code)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'network-inspector[cluster]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_ray_address_needs_the_ray_engine(tmp_path: Path, capsys):
    from inspector import cli

    rc = cli.main(["analyse", "--ray-address", "auto", "--out", str(tmp_path / "o"),
                   str(tmp_path)])
    assert rc == 2 and "--ray-address needs --engine ray" in capsys.readouterr().err
