"""A run that fails inside torch (an ATen op raising mid-forward, not a Python raise) is a
sentence naming the module and the error, in the engine and in the CLI; the session stays
usable. (The window's side is tested in tests/ui.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import build_tree
from inspector.core.records.frames import ErrorFrame, RunFinished
from inspector.core.run.session import Session

ROOT = Path(__file__).resolve().parents[2]

MODEL_FILE = ROOT / "tests" / "models" / "fails_mid_forward.py"


def _model() -> nn.Module:
    namespace: dict = {}
    exec(compile(MODEL_FILE.read_text(), str(MODEL_FILE), "exec"), namespace)
    return namespace["build"]()


def test_an_aten_error_names_the_module_and_the_next_run_works():
    model = _model().eval()
    pre = Preprocess(crop_size=(8, 8), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)
    s = Session()
    try:
        s.loaded = LoadedModel(model, "fails", "fails", True, ["a", "b"], pre, torch.device("cpu"))
        s.tree = build_tree(model, torch.zeros(1, 3, 8, 8))
        bad = s.run(torch.rand(3, 8, 8))
        assert bad.status == "error"
        errors = [f for f in s.channel.drain() if isinstance(f, ErrorFrame)]
        assert len(errors) == 1 and errors[0].module == "mixer"
        assert errors[0].message.startswith("The run failed in module 'mixer': RuntimeError")
        assert "shapes cannot be multiplied" in errors[0].message
        good = s.run(torch.zeros(3, 8, 8))  # the same session runs again
        assert good.status == "ok"
        assert any(isinstance(f, RunFinished) and f.status == "ok" for f in s.channel.drain())
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    finally:
        s.close()


def test_the_cli_says_it_in_one_sentence(tmp_path):
    sample = sorted((ROOT / "resources" / "demo" / "samples").glob("*.png"))[0]
    out = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "analyse", "--model",
         f"{MODEL_FILE}:build", "--quiet", "--no-tensorboard",
         "--out", str(tmp_path / "out"), str(sample)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("skipped")]
    assert len(line) == 1 and "in module 'mixer'" in line[0], out.stderr
    assert "shapes cannot be multiplied" in line[0]
