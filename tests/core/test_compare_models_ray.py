"""`compare-models --engine ray` on a local Ray gives the local engine's cka.json and
matches.json, and its shards are the local engine's (a Ray run resumes a local one).

The Ray run is made in a network namespace with only loopback, as test_atlas_ray.py explains.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback import LOOPBACK_ONLY, require_loopback_namespace

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "resources" / "demo" / "samples"

try:
    import ray  # noqa: F401
    import ray.data  # noqa: F401

    RAY = None
except ImportError as e:
    RAY = f"ray[data] is not importable ({e}); it is in the dev extra"


def _run(out: Path, weights: Path, *engine: str, wrap=()) -> subprocess.CompletedProcess:
    command = [*wrap, sys.executable, "-m", "inspector.cli", "compare-models", "--model",
               "demo_shapes", "--device", "cpu", "--weights-b", str(weights), "--layers",
               "stem,stage1,stage2,stage3,head", "--estimator", "minibatch", "--batch-size",
               "4", "--shard-size", "4", "--match", "stage2:stage2", "--quiet", "--out",
               str(out), *engine, str(SAMPLES)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(RAY is not None and not os.environ.get("CI"), reason=RAY or "")
def test_ray_engine_equals_the_local_engine(tmp_path: Path):
    require_loopback_namespace()
    import torch

    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model

    model = load_model(ModelSpec(name="demo_shapes", device="cpu")).model
    g = torch.Generator().manual_seed(1)
    state = {k: v + 0.1 * v.float().std().nan_to_num(0) * torch.randn(v.shape, generator=g)
             if v.is_floating_point() else v for k, v in model.state_dict().items()}
    weights = tmp_path / "perturbed.pt"
    torch.save(state, weights)
    local = _run(tmp_path / "local", weights, "--workers", "0")
    assert local.returncode == 0, local.stderr
    remote = _run(tmp_path / "ray", weights, "--engine", "ray", "--workers", "2",
                  wrap=LOOPBACK_ONLY)
    assert remote.returncode == 0, remote.stderr
    assert "Traceback" not in remote.stderr
    a = json.loads((tmp_path / "local" / "cka.json").read_text())
    b = json.loads((tmp_path / "ray" / "cka.json").read_text())
    for key in ("layers_a", "layers_b", "images", "failed", "estimator", "order_seed"):
        assert a[key] == b[key]
    for row_a, row_b in zip(a["cka"], b["cka"], strict=True):
        assert row_b == pytest.approx(row_a, abs=1e-7)
    ma = json.loads((tmp_path / "local" / "matches.json").read_text())
    mb = json.loads((tmp_path / "ray" / "matches.json").read_text())
    assert [p["corr"] for p in mb["pairs"]] == pytest.approx(
        [p["corr"] for p in ma["pairs"]], abs=1e-6)
    assert sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir()) == sorted(
        p.name for p in (tmp_path / "local" / "shards").iterdir())
