"""Detection models (core.tasks): torchvision's Faster R-CNN with random weights, through the
Session (the list-of-images call, the det:K target, Grad-CAM from a detection's score) and
the analyse CLI (boxes in summary.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from task_models import DETECTION_FACTORY, correlation, gradcam_by_hand, picture

from inspector import cli
from inspector.core.explain.cam.targets import parse_target
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import ActivationFrame, GradientFrame, PredictionFrame
from inspector.core.records.kinds import OUTPUT
from inspector.core.records.targets import DetectionTarget
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session
from inspector.core.tasks import DETECTION, detection

NAME = "fasterrcnn_mobilenet_v3_large_320_fpn"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session():
    s = Session()
    # The same random weights on every run: load_model seeds torch right before the build.
    loaded = s.load_model(ModelSpec(NAME, device="cpu", seed=0)).result(timeout=120)
    # Random weights score every class ~1/91, under torchvision's 0.05 threshold: lift
    # class 1 so that the model detects boxes (set before any run, on no running model).
    with torch.no_grad():
        loaded.model.roi_heads.box_predictor.cls_score.bias[1] += 6.0
    yield s
    s.close()


def test_loads_offline_with_coco_classes_and_a_backbone_cam_layer(session):
    loaded, tree = session.loaded, session.tree
    assert loaded.task == DETECTION and not loaded.pretrained
    assert len(loaded.categories) == 91 and loaded.categories[1] == "person"
    assert loaded.model.roi_heads.box_predictor.cls_score.out_features == 91
    # Images in 0..1 at the model's own side: the model normalises itself.
    assert loaded.preprocess.crop_size == (320, 320) and loaded.preprocess.std == (1, 1, 1)
    # The probe called the model with a list of images: the root's input is one (3, H, W).
    assert tree.root.calls[0].inputs == (("0.0.0", (3, 320, 320)),)  # args[0][0]
    layer = session.default_cam_layer()
    assert layer.startswith("backbone.body.")
    assert len(tree[layer].output_shape) == 4 and tree[layer].output_shape[0] == 1
    assert NAME in __import__("inspector.core.models.load", fromlist=["x"]).list_models()


def test_det_target_cam_follows_the_detection_score(session):
    img = picture()
    loaded = session.loaded
    layer = session.default_cam_layer()
    outcome = session.run(img, target=DetectionTarget(1), cams=(("gradcam", None),), timeout=120)
    frames = session.channel.drain()
    assert outcome.status == "ok", outcome.error
    found = outcome.detections
    assert len(found) >= 2 and outcome.target == 1
    scores = [d.score for d in found]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0.05
    pred = next(f for f in frames if isinstance(f, PredictionFrame))
    assert pred.task == DETECTION and pred.target == 1 and len(pred.detections) == len(found)
    assert [p.index for p in pred.top] == list(range(len(pred.top)))  # "label score" rows
    assert pred.top[0].label == found[0].label and pred.top[0].prob == found[0].score
    for d in found:
        x0, y0, x1, y1 = d.box
        assert 0 <= x0 <= x1 <= 320 and 0 <= y0 <= y1 <= 320

    cam = outcome.cams[("gradcam", layer)]
    assert cam.shape == (320, 320) and cam.max() == pytest.approx(1.0)
    x = loaded.preprocess(img)[None]

    def second_score(output):
        first = output[0]
        return first["scores"][detection.sorted_order(first)[1]]

    by_hand = gradcam_by_hand(loaded.model, layer, detection.forward, x, second_score)
    assert correlation(cam, by_hand) >= 0.99
    # A different detection's map is a different map: the score really is detection 1's.
    other = gradcam_by_hand(loaded.model, layer, detection.forward, x,
                            lambda out: out[0]["scores"][detection.sorted_order(out[0])[0]])
    assert by_hand.max() > 0 and other.max() > 0
    assert not torch.allclose(by_hand / by_hand.max(), other / other.max(), atol=1e-3)


def test_a_detection_that_is_not_there_is_a_one_line_error(session):
    outcome = session.run(picture(), target=DetectionTarget(150), timeout=120)
    session.channel.drain()
    assert outcome.status == "error"
    assert outcome.error == "det:150: the model found 100 detections (0..99) in this image"
    heads = session.loaded.model.roi_heads
    heads.score_thresh = 1.0  # nothing scores above 1 (the session is idle between runs)
    try:
        outcome = session.run(picture(), target=DetectionTarget(0), timeout=120)
        session.channel.drain()
        assert outcome.error == "det:0: the model found no detection in this image"
        # No detection named: the run shows the activations, with no gradient and no CAM.
        outcome = session.run(picture(), cams=(("gradcam", None),), timeout=120)
        frames = session.channel.drain()
        assert outcome.status == "ok" and outcome.detections == () and outcome.cams == {}
        assert outcome.notes == ["nothing detected: no gradient and no CAM"]
        assert any(isinstance(f, ActivationFrame) and f.kind == OUTPUT for f in frames)
        assert not any(isinstance(f, GradientFrame) for f in frames)
        predicted = next(f for f in frames if isinstance(f, PredictionFrame))
        assert predicted.target is None
        # Above what nothing was found: the model's own threshold, for the window to say.
        assert predicted.score_threshold == 1.0
    finally:
        heads.score_thresh = 0.05


def test_an_input_occlusion_edits_the_list_of_images(session):
    from inspector.core.edits.spec import parse_edit

    plain = session.run(picture(), capture=CaptureSpec.for_modules([]), gradients=False,
                        timeout=120)
    edit = session.check_edits([parse_edit("input:occlude=0,0,320,160")])
    occluded = session.run(picture(), capture=CaptureSpec.for_modules([]), gradients=False,
                           interventions=edit, timeout=120)
    session.channel.drain()
    assert plain.status == occluded.status == "ok", occluded.error
    assert [d.box for d in plain.detections] != [d.box for d in occluded.detections]


def test_scorecam_and_attributions_are_refused_in_words(session):
    outcome = session.run(picture(), cams=(("scorecam", None),), timeout=120)
    session.channel.drain()
    assert outcome.status == "error" and "Score-CAM explains classifiers" in outcome.error
    outcome = session.run(picture(), attributions=("saliency",), timeout=120)
    session.channel.drain()
    assert outcome.error == ("input attributions explain classifiers, not a detection model: "
                             "use a CAM (saliency asked for)")


def test_ssdlite_default_layer_reaches_the_top_detection():
    """SSDlite has no FPN: its default layer is the backbone's finest output, which every
    level is computed from, so even the top detection's CAM is not flat."""
    s = Session()
    try:
        loaded = s.load_model(ModelSpec("ssdlite320_mobilenet_v3_large", device="cpu",
                                        seed=0)).result(timeout=120)
        loaded.model.score_thresh = 0.0  # random weights: keep every box
        layer = s.default_cam_layer()
        assert layer == "backbone"
        outcome = s.run(picture(), capture=CaptureSpec.for_modules([layer]),
                        cams=(("gradcam", None),), timeout=120)
        s.channel.drain()
        assert outcome.status == "ok", outcome.error
        assert outcome.cams[("gradcam", layer)].std() > 0.01
    finally:
        s.close()


def test_a_det_target_on_a_classifier_is_one_line():
    s = Session()
    try:
        s.load_model(ModelSpec("demo_shapes", device="cpu")).result(timeout=120)
        outcome = s.run(picture(), target=DetectionTarget(0), timeout=120)
        assert outcome.status == "error"
        assert outcome.error == ("target det:0 is for a detection or segmentation model; "
                                 "demo_shapes is a classifier")
    finally:
        s.close()


def test_copy_as_python_refuses_a_detection_model_in_words(session):
    from inspector.core.models.script_code import ScriptExportError
    from inspector.core.run.request import RunRequest
    from inspector.core.script.export import script_for

    with pytest.raises(ScriptExportError, match="is a detection model"):
        script_for(session.loaded, RunRequest(image=None, target=DetectionTarget(0)))


def test_the_models_command_names_the_task(capsys):
    assert cli.main(["models"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "torchvision detection" in lines[NAME]
    assert "torchvision segmentation" in lines["deeplabv3_mobilenet_v3_large"]
    assert "torchvision," in lines["resnet18"]


def test_boxes_map_back_to_the_input_picture():
    square = Preprocess(crop_size=(320, 320), resize_size=None, mean=(0, 0, 0), std=(1, 1, 1))
    assert detection.to_original((0, 0, 320, 320), square, (160, 120)) == [0, 0, 160, 120]
    assert detection.to_original((32, 64, 160, 400), square, (160, 120)) == [16, 24, 80, 120]
    # With a resize of the short side and a centre crop the crop offset is undone too.
    crop = Preprocess(crop_size=(100, 100), resize_size=100, mean=(0, 0, 0), std=(1, 1, 1))
    assert detection.to_original((0, 0, 100, 100), crop, (400, 200)) == [100, 0, 300, 200]


def test_parse_target_says_what_is_wrong(session):
    model, cats = session.loaded.model, session.loaded.categories
    assert parse_target("det:3", DETECTION, cats, model) == DetectionTarget(3)
    assert parse_target("top1", DETECTION, cats, model) is None
    for text, words in (("det:100", "out of range"), ("det:-1", "0 or more"),
                        ("7", "det:K"), ("seg:1", "needs a segmentation model")):
        with pytest.raises(ValueError, match=words):
            parse_target(text, DETECTION, cats, model)
    with pytest.raises(ValueError, match="needs a detection model"):
        parse_target("det:0", "classification", cats, model)


@pytest.fixture(scope="module")
def factory(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("factory") / "detector.py"
    path.write_text(DETECTION_FACTORY)
    return f"{path}:build"


def test_analyse_writes_detections_in_input_pixels(factory, tmp_path: Path, capsys):
    image = tmp_path / "street.png"
    picture(160, 120).save(image)
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", factory, "--device", "cpu", "--target", "det:1",
                   "--out", str(out), str(image)])
    assert rc == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    (entry,) = summary["images"]
    assert entry["error"] is None and entry["target"] == 1
    found = entry["detections"]
    assert len(found) >= 2
    assert set(found[0]) == {"box", "label", "index", "score"}
    scores = [d["score"] for d in found]
    assert scores == sorted(scores, reverse=True)
    assert found[0]["label"] == f"thing {found[0]['index']}"
    for d in found:
        x0, y0, x1, y1 = d["box"]
        assert 0 <= x0 <= x1 <= 160 and 0 <= y0 <= y1 <= 120
    # The same model run by hand on the 320 x 320 input: its boxes, scaled to the 160 x 120
    # picture, are the summary's.
    import importlib.util

    path, _, func = factory.rpartition(":")
    spec = importlib.util.spec_from_file_location("detector_by_hand", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = getattr(module, func)().eval()
    x = torch.from_numpy(np.asarray(picture(160, 120).resize((320, 320), 2), np.float32) / 255)
    with torch.no_grad():
        direct = model([x.permute(2, 0, 1)])[0]
    order = detection.sorted_order(direct)
    expected = direct["boxes"][order] * torch.tensor([0.5, 0.375, 0.5, 0.375])
    assert np.allclose([d["box"] for d in found], expected.numpy(), atol=0.05)
    assert [d["index"] for d in found] == direct["labels"][order].tolist()
    with np.load(out / entry["files"]["npz"]) as npz:
        assert npz["input"].shape == (1, 3, 320, 320)
        assert npz["logits"].shape == (1, len(found))
        assert npz["cam/gradcam"].shape == (320, 320)


def test_analyse_of_a_detector_that_finds_nothing_writes_what_there_is(tmp_path, capsys):
    image = tmp_path / "a.png"
    picture(64, 48).save(image)
    out = tmp_path / "out"
    # Random weights score every class about 1/91, under torchvision's 0.05 threshold.
    rc = cli.main(["analyse", "--model", NAME, "--device", "cpu", "--seed", "0", "--out", str(out),
                   str(image)])
    assert rc == 0, capsys.readouterr().err
    (entry,) = json.loads((out / "summary.json").read_text())["images"]
    assert entry["error"] is None and entry["detections"] == [] and entry["target"] is None
    assert entry["notes"] == ["nothing detected: no gradient and no CAM"]
    assert "cam/gradcam" not in entry["files"]
    with np.load(out / entry["files"]["npz"]) as npz:
        assert npz["logits"].shape == (1, 0) and "cam/gradcam" not in npz.files


@pytest.mark.parametrize("target, words", [
    ("det:1000", "out of range, this model keeps at most 100 detections"),
    ("det:x", "K must be a detection's rank"),
])
def test_analyse_refuses_a_bad_det_target(factory, tmp_path: Path, capsys, target, words):
    image = tmp_path / "a.png"
    picture(64, 48).save(image)
    rc = cli.main(["analyse", "--model", factory, "--device", "cpu", "--target", target,
                   "--out", str(tmp_path / "out"), str(image)])
    err = capsys.readouterr().err
    assert rc == 2
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "out" / "a").exists()  # refused before any image was run


def test_a_clicked_box_is_followed_by_overlap_not_by_rank():
    """A DetectionTarget with a box picks the detection of its class that overlaps the box
    most, whatever its rank now; none of that class overlapping is a one-line error."""
    from inspector.core.tasks.detection import Detection, matching

    found = (Detection(0, (0, 0, 10, 10), "cat", 17, 0.9),
             Detection(1, (50, 50, 80, 80), "dog", 18, 0.8),
             Detection(2, (52, 48, 82, 79), "cat", 17, 0.7))
    assert matching(found, (50, 50, 80, 80), 17, rank=0) == 2  # the cat there, rank 2 now
    assert matching(found, (50, 50, 80, 80), 18, rank=0) == 1
    with pytest.raises(ValueError, match="no detection of that class overlaps"):
        matching(found, (200, 200, 220, 220), 17, rank=0)


def test_analyse_with_a_det_target_on_a_classifier_says_it_needs_a_detector(tmp_path, capsys):
    image = tmp_path / "a.png"
    picture(64, 48).save(image)
    rc = cli.main(["analyse", "--model", "demo_shapes", "--target", "det:0",
                   "--out", str(tmp_path / "out"), str(image)])
    assert rc == 2
    assert "det:K needs a detection model" in capsys.readouterr().err
