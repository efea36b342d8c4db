"""The engine as a plain `pip install .` gives it, without the Makefile: a wheel built from
the tracked sources, installed into a fresh virtual environment, used from its console
command and from a script. A step that only `make` did once hid a crash that every pip
user met; these tests run what such a user runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tracked_copy(dest: Path) -> Path:
    """The files git tracks (what a clone or an sdist holds), without build leftovers."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv whose only way to the project is the wheel installed into it; torch and
    the other dependencies come from this environment's site-packages through a .pth file
    (whose own .pth files, the editable install's among them, are not read)."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know the tracked files")
    base = tmp_path_factory.mktemp("install")
    src = _tracked_copy(base / "src")
    wheels = base / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(src)],
        check=True, capture_output=True, timeout=600,
    )
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = wheels.glob("*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         str(wheel)],
        check=True, capture_output=True, timeout=600,
    )
    return venv


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECTOR_")}
    env.pop("PYTHONPATH", None)
    return env


def test_the_wheel_carries_the_compiled_kernel_and_the_demo(installed, tmp_path):
    code = (
        "import inspector, inspector.resources as r; from inspector.core.stats import fused as f;"
        "print(inspector.__file__); print(f.available(), f.fallback_note());"
        "print((r.resources_dir() / 'demo' / 'shapes_cnn.safetensors').is_file())"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, env=_env(),
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    where, kernel, demo = out.stdout.splitlines()
    assert where.startswith(str(installed)), where  # not this checkout
    assert kernel == "True None" and demo == "True"


def test_the_console_command_analyses_on_the_fast_path(installed, tmp_path):
    sample = sorted((ROOT / "resources" / "demo" / "samples").glob("*.png"))[0]
    out = subprocess.run(
        [str(installed / "bin" / "network-inspector"), "analyse", "--model", "demo_shapes",
         "--quiet", "--no-tensorboard", "--out", str(tmp_path / "out"), str(sample)],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Statistics use torch reductions" not in out.stderr
    assert "Traceback" not in out.stderr
    assert list((tmp_path / "out").glob("*/*.npz"))


SCRIPT = """
import torch
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec, leaf_names
from inspector.core.records.kinds import OUTPUT
from inspector.core.stats import tensor_stats as stats

def refuse(*args, **kwargs):
    raise AssertionError("torch reductions used for a float32 CPU tensor")

stats._torch_stats = refuse  # the fast path must be taken without being asked for
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.LazyLinear(4))
model(torch.zeros(1, 3, 16, 16))
frames = []
with Capture(model, CaptureSpec.for_modules(leaf_names(model), (OUTPUT,)), frames.append):
    with torch.no_grad():
        model(torch.randn(1, 3, 16, 16))
print(sum(1 for f in frames if getattr(f, "stats", None) is not None))
"""


def test_a_script_using_capture_gets_the_compiled_statistics(installed, tmp_path):
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", SCRIPT], cwd=tmp_path, env=_env(),
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == 4  # every leaf's statistics, none from torch
