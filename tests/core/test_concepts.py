"""Concepts: per-image DFF equals pytorch-grad-cam's `dff`; the folder command's concepts
reconstruct the pooled activations within the error they report; Ray gives local's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from atlas_images import draw_folder
from loopback import LOOPBACK_ONLY, require_loopback_namespace

from inspector.core.models.base import ModelSpec, has_module
from inspector.core.models.load import load_model

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not has_module("sklearn"),
                                reason="scikit-learn is not installed (the [concepts] extra)")


@pytest.fixture(scope="module")
def demo():
    return load_model(ModelSpec(device="cpu"))


@pytest.fixture(scope="module")
def stage3(demo, ) -> np.ndarray:
    from inspector import demo as demo_package
    from inspector.core.inputs.images import load_image

    x = torch.stack([demo.preprocess(load_image(p)) for p in demo_package.sample_images()])
    kept = []
    handle = demo.model.stage3.register_forward_hook(
        lambda _m, _a, out: kept.append(out.detach().numpy().copy()))
    try:
        with torch.no_grad():
            demo.model(x)
    finally:
        handle.remove()
    return kept[0]


def _reference_dff(acts: np.ndarray, k: int):
    """pytorch-grad-cam 1.5.7's dff, step by step, with scikit-learn (on a copy)."""
    from sklearn.decomposition import NMF

    b, c, h, w = acts.shape
    a = acts.transpose((1, 0, 2, 3)).copy()
    a[np.isnan(a)] = 0
    a = a.reshape(c, -1)
    offset = a.min(axis=-1)
    a = a - offset[:, None]
    model = NMF(n_components=k, init="random", random_state=0)
    W = model.fit_transform(a)
    return W + offset[:, None], model.components_.reshape(k, b, h, w).transpose((1, 0, 2, 3))


@pytest.mark.parametrize("k", [4, 8])
@pytest.mark.parametrize("images", [1, 12])
def test_dff_equals_pytorch_grad_cams(stage3, k, images):
    from inspector.core.explain.concepts import dff

    acts = stage3[:images].copy()
    kept = acts.copy()
    ours = dff(acts, k)
    concepts, heatmaps = _reference_dff(acts, k)
    assert np.array_equal(acts, kept)  # grad-cam's writes NaN -> 0 into its input; ours not
    assert np.allclose(ours.concepts, concepts, atol=1e-6, rtol=0)
    assert np.allclose(ours.heatmaps, heatmaps, atol=1e-6, rtol=0)
    assert np.allclose(np.linalg.norm(ours.vectors, axis=1), 1.0)
    try:
        from pytorch_grad_cam.feature_factorization.deep_feature_factorization import (
            dff as gradcam_dff,
        )
    except ImportError:  # its package needs ttach, cv2 and matplotlib; the steps above are its
        return
    theirs_c, theirs_h = gradcam_dff(acts.copy(), n_components=k)
    assert np.allclose(ours.concepts, theirs_c, atol=1e-6, rtol=0)
    assert np.allclose(ours.heatmaps, theirs_h, atol=1e-6, rtol=0)


def test_dff_with_nan_like_grad_cam_and_the_class_effect_is_its_head(demo, stage3):
    from inspector.core.explain.concepts import concept_logits, dff

    acts = stage3[:2].copy()
    acts[0, 3, 2, 2] = np.nan
    ours = dff(acts, 4)
    concepts, heatmaps = _reference_dff(acts, 4)
    assert np.allclose(ours.concepts, concepts, atol=1e-6) and np.allclose(ours.heatmaps,
                                                                            heatmaps, atol=1e-6)
    logits = concept_logits(demo, "stage3", ours.concepts.T)
    with torch.no_grad():  # pytorch-grad-cam's computation_on_concepts with the demo's head
        head = demo.model.head(torch.from_numpy(ours.concepts.T.astype(np.float32))).numpy()
    assert np.allclose(logits, head, atol=1e-4)


def _concepts(folder: Path, out: Path, *extra: str, wrap=()) -> subprocess.CompletedProcess:
    command = [*wrap, sys.executable, "-m", "inspector.cli", "concepts", "--model",
               "demo_shapes", "--device", "cpu", "--layer", "stage3", "--k", "5", "--top", "3",
               "--batch-size", "8", "--shard-size", "16", "--sample", "24", "--quiet",
               "--out", str(out), *extra, str(folder)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_folder_concepts_reconstruct_within_the_error_they_report(tmp_path, demo):
    from sklearn.decomposition import NMF, non_negative_factorization

    from inspector.batch.inputs import list_sources
    from inspector.batch.writers import crop_path

    folder = draw_folder(tmp_path / "images", count=40)
    done = _concepts(folder, tmp_path / "out", "--workers", "0")
    assert done.returncode == 1, done.stderr  # the two broken files
    doc = json.loads((tmp_path / "out" / "concepts.json").read_text())
    assert doc["images"] == 40 and len(doc["failed"]) == 2
    npz = np.load(tmp_path / "out" / "concepts.npz")
    w, offset = npz["components"], npz["offset"]
    # Every position of every readable image, independently of the command's code.
    sources = [s for s in list_sources([str(folder)]) if s.path.name not in
               ("notes.png", "cut.png")]
    from inspector.core.inputs.images import load_image

    x = torch.stack([demo.preprocess(load_image(s.path)) for s in sources])
    kept = []
    handle = demo.model.stage3.register_forward_hook(
        lambda _m, _a, out: kept.append(out.detach()))
    try:
        with torch.no_grad():
            demo.model(x)
    finally:
        handle.remove()
    rows = kept[0].permute(0, 2, 3, 1).reshape(-1, w.shape[1]).numpy()
    rows = np.clip(rows - offset, 0, None)
    h, _, _ = non_negative_factorization(rows, H=w, n_components=len(w), init="custom",
                                         update_H=False, max_iter=400)
    error = np.linalg.norm(rows - h @ w) / np.linalg.norm(rows)
    assert doc["rows"] == len(rows)
    assert error == pytest.approx(doc["error"], abs=2e-3)
    # ... and it is not far from what an NMF of all the rows in memory reaches.
    full = NMF(n_components=len(w), init="nndsvda", random_state=0, max_iter=400)
    best = full.fit_transform(rows)
    best_error = np.linalg.norm(rows - best @ full.components_) / np.linalg.norm(rows)
    assert doc["error"] <= 1.5 * best_error
    shares = [c["share"] for c in doc["concepts"]]
    assert all(0 < s < 1 for s in shares)
    # The atlas layout: each concept's top images with boxes and crops.
    layer = doc["layers"]["stage3"]
    assert layer["channels"] == 5
    for c in range(5):
        entries = layer["top"][str(c)]
        assert len(entries) == 3 and all(e["box"] is not None for e in entries)
        assert [e["value"] for e in entries] == sorted((e["value"] for e in entries),
                                                        reverse=True)
        assert crop_path(tmp_path / "out", "stage3", c, 0).is_file()
        assert doc["concepts"][c]["top_classes"][0]["label"] in demo.categories


def test_concepts_refuse_a_bad_layer_and_a_k_above_the_channels(tmp_path):
    folder = draw_folder(tmp_path / "images", count=4)
    bad = _concepts(folder, tmp_path / "a", "--layer", "stage9")
    assert bad.returncode == 2 and "stage9" in bad.stderr and "Traceback" not in bad.stderr
    many = _concepts(folder, tmp_path / "b", "--k", "500")
    assert many.returncode == 2 and "500" in many.stderr and "Traceback" not in many.stderr


@pytest.mark.slow
@pytest.mark.skipif(not has_module("ray") and not os.environ.get("CI"),
                    reason="ray[data] is not importable; it is in the dev extra")
def test_ray_gives_the_local_concepts(tmp_path):
    require_loopback_namespace()
    folder = draw_folder(tmp_path / "images", count=40)
    local = _concepts(folder, tmp_path / "local", "--workers", "0")
    remote = _concepts(folder, tmp_path / "ray", "--engine", "ray", "--workers", "2",
                       wrap=LOOPBACK_ONLY)
    assert local.returncode == remote.returncode == 1, remote.stderr
    a = json.loads((tmp_path / "local" / "concepts.json").read_text())
    b = json.loads((tmp_path / "ray" / "concepts.json").read_text())
    assert np.array_equal(np.load(tmp_path / "local" / "concepts.npz")["components"],
                          np.load(tmp_path / "ray" / "concepts.npz")["components"])
    assert a["error"] == pytest.approx(b["error"], abs=1e-6)
    assert a["layers"] == b["layers"]


def test_removing_a_concept_projects_it_out_and_round_trips_as_text(demo, stage3):
    from inspector.core.edits.interventions import ProjectOut
    from inspector.core.edits.spec import check_edits, format_edit, parse_edit
    from inspector.core.explain.concepts import dff
    from inspector.core.models.load import probe_tree

    concept = dff(stage3[:1], 4).vectors[0]
    edit = ProjectOut("stage3", tuple(float(v) for v in concept))
    (checked,) = check_edits([edit], probe_tree(demo), demo.preprocess.crop_size)
    out = checked.edit_output(torch.from_numpy(stage3[:1]), 0)
    u = torch.from_numpy(concept)
    along = (out * u[None, :, None, None]).sum(dim=1)
    assert float(along.abs().max()) < 1e-4  # nothing of the concept is left
    rest = torch.from_numpy(stage3[:1]) - out  # and only the concept was removed
    assert torch.allclose(rest, (torch.from_numpy(stage3[:1]) * u[None, :, None, None]).sum(
        1, keepdim=True) * u[None, :, None, None], atol=1e-4)
    again = parse_edit(format_edit(edit))
    assert np.allclose(again.vector, edit.vector, rtol=1e-6)


def test_analyse_dff_writes_each_images_concepts_and_heatmaps(tmp_path, capsys):
    from inspector import cli
    from inspector import demo as demo_package

    samples = [str(p) for p in demo_package.sample_images()[:2]]
    out = tmp_path / "out"
    assert cli.main(["analyse", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                     "--no-tensorboard", "--dff", "4", "--dff-layer", "stage3", "--out",
                     str(out), *samples]) == 0
    entries = json.loads((out / "summary.json").read_text())["images"]
    assert len(entries) == 2
    for entry in entries:
        with np.load(out / entry["files"]["npz"]) as npz:
            acts = npz["activation/stage3"]
            concepts, heatmaps = npz["dff/concepts"], npz["dff/heatmaps"]
        assert concepts.shape == (96, 4) and heatmaps.shape == (4, 16, 16)
        assert concepts.dtype == heatmaps.dtype == np.float32
        ref_c, ref_h = _reference_dff(acts.astype(np.float32), 4)
        assert np.allclose(concepts, ref_c, atol=1e-5, rtol=1e-6)
        assert np.allclose(heatmaps, ref_h[0], atol=1e-5, rtol=1e-6)
    # A layer the model does not have: one sentence, exit 2, no traceback.
    capsys.readouterr()
    assert cli.main(["analyse", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                     "--no-tensorboard", "--dff", "4", "--dff-layer", "stage9", "--out",
                     str(tmp_path / "bad"), *samples]) == 2
    err = capsys.readouterr().err
    assert "stage9" in err and "Traceback" not in err
    # More concepts than the layer has channels, and a layer without a spatial output: they
    # failed on every image (exit 1); now one sentence before any.
    for options, said in [(["--dff", "10000", "--dff-layer", "stage3"],
                           "'stage3' has 96 channels at 256 positions, so at most 96"),
                          (["--dff", "2", "--dff-layer", "head"],
                           "--dff-layer head: its output has shape [1, 8], which is not a "
                           "spatial map")]:
        out = tmp_path / f"bad{len(said)}"
        assert cli.main(["analyse", "--model", "demo_shapes", "--device", "cpu", "--quiet",
                         "--no-tensorboard", *options, "--out", str(out), *samples]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_concepts_resume_after_a_cancel_codes_only_the_missing_shards(tmp_path):
    import threading

    from inspector.batch.concepts import ConceptOptions, run_concepts

    folder = draw_folder(tmp_path / "images", count=40)  # + 2 broken: 42, shards of 16

    def options(out, **kw):
        return ConceptOptions(spec=ModelSpec(device="cpu"), layer="stage3", k=5, out=out,
                              top=3, batch_size=8, shard_size=16, sample=24, workers=0,
                              progress=False, warn=lambda m: None, **kw)

    cancel = threading.Event()

    def progress(stage, done, _total):
        if stage == "codes" and done >= 24:  # in shard 1, after shard 0 was written
            cancel.set()

    cut = tmp_path / "cut"
    assert run_concepts(options(cut, on_progress=progress, cancel=cancel), [str(folder)]) == 1
    assert not (cut / "concepts.json").exists()
    shards = sorted(p.name for p in (cut / "shards").glob("shard-*.json"))
    assert shards == ["shard-00000.json"]
    first = (cut / "shards" / "shard-00000.json").stat().st_mtime_ns
    stages: dict[str, int] = {}
    resumed = options(cut, resume=True,
                      on_progress=lambda s, d, t: stages.__setitem__(s, t))
    assert run_concepts(resumed, [str(folder)]) == 1  # the two broken files
    assert "fit" not in stages  # the fit of the cut run is kept
    assert stages["codes"] == 42 - 16  # shards 1 and 2 only
    assert (cut / "shards" / "shard-00000.json").stat().st_mtime_ns == first
    whole = tmp_path / "whole"
    assert run_concepts(options(whole), [str(folder)]) == 1
    a = json.loads((cut / "concepts.json").read_text())
    b = json.loads((whole / "concepts.json").read_text())
    assert np.array_equal(np.load(cut / "concepts.npz")["components"],
                          np.load(whole / "concepts.npz")["components"])
    assert a["error"] == pytest.approx(b["error"], abs=1e-6)
    assert a["layers"] == b["layers"] and a["rows"] == b["rows"]
