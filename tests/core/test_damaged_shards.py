"""`--resume` over a damaged shard (bad JSON, a pickle, files it lists gone) names it in one
sentence and redoes it, where it used to end in a traceback or trust the record."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from atlas_images import draw_folder

from inspector import cli
from inspector.batch.engine.shards import ShardStore

FACTORY = """
from torch import nn


def build():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))
"""


def _damage_json(path: Path) -> None:
    path.write_text('{"images": [')


def _damage_pickle(path: Path) -> None:
    path.write_bytes(pickle.dumps({"images": []}))


@pytest.mark.parametrize("damage", [_damage_json, _damage_pickle])
def test_resume_redoes_a_damaged_analyse_shard(tmp_path: Path, capsys, damage):
    factory = tmp_path / "random_model.py"
    factory.write_text(FACTORY)
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    args = ["analyse", "--model", f"{factory}:build", "--quiet", "--no-tensorboard",
            "--cam", "none", "--layers", "0", "--shard-size", "2", "--seed", "0",
            "--out", str(out)]
    assert cli.main([*args, str(folder)]) == 1
    whole = json.loads((out / "summary.json").read_text())
    damage(out / "shards" / "shard-00000.json")
    capsys.readouterr()
    assert cli.main([*args, "--resume", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "shard-00000.json is damaged" in err and "Traceback" not in err
    assert "resuming: 2 finished shard(s) reused" in err
    assert json.loads((out / "summary.json").read_text()) == whole


def test_resume_redoes_a_shard_whose_files_are_missing(tmp_path: Path, capsys):
    factory = tmp_path / "random_model.py"
    factory.write_text(FACTORY)
    folder = draw_folder(tmp_path / "images", count=3)
    out = tmp_path / "out"
    args = ["analyse", "--model", f"{factory}:build", "--quiet", "--no-tensorboard",
            "--cam", "none", "--layers", "0", "--shard-size", "2", "--seed", "0",
            "--out", str(out)]
    assert cli.main([*args, str(folder)]) == 1
    record = ShardStore(out).load_json(0)
    files = [out / rel for e in record["images"] for rel in e["files"].values()]
    assert files
    for f in files:
        f.unlink()
    capsys.readouterr()
    assert cli.main([*args, "--resume", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "shard-00000.json is damaged" in err and "missing" in err
    assert all(f.is_file() for f in files)


def test_resume_fits_again_over_a_damaged_concepts_fit(tmp_path: Path):
    pytest.importorskip("sklearn")
    from inspector.batch.concepts import ConceptOptions, run_concepts
    from inspector.core.models.base import ModelSpec

    folder = draw_folder(tmp_path / "images", count=6)
    said: list[str] = []

    def options(**kw):
        return ConceptOptions(spec=ModelSpec(device="cpu"), layer="stage3", k=3,
                              out=tmp_path / "out", top=2, batch_size=4, shard_size=4,
                              sample=6, workers=0, progress=False, warn=said.append, **kw)

    assert run_concepts(options(), [str(folder)]) == 1  # the two broken files
    fit = tmp_path / "out" / "shards" / "fit.npz"
    fit.write_bytes(fit.read_bytes()[:40])  # truncated
    said.clear()
    assert run_concepts(options(resume=True), [str(folder)]) == 1
    assert any("fit.npz is damaged" in m for m in said), said
    assert (tmp_path / "out" / "concepts.json").is_file()
