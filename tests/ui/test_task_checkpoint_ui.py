"""The window's side of detection and segmentation checkpoints (core.models.task_models): the
open-model dialog's checkpoint tab offers those architectures (Keypoint R-CNN's keypoints in
the image pane: test_detection_view.py)."""

from __future__ import annotations

from inspector.core.models.base import ModelSpec
from inspector.ui.open_model import dialog as model_dialog


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
