"""Segmentation models (core.tasks): torchvision's DeepLabV3 with random weights, through the
Session (the mask, Seg-Grad-CAM: a class's score summed over its predicted pixels) and the
analyse CLI (`--target seg:CLASS`, the mask in the NPZ at the picture's size)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from task_models import SEGMENTATION_FACTORY, correlation, gradcam_by_hand, picture

from inspector import cli
from inspector.core.explain.cam.targets import parse_target
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import PredictionFrame
from inspector.core.records.targets import SegmentationTarget
from inspector.core.run.session import Session
from inspector.core.tasks import SEGMENTATION, segmentation

NAME = "deeplabv3_mobilenet_v3_large"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session():
    s = Session()
    # The same random weights on every run: load_model seeds torch right before the build.
    s.load_model(ModelSpec(NAME, device="cpu", seed=0)).result(timeout=120)
    yield s
    s.close()


def test_loads_offline_with_voc_classes(session):
    loaded = session.loaded
    assert loaded.task == SEGMENTATION and not loaded.pretrained
    assert len(loaded.categories) == 21 and loaded.categories[0] == "__background__"
    assert loaded.preprocess.crop_size == (520, 520) and loaded.preprocess.resize_size is None
    assert session.default_cam_layer().startswith("backbone.")


def test_the_mask_and_seg_grad_cam(session):
    img = picture()
    loaded = session.loaded
    layer = session.default_cam_layer()
    outcome = session.run(img, cams=(("gradcam", None),), timeout=120)
    frames = session.channel.drain()
    assert outcome.status == "ok", outcome.error
    mask = outcome.mask
    assert mask.shape == (520, 520)
    x = loaded.preprocess(img)[None]
    with torch.no_grad():
        out = loaded.model(x)["out"]
    assert np.array_equal(mask, out[0].argmax(0).numpy())
    # The default target: the largest class, background excepted when another is present.
    counts = np.bincount(mask.ravel(), minlength=21)
    expected = int(counts[1:].argmax()) + 1 if counts[1:].any() else 0
    assert outcome.target == expected
    pred = next(f for f in frames if isinstance(f, PredictionFrame))
    assert pred.task == SEGMENTATION and pred.mask is not None
    present = sorted(np.flatnonzero(counts), key=lambda c: -counts[c])
    assert [p.index for p in pred.top] == present[:5]
    assert pred.top[0].prob == pytest.approx(counts[present[0]] / mask.size)

    c = outcome.target
    cam = outcome.cams[("gradcam", layer)]
    assert cam.shape == (520, 520)

    def seg_score(output):
        scores = output["out"]
        return (scores[0, c] * (scores[0].argmax(0) == c)).sum()

    by_hand = gradcam_by_hand(loaded.model, layer, lambda m, t: m(t), x, seg_score)
    assert by_hand.max() > 0
    assert correlation(cam, by_hand) >= 0.99


def test_a_class_with_no_pixel_is_a_one_line_error(session):
    first = session.run(picture(), gradients=False, timeout=120)
    session.channel.drain()
    absent = next(c for c in range(21) if not (first.mask == c).any())
    outcome = session.run(picture(), target=SegmentationTarget(absent), timeout=120)
    session.channel.drain()
    name = session.loaded.categories[absent]
    assert outcome.error == f"seg:{absent}: no pixel of this image is predicted as '{name}'"


def test_parse_target_takes_names_and_indices(session):
    model, cats = session.loaded.model, session.loaded.categories
    assert parse_target("seg:dog", SEGMENTATION, cats, model) == SegmentationTarget(12)
    assert parse_target("seg:3", SEGMENTATION, cats, model) == SegmentationTarget(3)
    assert parse_target("cat", SEGMENTATION, cats, model) == SegmentationTarget(8)
    assert parse_target("top1", SEGMENTATION, cats, model) is None
    with pytest.raises(ValueError, match="not a class of this model"):
        parse_target("seg:21", SEGMENTATION, cats, model)
    with pytest.raises(ValueError, match="no class named 'zebra'"):
        parse_target("seg:zebra", SEGMENTATION, cats, model)
    with pytest.raises(ValueError, match="needs a detection model"):
        parse_target("det:0", SEGMENTATION, cats, model)


def test_the_mask_maps_back_to_the_picture():
    square = Preprocess(crop_size=(4, 4), resize_size=None, mean=(0, 0, 0), std=(1, 1, 1))
    m = np.arange(16).reshape(4, 4)
    # Each picture pixel takes the input pixel under its centre.
    assert np.array_equal(segmentation.to_original(m, square, (2, 2)), [[5, 7], [13, 15]])
    # A centre crop leaves the picture's sides out: -1 there.
    crop = Preprocess(crop_size=(2, 2), resize_size=2, mean=(0, 0, 0), std=(1, 1, 1))
    out = segmentation.to_original(np.array([[1, 2], [3, 4]]), crop, (4, 2))
    assert out.tolist() == [[-1, 1, 2, -1], [-1, 3, 4, -1]]


@pytest.fixture(scope="module")
def factory(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("factory") / "segmenter.py"
    path.write_text(SEGMENTATION_FACTORY)
    return f"{path}:build"


def test_analyse_writes_the_mask_at_the_pictures_size(factory, tmp_path: Path, capsys):
    image = tmp_path / "pets.png"
    picture(120, 90).save(image)
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--device", "cpu", "--out", str(out),
                   str(image)])
    assert rc == 0, capsys.readouterr().err
    (entry,) = json.loads((out / "summary.json").read_text())["images"]
    assert entry["error"] is None and "detections" not in entry
    with np.load(out / entry["files"]["npz"]) as npz:
        mask = npz["mask"]
        assert mask.shape == (90, 120)  # the picture's (height, width)
        assert npz["logits"].shape == (1, 21, 160, 160)
        assert set(np.unique(mask)) <= set(range(21))
        # Nearest neighbour from the 160 x 160 input's argmax.
        small = npz["logits"][0].argmax(0)
        rows = np.floor((np.arange(90) + 0.5) * 160 / 90).astype(int)
        cols = np.floor((np.arange(120) + 0.5) * 160 / 120).astype(int)
        assert np.array_equal(mask, small[rows][:, cols])
    assert entry["target"] in set(np.unique(mask).tolist())


def test_analyse_seg_target_by_name_and_a_bad_one(factory, tmp_path: Path, capsys):
    image = tmp_path / "pets.png"
    picture(64, 48).save(image)
    rc = cli.main(["analyse", "--model", factory, "--device", "cpu", "--target", "seg:kitten",
                   "--out", str(tmp_path / "out"), str(image)])
    err = capsys.readouterr().err
    assert rc == 2 and "no class named 'kitten'" in err and "Traceback" not in err
    rc = cli.main(["analyse", "--model", factory, "--device", "cpu", "--target", "det:0",
                   "--out", str(tmp_path / "out"), str(image)])
    err = capsys.readouterr().err
    assert rc == 2 and "det:K needs a detection model, this is a segmentation model" in err
