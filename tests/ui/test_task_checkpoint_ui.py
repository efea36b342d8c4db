"""The window's side of detection and segmentation checkpoints (core.tasks.checkpoints): the
open-model dialog's checkpoint tab offers those architectures, and the image pane draws
Keypoint R-CNN's keypoints in their boxes."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF

from inspector.core.frames import Prediction, PredictionFrame
from inspector.core.models import ModelSpec
from inspector.core.tasks.detection import Detection
from inspector.ui import model_dialog
from inspector.ui.image_canvas import BOX_COLOR, CHOSEN_COLOR
from inspector.ui.image_pane import ImagePane


def test_the_checkpoint_tab_offers_detection_and_segmentation_architectures(qtbot, tmp_path):
    dialog = model_dialog.ModelDialog(devices=["cpu"])
    qtbot.addWidget(dialog)
    offered = {dialog.arch.itemText(i) for i in range(dialog.arch.count())}
    assert {"fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn",
            "retinanet_resnet50_fpn", "ssdlite320_mobilenet_v3_large",
            "deeplabv3_resnet50", "fcn_resnet50", "lraspp_mobilenet_v3_large"} <= offered
    weights = tmp_path / "finetuned.pth"
    weights.write_bytes(b"PK")  # the dialog only checks that the file is there
    dialog.tabs.setCurrentIndex(model_dialog.CHECKPOINT)
    dialog.arch.setCurrentText("fasterrcnn_resnet50_fpn")
    dialog.checkpoint.edit.setText(str(weights))
    assert dialog.buttons.button(dialog.buttons.StandardButton.Open).isEnabled()
    assert dialog.spec() == ModelSpec(name="fasterrcnn_resnet50_fpn", checkpoint=str(weights))


def _keypoint_frame() -> PredictionFrame:
    found = (Detection(0, (10, 10, 60, 50), "person", 1, 0.9,
                       ((20.0, 20.0, 3.5), (50.0, 40.0, -1.0))),
             Detection(1, (70, 60, 90, 90), "person", 1, 0.7, ((80.0, 80.0, 1.0),)),
             Detection(2, (5, 70, 30, 95), "person", 1, 0.2, ((10.0, 80.0, 1.0),)))
    top = tuple(Prediction(d.index, d.label, d.score, d.score) for d in found)
    return PredictionFrame(1, top, 0, "detection", found)


def test_keypoints_are_drawn_in_the_boxes_shown(qtbot):
    pane = ImagePane()
    qtbot.addWidget(pane)
    pane.resize(400, 500)
    pane.show()
    pane.set_model_input(np.zeros((100, 100, 3), np.uint8))
    pane.set_prediction(_keypoint_frame())
    # The boxes over the threshold (0.5) carry their keypoints; the one under it does not show.
    assert [d.points for d in pane.canvas.detections()] == [((20.0, 20.0), (50.0, 40.0)),
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
