"""The bundled demo model: its data, its shipped weights, its trainer.

The accuracy and pointing-game tests score the shipped weights on images drawn from seeds
the trainer never used (training uses data set 0, validation 1).
"""

from __future__ import annotations

import json
import socket
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from inspector.core.explain.cam.compute import compute_cams
from inspector.demo import (
    CONFIG_NAME,
    DEMO_DIR,
    WEIGHTS_NAME,
    DemoModelError,
    load_demo_model,
    sample_images,
)
from inspector.demo.evaluate import accuracy, normalize
from inspector.demo.model import CAM_LAYER, build_model, count_parameters
from inspector.demo.shapes import CLASSES, IMAGE_SIZE, ShapesDataset, render
from inspector.demo.train import TrainConfig, train

TEST_SEED = 2718  # accuracy test images
POINTING_SEED = 31415  # pointing-game images


def _hits(model, x: torch.Tensor, targets: torch.Tensor, boxes: torch.Tensor) -> int:
    """How many of the Grad-CAMs of `targets` have their arg-max (the first one on ties)
    inside the image's (x0, y0, x1, y1) box."""
    res = compute_cams(model, x, ("gradcam",), layer=CAM_LAYER, target=targets.tolist())
    cams = torch.from_numpy(res.cams["gradcam"])
    b, h, w = cams.shape
    idx = cams.reshape(b, -1).argmax(1)
    ys, xs = idx // w, idx % w
    inside = (xs >= boxes[:, 0]) & (xs < boxes[:, 2]) & (ys >= boxes[:, 1]) & (ys < boxes[:, 3])
    return int(inside.sum())


def pointing_game(model, images: int, seed: int, batch_size: int = 50) -> tuple[int, int, int]:
    """(images, target hits, distractor hits) of the pointing game (Zhang et al., "Top-down
    neural attention by excitation backprop"): whether the maximum of a class's Grad-CAM falls
    inside the box of the shape of that class, asked of the main shape's class and of the
    distractor's, on `images` drawn images that all hold a distractor."""
    # Forced-distractor images can, rarely, find no room for the distractor: draw a few more
    # and keep the first `images` that have one.
    dataset = ShapesDataset(int(images * 1.1) + 10, seed, distractor=True)
    seen = t_hits = d_hits = 0
    for batch in DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0):
        keep = batch["distractor"] >= 0
        keep &= torch.cumsum(keep.long(), 0) + seen <= images
        if not keep.any():
            break
        x = normalize(batch["image"][keep])
        t_hits += _hits(model, x, batch["label"][keep], batch["box"][keep])
        d_hits += _hits(model, x, batch["distractor"][keep], batch["distractor_box"][keep])
        seen += int(keep.sum())
    return seen, t_hits, d_hits


@pytest.fixture(scope="module")
def demo():
    torch.manual_seed(0)
    return load_demo_model()


# -- the data set ---------------------------------------------------------------------------


def test_items_depend_only_on_seed_and_index():
    a, b = ShapesDataset(20, seed=5), ShapesDataset(1000, seed=5)
    for i in (0, 7, 19):
        x, y = a[i], b[i]
        assert torch.equal(x["image"], y["image"]) and torch.equal(x["box"], y["box"])
    assert not torch.equal(ShapesDataset(1, seed=6)[0]["image"], a[0]["image"])
    item = a[3]
    assert item["image"].shape == (3, IMAGE_SIZE, IMAGE_SIZE) and item["image"].dtype == torch.uint8


def test_distractor_is_smaller_other_class_and_apart():
    found = 0
    for i in range(40):
        s = render(11, i, distractor=True)
        if s.distractor is None:
            continue
        found += 1
        t, d = s.target, s.distractor
        assert d.label != t.label
        assert d.area <= 0.4 * t.area
        # The boxes do not overlap, and both lie inside the image.
        assert (
            t.box[2] <= d.box[0]
            or d.box[2] <= t.box[0]
            or t.box[3] <= d.box[1]
            or d.box[3] <= t.box[1]
        )
        for box in (t.box, d.box):
            assert 0 <= box[0] < box[2] <= IMAGE_SIZE and 0 <= box[1] < box[3] <= IMAGE_SIZE
    assert found >= 38
    assert render(11, 0, distractor=False).distractor is None


def test_bad_index_is_a_clear_error():
    with pytest.raises(IndexError, match="ShapesDataset"):
        ShapesDataset(3, seed=0)[3]


# -- the model ------------------------------------------------------------------------------


def test_model_is_small_and_keeps_a_cam_grid(demo):
    model, meta = demo
    assert count_parameters(model) < 1_000_000
    assert not model.training
    assert meta["classes"] == list(CLASSES) and len(CLASSES) >= 8
    seen = {}

    def record(_module, _inputs, output):
        seen["shape"] = tuple(output.shape)  # returns None: the output is left as it is

    handle = dict(model.named_modules())[CAM_LAYER].register_forward_hook(record)
    try:
        with torch.no_grad():
            out = model(torch.zeros(2, 3, IMAGE_SIZE, IMAGE_SIZE))
    finally:
        handle.remove()
    assert out.shape == (2, len(CLASSES))
    assert seen["shape"][2] >= 8 and seen["shape"][3] >= 8
    names = {n for n, _ in model.named_children()}
    assert {"stem", "stage1", "stage2", "stage3", "head"} <= names


def test_shipped_model_accuracy_on_fresh_images(demo):
    model, _ = demo
    acc = accuracy(model, ShapesDataset(1000, seed=TEST_SEED))
    print(f"\ndemo accuracy on 1000 fresh images: {acc:.4f}")
    assert acc >= 0.97


def test_pointing_game(demo):
    model, _ = demo
    images, target_hits, distractor_hits = pointing_game(model, images=200, seed=POINTING_SEED)
    print(f"\npointing game (Grad-CAM): target {target_hits / images:.3f}, "
          f"distractor {distractor_hits / images:.3f} on {images} images")
    assert images == 200
    assert target_hits / images >= 0.90
    assert distractor_hits / images >= 0.80


def test_samples_exist_and_are_classified_as_named(demo):
    model, meta = demo
    paths = sample_images()
    assert len(paths) >= 10
    with_distractor = [p for p in paths if "_with_" in p.stem]
    assert 0 < len(with_distractor) < len(paths)
    x = torch.stack([torch.from_numpy(np.array(Image.open(p).convert("RGB"))) for p in paths])
    x = x.permute(0, 3, 1, 2)
    with torch.no_grad():
        pred = model(normalize(x, meta["preprocess"]["mean"], meta["preprocess"]["std"])).argmax(1)
    for p, k in zip(paths, pred.tolist()):
        assert p.stem.startswith(CLASSES[k] + "_"), f"{p.name} classified as {CLASSES[k]}"


# -- loading --------------------------------------------------------------------------------


def test_loading_needs_no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the demo model tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    model, meta = load_demo_model()
    assert meta["name"] == "demo_shapes" and meta["weights_path"].endswith(WEIGHTS_NAME)
    with torch.no_grad():
        assert model(torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE)).shape == (1, len(CLASSES))


def test_shipped_files_and_json():
    assert (DEMO_DIR / WEIGHTS_NAME).stat().st_size < 2_000_000
    meta = json.loads((DEMO_DIR / CONFIG_NAME).read_text())
    pre = meta["preprocess"]
    assert pre["crop_size"] == [IMAGE_SIZE, IMAGE_SIZE] and len(pre["mean"]) == len(pre["std"]) == 3
    assert meta["trained"]["accuracy"] >= 0.97 and meta["trained"]["steps"] > 0


def test_missing_files_name_the_folder(tmp_path):
    with pytest.raises(DemoModelError, match=str(tmp_path)):
        load_demo_model(demo_dir=tmp_path)
    (tmp_path / CONFIG_NAME).write_text((DEMO_DIR / CONFIG_NAME).read_text())
    (tmp_path / WEIGHTS_NAME).write_bytes(b"not a safetensors file")
    with pytest.raises(DemoModelError, match=WEIGHTS_NAME):
        load_demo_model(demo_dir=tmp_path)


def test_demo_package_imports_neither_qt_nor_torch_eagerly():
    import subprocess

    code = ("import sys, inspector.demo; "
            "print(any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules), "
            "'torch' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# -- the trainer ----------------------------------------------------------------------------


def test_trainer_loss_falls_and_writes_a_loadable_model(tmp_path):
    # A tiny model on 32 images, without augmentation: the loss must fall within 30 steps.
    cfg = TrainConfig(images=32, batch_size=16, lr=5e-3, val_images=0, workers=0,
                      widths=(8, 16, 16, 32), augment=False)  # fmt: skip
    metrics = train(tmp_path, steps=30, seed=3, progress=False, config=cfg)
    losses = metrics["losses"]
    assert len(losses) == 30
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first - 0.3, f"loss did not fall: {first:.3f} -> {last:.3f}"
    model, meta = load_demo_model(demo_dir=tmp_path)
    assert meta["trained"]["steps"] == 30 and meta["arch"]["widths"] == [8, 16, 16, 32]
    assert isinstance(model, type(build_model(len(CLASSES))))
