"""Detection and segmentation results in the image pane: boxes with label and score above a
threshold slider, a click on a box making it the next run's target, and a segmentation mask
with its legend. The pane alone with made-up frames first, then the window with torchvision's
Faster R-CNN and DeepLabV3 (random weights, seeded; nothing downloaded)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QPointF, Qt
from task_models import SEGMENTATION_FACTORY as SEGMENTER
from task_models import detection_factory
from test_main_window import wait_run

from inspector.core.records.frames import Prediction, PredictionFrame
from inspector.core.records.targets import DetectionTarget
from inspector.core.tasks.detection import Detection
from inspector.ui.image.canvas import BOX_COLOR, CHOSEN_COLOR
from inspector.ui.image.pane import MODEL_INPUT, ORIGINAL, ImagePane

TIMEOUT = 120_000  # ms: detection models on a busy CPU

DETECTOR = detection_factory(most=12)  # fewer boxes: a quicker test


def _frame(found: tuple[Detection, ...], target: int = 0) -> PredictionFrame:
    top = tuple(Prediction(d.index, d.label, d.score, d.score) for d in found)
    return PredictionFrame(1, top, target, "detection", found)


def _detection_frame(target: int = 0) -> PredictionFrame:
    return _frame((Detection(0, (10, 10, 60, 50), "cat", 17, 0.9),
                   Detection(1, (70, 20, 90, 40), "dog", 18, 0.6),
                   Detection(2, (20, 60, 40, 90), "cat", 17, 0.2)), target)


def _center(canvas, box) -> QPointF:
    return canvas.from_image(QPointF((box[0] + box[2]) / 2, (box[1] + box[3]) / 2))


def _pane_on_a_black_input(qtbot) -> ImagePane:
    pane = ImagePane()
    qtbot.addWidget(pane)
    pane.resize(400, 500)
    pane.show()
    pane.set_model_input(np.zeros((100, 100, 3), np.uint8))
    return pane


def test_boxes_above_the_threshold_and_a_click_chooses_one(qtbot):
    pane = _pane_on_a_black_input(qtbot)
    assert not pane.overlay.detection_bar.isVisible()
    pane.set_prediction(_detection_frame())
    assert pane.mode == MODEL_INPUT  # where the boxes' pixels are
    assert pane.overlay.detection_bar.isVisible() and pane.overlay.threshold == 0.5
    drawn = pane.canvas.detections
    assert [(d.key, d.text, d.chosen) for d in drawn] == [(0, "cat 0.90", True),
                                                         (1, "dog 0.60", False)]
    pane.overlay.threshold_slider.setValue(0)
    assert [d.key for d in pane.canvas.detections] == [0, 1, 2]
    pane.overlay.threshold_slider.setValue(70)
    assert [d.key for d in pane.canvas.detections] == [0]
    assert pane.overlay.threshold_label.text() == "Score ≥ 0.70 · 1 of 3 boxes"
    pane.overlay.threshold_slider.setValue(0)

    chosen = []
    pane.detectionChosen.connect(chosen.append)
    qtbot.mouseClick(pane.canvas, Qt.MouseButton.LeftButton,
                     pos=_center(pane.canvas, (70, 20, 90, 40)).toPoint())
    # The object clicked: its rank, box and class (the next runs find it by overlap).
    assert chosen == [DetectionTarget(1, (70, 20, 90, 40), 18)]
    # The box explained already, or the picture outside every box: no new target.
    qtbot.mouseClick(pane.canvas, Qt.MouseButton.LeftButton,
                     pos=_center(pane.canvas, (10, 10, 30, 20)).toPoint())
    qtbot.mouseClick(pane.canvas, Qt.MouseButton.LeftButton,
                     pos=_center(pane.canvas, (92, 92, 98, 98)).toPoint())
    assert len(chosen) == 1
    # Boxes are on the model input only; a classifier's frame clears them.
    pane.set_mode(ORIGINAL)
    assert pane.canvas.detections == [] and not pane.overlay.detection_bar.isVisible()
    pane.set_mode(MODEL_INPUT)
    pane.set_prediction(PredictionFrame(2, (), 3))
    assert pane.canvas.detections == [] and not pane.overlay.detection_bar.isVisible()


def test_a_run_that_detected_nothing_keeps_the_threshold_bar_and_says_why(qtbot):
    """Issue 22: a detection run with no box hid the bar, as if the model were no detector."""
    pane = _pane_on_a_black_input(qtbot)
    nothing = PredictionFrame(1, (), None, "detection", (), score_threshold=0.05)
    pane.set_prediction(nothing)
    assert pane.mode == MODEL_INPUT and pane.overlay.detection_bar.isVisible()
    assert pane.canvas.detections == []
    assert pane.overlay.threshold_label.text() == "Score ≥ 0.50 · nothing above 0.05"
    assert pane.overlay.threshold_label.toolTip().startswith("No detection above 0.05 (the score "
                                                     "threshold the model used)")
    pane.overlay.threshold_slider.setValue(0)  # still there to move: nothing to show under it
    assert pane.canvas.detections == [] and pane.overlay.detection_bar.isVisible()


def test_the_mask_overlays_the_input_with_a_legend(qtbot):
    pane = ImagePane()
    qtbot.addWidget(pane)
    pane.show()
    pane.set_model_input(np.full((4, 6, 3), 200, np.uint8))
    mask = np.zeros((4, 6), np.int64)
    mask[1:3, 2:5] = 12
    legend = ((0, "__background__"), (12, "dog"))
    pane.set_prediction(PredictionFrame(1, (), 12, "segmentation", (), mask, legend))
    overlay = pane.canvas.overlay
    assert (overlay.width(), overlay.height()) == (6, 4)
    assert overlay.pixelColor(0, 0).alpha() == 0  # background: the picture shows through
    dog = overlay.pixelColor(3, 1)
    assert dog.alpha() > 0 and (dog.red(), dog.green(), dog.blue()) == (64, 0, 128)  # VOC's dog
    assert pane.overlay.legend.isVisible() and "dog" in pane.overlay.legend.text()
    assert "#400080" in pane.overlay.legend.text()  # the swatch in the mask's colour
    assert not pane.overlay.detection_bar.isVisible()


# -- the window with real models --------------------------------------------------------------


@pytest.fixture
def window_with(make_window, tmp_path):
    def make(source: str, image):
        factory = tmp_path / "task_model.py"
        factory.write_text(source)
        return make_window({"name": None, "factory": f"{factory}:build"}, [str(image)])

    return make


def _picture(path, size=(120, 90)):
    rng = np.random.default_rng(0)
    small = rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)
    Image.fromarray(small).resize(size, Image.Resampling.BILINEAR).save(path)
    return path


@pytest.mark.slow
def test_the_window_draws_detections_and_a_clicked_box_is_the_next_target(
        window_with, qtbot, tmp_path):
    window = window_with(DETECTOR, _picture(tmp_path / "street.png"))
    first = wait_run(qtbot, window, timeout=TIMEOUT)
    pane = window.images
    qtbot.waitUntil(lambda: bool(pane.canvas.detections), timeout=TIMEOUT)
    assert pane.mode == MODEL_INPUT
    pane.overlay.threshold_slider.setValue(0)
    drawn = pane.canvas.detections
    assert len(drawn) >= 2 and drawn[0].chosen  # det 0 explained by default
    assert all(d.text.startswith("thing ") for d in drawn)
    pane.overlay.threshold_slider.setValue(100)  # no random score reaches 1.0
    assert pane.canvas.detections == []
    pane.overlay.threshold_slider.setValue(0)

    smallest = min(drawn[1:], key=lambda d: (d.box[2] - d.box[0]) * (d.box[3] - d.box[1]))
    point = _center(pane.canvas, smallest.box)
    expected = pane.canvas.detection_at(pane.canvas.to_image(point)).key
    assert expected != 0
    qtbot.mouseClick(pane.canvas, Qt.MouseButton.LeftButton, pos=point.toPoint())
    assert window.run_settings.value.target.index == expected
    assert window.run_settings.value.target.box is not None  # the object clicked, found by overlap
    qtbot.waitUntil(lambda: window.control.current_run != first.run_id, timeout=TIMEOUT)
    wait_run(qtbot, window, timeout=TIMEOUT)
    assert window.control.last_request.target == window.run_settings.value.target
    qtbot.waitUntil(lambda: [d.key for d in pane.canvas.detections if d.chosen] == [expected],
                    timeout=TIMEOUT)
    assert window.views["predictions"].target == expected


@pytest.mark.slow
def test_the_window_overlays_a_segmentation_mask_with_its_legend(window_with, qtbot, tmp_path):
    window = window_with(SEGMENTER, _picture(tmp_path / "pets.png"))
    wait_run(qtbot, window, timeout=TIMEOUT)
    pane = window.images
    qtbot.waitUntil(lambda: pane.canvas.overlay is not None, timeout=TIMEOUT)
    overlay = pane.canvas.overlay
    assert (overlay.width(), overlay.height()) == (160, 160)  # the model input's
    frame = pane.overlay.prediction
    assert frame.mask.shape == (160, 160)
    for c, label in frame.legend:
        assert (frame.mask == c).any() and label in pane.overlay.legend.text()
    assert pane.overlay.legend.isVisible()


def _keypoint_frame() -> PredictionFrame:
    return _frame((Detection(0, (10, 10, 60, 50), "person", 1, 0.9,
                             ((20.0, 20.0, 3.5), (50.0, 40.0, -1.0))),
                   Detection(1, (70, 60, 90, 90), "person", 1, 0.7, ((80.0, 80.0, 1.0),)),
                   Detection(2, (5, 70, 30, 95), "person", 1, 0.2, ((10.0, 80.0, 1.0),))))


def test_keypoints_are_drawn_in_the_boxes_shown(qtbot):
    pane = _pane_on_a_black_input(qtbot)
    pane.set_prediction(_keypoint_frame())
    # The boxes over the threshold (0.5) carry their keypoints; the one under it does not show.
    assert [d.points for d in pane.canvas.detections] == [((20.0, 20.0), (50.0, 40.0)),
                                                          ((80.0, 80.0),)]
    shot = pane.canvas.grab().toImage()
    canvas = pane.canvas

    def color_at(x, y):
        at = canvas.from_image(QPointF(x, y)) * shot.devicePixelRatio()
        return shot.pixelColor(int(at.x()), int(at.y()))

    # A dot of the box's colour where each keypoint is (the chosen box's, in its colour);
    # the picture (black) elsewhere.
    assert color_at(20, 20) == CHOSEN_COLOR and color_at(50, 40) == CHOSEN_COLOR
    assert color_at(80, 80) == BOX_COLOR
    assert color_at(10, 80).name() == "#000000"


@pytest.mark.slow
def test_the_boxes_follow_the_frames_of_a_playing_video(window_with, qtbot, tmp_path):
    # A stream submits its next frame as soon as a run is stored, before the views are told
    # of it: the boxes of that run must still be drawn (they are the run the window shows).
    pytest.importorskip("av", reason="PyAV is the optional extra 'network-inspector[video]'")
    from video_clip import FRAMES, write_clip

    slow = DETECTOR + ("\nimport time\n_build = build\n\n\ndef build():\n    model = _build()\n"
                       "    model.register_forward_pre_hook(lambda *a: time.sleep(0.1))\n"
                       "    return model\n")
    window = window_with(slow, _picture(tmp_path / "street.png"))
    wait_run(qtbot, window, timeout=TIMEOUT)
    window.backward_action.setChecked(False)  # a run's boxes come last, just before its end
    drawn = []
    set_prediction = window.images.set_prediction

    def spy(frame):
        drawn.append((frame.run_id, window.video.playing))
        set_prediction(frame)

    window.images.set_prediction = spy
    stored = []  # the runs stored while the clip plays: each one's boxes must be drawn
    window.control.router.runStored.connect(
        lambda run: window.video.playing and stored.append(run))
    # Six seconds: a loaded machine still finishes a few runs while it plays (frames that come
    # while a run is busy are dropped, so the count of runs depends on the machine's speed).
    frames = 2 * FRAMES
    window.images.add_paths([write_clip(tmp_path / "clip.mp4", frames=frames)])
    qtbot.waitUntil(lambda: not window.video.playing and window.video.index == frames - 1,
                    timeout=2 * TIMEOUT)
    while_playing = {run for run, playing in drawn if playing}
    assert len(stored) >= 2, (drawn, window.video.counts.run)
    assert set(stored[:-1]) <= while_playing, (stored, drawn)
    wait_run(qtbot, window, timeout=TIMEOUT)
    assert drawn[-1][0] == window.control.current_run  # the paused frame's boxes are drawn


# Random weights, no bias towards a class: every score is about 1/91, under the 0.05 the
# model keeps, so nothing is detected (as a detector that finds nothing in a picture).
BLIND_DETECTOR = DETECTOR.replace("cls_score.bias[1] += 6.0", "cls_score.bias.zero_()")


@pytest.mark.slow
def test_the_window_says_when_a_detector_found_nothing(window_with, qtbot, tmp_path):
    """Issue 22: "Predictions appear here after a run." after the run, a CAM pane blaming
    gradients that were on, and no threshold slider."""
    assert BLIND_DETECTOR != DETECTOR
    window = window_with(BLIND_DETECTOR, _picture(tmp_path / "empty.png"))
    wait_run(qtbot, window, timeout=TIMEOUT)
    assert window.backward_action.isChecked()
    predictions, cam, pane = window.views["predictions"], window.views["cam"], window.images
    assert predictions.frame is None or not predictions.frame.top
    said = "No detection above 0.05 (the score threshold the model used)"
    assert predictions.empty.text().startswith(said), predictions.empty.text()
    assert cam.header.text().startswith(said), cam.header.text()
    assert pane.mode == MODEL_INPUT and pane.overlay.detection_bar.isVisible()
    assert pane.overlay.threshold_label.text() == "Score ≥ 0.50 · nothing above 0.05"
    window.grab().save(str(tmp_path / "nothing-detected.png"))
