"""Detection and segmentation models fine-tuned on their own classes, loaded from a
checkpoint (core.models.task_models): `--model ARCH --weights FILE` for any architecture of
the task catalog, Keypoint R-CNN included. The models are built here with random weights
(weights=None, weights_backbone=None, seeded; nothing downloaded), saved to a temp folder
and loaded through the app's loader."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torchvision
from task_models import correlation, gradcam_by_hand, picture

from inspector import cli
from inspector.core.models import task_models as checkpoints
from inspector.core.models.base import ModelSpec
from inspector.core.models.files import CheckpointMismatch, ModelLoadError
from inspector.core.models.load import list_models, load_model
from inspector.core.models.task_models import preprocess_for, task_models
from inspector.core.records.frames import ErrorFrame, PredictionFrame
from inspector.core.records.targets import DetectionTarget
from inspector.core.run.session import Session
from inspector.core.tasks import DETECTION, SEGMENTATION, detection

pytestmark = pytest.mark.slow

DETECTOR = "fasterrcnn_mobilenet_v3_large_320_fpn"
SEGMENTER = "deeplabv3_mobilenet_v3_large"
KEYPOINTS = "keypointrcnn_resnet50_fpn"


def _build(arch: str, **options) -> torch.nn.Module:
    """`arch` as fine-tuning leaves it: random (seeded) weights, with the batch-norm
    statistics of two pictures. Random ones make a degenerate model (a random MobileNet's
    features are the same everywhere: one class over the whole mask, a CAM of zeros), and
    statistics that are not the defaults catch a loader that dropped them."""
    torch.manual_seed(0)
    model = torchvision.models.get_model(arch, weights=None, weights_backbone=None, **options)
    task = task_models()[arch]
    pre = preprocess_for(model, task)
    batch = torch.stack([pre(picture(seed=seed)) for seed in range(2)])
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # the running statistics: this batch's
    with torch.no_grad():
        if task == DETECTION:  # in training mode the model wants targets: the backbone alone
            model.backbone.train()(model.transform.normalize(batch))
        else:
            model.train()(batch)
    return model.eval()


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    """Faster R-CNN fine-tuned on 3 classes and the background, saved as a training loop
    does (the state_dict under "model", with the epoch)."""
    model = _build(DETECTOR, num_classes=4)
    path = tmp_path_factory.mktemp("det") / "finetuned.pth"
    torch.save({"model": model.state_dict(), "epoch": 12}, path)
    return model, path


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory):
    """DeepLabV3 on 3 classes, with its auxiliary head."""
    model = _build(SEGMENTER, num_classes=3, aux_loss=True)
    path = tmp_path_factory.mktemp("seg") / "deeplab.pt"
    torch.save(model.state_dict(), path)
    return model, path


def test_a_detection_checkpoint_loads_with_its_own_classes(detector):
    model, path = detector
    loaded = load_model(ModelSpec(DETECTOR, checkpoint=str(path), device="cpu"))
    assert loaded.task == DETECTION and loaded.pretrained and loaded.source == str(path)
    assert loaded.categories == ["class 0", "class 1", "class 2", "class 3"]
    assert loaded.model.roi_heads.box_predictor.cls_score.out_features == 4
    assert loaded.description == f"{DETECTOR} (finetuned.pth, 4 classes)"
    # As the catalog's model of this architecture: 0..1 at the model's own side.
    assert loaded.preprocess.crop_size == (320, 320) and loaded.preprocess.std == (1, 1, 1)
    x = loaded.preprocess(picture())
    with torch.no_grad():
        direct, got = model([x])[0], loaded.model([x])[0]
    assert len(direct["boxes"]) > 0
    for key in ("boxes", "labels", "scores"):
        assert torch.equal(got[key], direct[key]), key


def test_a_detection_checkpoint_runs_with_a_cam_through_the_session(detector):
    model, path = detector
    s = Session()
    try:
        s.load_model(ModelSpec(DETECTOR, checkpoint=str(path), device="cpu")).result(120)
        layer = s.default_cam_layer()
        assert layer.startswith("backbone.body.")
        outcome = s.run(picture(), target=DetectionTarget(1), cams=(("gradcam", None),),
                        timeout=120)
        frames = s.channel.drain()
    finally:
        s.close()
    assert outcome.status == "ok", outcome.error
    x = s.loaded.preprocess(picture())
    with torch.no_grad():
        direct = model([x])[0]
    order = detection.sorted_order(direct)
    assert [d.class_index for d in outcome.detections] == direct["labels"][order].tolist()
    assert [d.label for d in outcome.detections[:3]] == [
        f"class {c}" for c in direct["labels"][order][:3].tolist()]
    assert np.allclose([d.box for d in outcome.detections], direct["boxes"][order].numpy())
    pred = next(f for f in frames if isinstance(f, PredictionFrame))
    assert pred.task == DETECTION and pred.target == 1
    cam = outcome.cams[("gradcam", layer)]
    assert cam.shape == (320, 320)
    by_hand = gradcam_by_hand(model, layer, detection.forward, x[None],
                              lambda out: out[0]["scores"][detection.sorted_order(out[0])[1]])
    assert by_hand.max() > 0 and correlation(cam, by_hand) >= 0.99


def test_frozen_batch_norm_checkpoints_load_without_their_counters(detector, tmp_path):
    """Fine-tuned from pretrained weights, torchvision's backbone has FrozenBatchNorm2d,
    which saves no num_batches_tracked: such a file loads, and computes the same."""
    model, _ = detector
    state = {k: v for k, v in model.state_dict().items()
             if not k.endswith("num_batches_tracked")}
    assert len(state) < len(model.state_dict())
    path = tmp_path / "frozen.pth"
    torch.save(state, path)
    loaded = load_model(ModelSpec(DETECTOR, checkpoint=str(path), device="cpu"))
    x = loaded.preprocess(picture())
    with torch.no_grad():
        assert torch.equal(loaded.model([x])[0]["boxes"], model([x])[0]["boxes"])


def test_a_segmentation_checkpoint_loads_and_gives_the_same_mask(segmenter):
    model, path = segmenter
    s = Session()
    try:
        loaded = s.load_model(ModelSpec(SEGMENTER, checkpoint=str(path), device="cpu")).result(120)
        outcome = s.run(picture(), cams=(("gradcam", None),), timeout=120)
        frames = s.channel.drain()
        layer = s.default_cam_layer()
    finally:
        s.close()
    assert loaded.task == SEGMENTATION
    assert loaded.categories == ["class 0", "class 1", "class 2"]
    assert loaded.model.aux_classifier is not None  # the file has one: so has the model
    assert loaded.preprocess.crop_size == (520, 520)
    assert outcome.status == "ok", outcome.error
    x = loaded.preprocess(picture())[None]
    with torch.no_grad():
        direct = model(x)
        got = loaded.model(x)
    assert torch.equal(got["out"], direct["out"]) and torch.equal(got["aux"], direct["aux"])
    expected = direct["out"][0].argmax(0).numpy()
    assert len(np.unique(expected)) > 1
    assert np.array_equal(outcome.mask, expected)
    pred = next(f for f in frames if isinstance(f, PredictionFrame))
    assert {label for _, label in pred.legend} <= set(loaded.categories)
    cam = outcome.cams[("gradcam", layer)]
    assert cam.shape == (520, 520)
    c = outcome.target

    def seg_score(output):
        scores = output["out"]
        return (scores[0, c] * (scores[0].argmax(0) == c)).sum()

    by_hand = gradcam_by_hand(model, layer, lambda m, t: m(t), x, seg_score)
    assert by_hand.max() > 0 and correlation(cam, by_hand) >= 0.99


def test_a_checkpoint_of_another_architecture_names_the_keys(segmenter, tmp_path, capsys):
    _, path = segmenter
    with pytest.raises(CheckpointMismatch) as caught:
        load_model(ModelSpec("lraspp_mobilenet_v3_large", checkpoint=str(path), device="cpu"))
    message = str(caught.value)
    assert message.startswith("deeplab.pt does not fit lraspp_mobilenet_v3_large")
    assert "missing: classifier.cbr.0.weight" in message
    assert "unexpected: " in message and "classifier.0.convs.0.0.weight" in message
    assert "\n" not in message
    # The command says it in one line, with status 1 (a model that cannot be loaded), and
    # no traceback.
    image = tmp_path / "a.png"
    picture(64, 48).save(image)
    rc = cli.main(["analyse", "--model", "lraspp_mobilenet_v3_large", "--weights", str(path),
                   "--out", str(tmp_path / "out"), str(image)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "does not fit lraspp_mobilenet_v3_large" in err and "Traceback" not in err


def test_the_session_reports_a_mismatch_and_keeps_its_model(detector):
    _, path = detector
    s = Session()
    try:
        s.load_model(ModelSpec("demo_shapes", device="cpu")).result(120)
        with pytest.raises(CheckpointMismatch):
            s.load_model(ModelSpec("fcos_resnet50_fpn", checkpoint=str(path),
                                   device="cpu")).result(120)
        (error,) = [f for f in s.channel.drain() if isinstance(f, ErrorFrame)]
    finally:
        s.close()
    assert error.message.startswith("Could not load weights for fcos_resnet50_fpn: "
                                    "finetuned.pth does not fit fcos_resnet50_fpn")
    assert s.loaded.name == "demo_shapes"


def test_an_unknown_architecture_says_which_are_known(detector):
    _, path = detector
    with pytest.raises(ModelLoadError, match="not a torchvision classification, detection or "
                                             "segmentation model"):
        load_model(ModelSpec("fasterrcnn_resnet18", checkpoint=str(path), device="cpu"))


def _options(arch: str, **counts) -> tuple[dict, dict]:
    """The state_dict of `arch` built with `counts` (on the meta device: shapes only), and
    the options build_options reads back from it."""
    with torch.device("meta"):
        model = torchvision.models.get_model(arch, weights=None, weights_backbone=None,
                                             **counts)
    return model.state_dict(), checkpoints.build_options(arch, model.state_dict())


@pytest.mark.parametrize("arch", sorted(task_models()))
def test_every_catalog_architecture_reads_its_class_count(arch):
    """Faster/Mask/Keypoint R-CNN's cls_score rows, RetinaNet's and SSD's rows per anchor,
    FCOS's, DeepLabV3's and FCN's classifier, LR-ASPP's: 5 classes read as 5."""
    counts = {"num_classes": 5}
    if arch.startswith("keypointrcnn"):
        counts["num_keypoints"] = 7
    _, options = _options(arch, **counts)
    assert {k: options[k] for k in counts} == counts
    assert options["weights"] is None and options["weights_backbone"] is None
    if arch.startswith(("fcn", "deeplabv3")):
        assert options["aux_loss"] is False
        _, options = _options(arch, num_classes=3, aux_loss=True)
        assert options["num_classes"] == 3 and options["aux_loss"] is True


def test_a_file_without_the_head_is_built_with_the_default_classes():
    """No tensor to read the count from (another model's file): the default weights' count,
    and the strict load then says what does not fit."""
    with torch.device("meta"):
        state = torchvision.models.get_model("resnet18", weights=None).state_dict()
    assert checkpoints.build_options("retinanet_resnet50_fpn", state)["num_classes"] == 91
    assert checkpoints.head_count("retinanet_resnet50_fpn", state, "num_classes",
                                  {"weights": None, "weights_backbone": None}) is None


def test_keypoint_rcnn_is_in_the_catalog_as_detection():
    assert task_models()[KEYPOINTS] == DETECTION
    assert KEYPOINTS in list_models()
    loaded = load_model(ModelSpec(KEYPOINTS, device="cpu", seed=0))
    assert loaded.task == DETECTION and loaded.categories == ["no person", "person"]
    # Its transform trains at 640..800 pixels and tests at 800: the input is 800 wide.
    assert loaded.model.transform.min_size == (640, 672, 704, 736, 768, 800)
    assert loaded.preprocess.crop_size == (800, 800)


# Keypoint R-CNN's ResNet-50 at its own 800 pixels is slow on a CPU: the model here (and the
# loader's build, patched the same) resizes to 160 and keeps 5 detections.
SMALL = {"min_size": 160, "max_size": 160, "box_detections_per_img": 5,
         "rpn_post_nms_top_n_test": 100}


@pytest.fixture(scope="module")
def keypoint_rcnn(tmp_path_factory):
    model = _build(KEYPOINTS, num_classes=2, num_keypoints=5, **SMALL)
    path = tmp_path_factory.mktemp("kp") / "keypoints.pth"
    torch.save(model.state_dict(), path)
    return model, path


@pytest.fixture
def small_builds(monkeypatch):
    real = checkpoints.build_options
    monkeypatch.setattr(checkpoints, "build_options",
                        lambda arch, state: {**real(arch, state), **SMALL})


def test_keypoint_rcnn_boxes_carry_their_keypoints(keypoint_rcnn, small_builds, tmp_path,
                                                   capsys):
    model, path = keypoint_rcnn
    s = Session()
    try:
        loaded = s.load_model(ModelSpec(KEYPOINTS, checkpoint=str(path), device="cpu")).result(120)
        layer = s.default_cam_layer()
        outcome = s.run(picture(), target=DetectionTarget(0), cams=(("gradcam", None),),
                        timeout=120)
        s.channel.drain()
    finally:
        s.close()
    assert loaded.task == DETECTION and loaded.preprocess.crop_size == (160, 160)
    assert loaded.categories == ["no person", "person"]  # as many as its COCO weights have
    assert loaded.description == f"{KEYPOINTS} (keypoints.pth, 2 classes, 5 keypoints)"
    assert outcome.status == "ok", outcome.error
    x = loaded.preprocess(picture())
    with torch.no_grad():
        direct = model([x])[0]
    order = detection.sorted_order(direct)
    found = outcome.detections
    assert len(found) == len(direct["boxes"]) > 0
    expected = torch.cat([direct["keypoints"][order][..., :2],
                          direct["keypoints_scores"][order][..., None]], dim=-1)
    assert np.allclose([d.keypoints for d in found], expected.numpy())
    # Its boxes work like Faster R-CNN's: a CAM of the detection's score.
    assert layer.startswith("backbone.body.")
    cam = outcome.cams[("gradcam", layer)]
    assert cam.shape == (160, 160) and cam.max() == pytest.approx(1.0)  # a map, not zeros

    # analyse writes each detection's keypoints in the picture's pixels (160 x 120 here:
    # the 160 x 160 input squeezed back vertically).
    image = tmp_path / "people.png"
    picture(160, 120).save(image)
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", KEYPOINTS, "--weights", str(path), "--device", "cpu",
                   "--out", str(out), str(image)])
    assert rc == 0, capsys.readouterr().err
    (entry,) = json.loads((out / "summary.json").read_text())["images"]
    first = entry["detections"][0]
    assert len(first["keypoints"]) == 5
    assert np.allclose(first["keypoints"], expected[0].numpy() * [1, 0.75, 1], atol=0.01)
