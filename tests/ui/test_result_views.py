"""The predictions table and the class activation map view, fed synthetic frames through a
run store."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from view_frames import (
    RNG,
    cam_frame,
    predictions,
    shown,
    started,
)

from inspector.core.run.store import RunStore
from inspector.ui.views.cam_overlay import heat_rgb
from inspector.ui.views.cam_view import CamView
from inspector.ui.views.predictions_view import PredictionsView

# -- PredictionsView ----------------------------------------------------------------------------


def test_predictions_table_rows_labels_and_target(qtbot):
    view = shown(qtbot, PredictionsView())
    assert "Drop an image" in view.empty.text()
    view.store.put(predictions(1, target=280))
    table = view.table
    assert table.rowCount() == 5
    assert [table.item(r, 1).text() for r in range(5)] == [
        "tabby", "tiger cat", "Egyptian cat", "lynx", "carton"]
    assert table.item(0, 2).data(Qt.ItemDataRole.UserRole + 1) == pytest.approx(0.6)
    assert table.item(0, 1).font().bold() and not table.item(1, 1).font().bold()
    assert "tabby" in view.header.text() and "(280)" in view.header.text()


def test_clicking_a_class_emits_target_chosen_with_its_index(qtbot):
    view = shown(qtbot, PredictionsView())
    view.store.put(predictions(1, target=280))
    table = view.table
    rect = table.visualRect(table.model().index(2, 1))
    with qtbot.waitSignal(view.targetChosen, timeout=1000) as blocker:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == [282]
    assert "running" in view.header.text() and table.item(2, 1).font().bold()
    # Clicking the class already asked for, or the current target, does not re-run.
    with qtbot.assertNotEmitted(view.targetChosen):
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    view.store.put(predictions(2, target=282))
    assert "running" not in view.header.text() and view.target == 282
    with qtbot.assertNotEmitted(view.targetChosen):
        view._row_chosen(2)


# -- CamView ------------------------------------------------------------------------------------


def test_cam_overlay_composite_follows_alpha(qtbot):
    view = shown(qtbot, CamView())
    display = RNG.integers(0, 256, size=(24, 32, 3), dtype=np.uint8)
    cam = np.linspace(0, 1, 24 * 32, dtype=np.float32).reshape(24, 32)
    view.store.put(started(1, display))
    np.testing.assert_array_equal(view.composite, display)  # the image alone, at once
    view.store.put(cam_frame(1, cam))
    heat = heat_rgb(cam)
    expected = np.clip(display + 0.5 * (heat - display) + 0.5, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(view.composite, expected)
    half = view.composite.copy()
    view.controls.alpha_slider.setValue(100)
    np.testing.assert_array_equal(view.composite, heat.astype(np.uint8))
    view.controls.alpha_slider.setValue(0)
    np.testing.assert_array_equal(view.composite, display)
    assert not np.array_equal(half, view.composite)
    assert np.shares_memory(view.image_item.image, view.composite)
    assert "Grad-CAM" in view.header.text() and "layer4" in view.header.text()


def test_cam_rerun_of_the_same_image_keeps_the_overlay_until_the_new_cam(qtbot):
    view = shown(qtbot, CamView())
    display = RNG.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    view.store.put(started(1, display))
    view.store.put(cam_frame(1, np.zeros((8, 8))))
    view.store.put(started(2, display.copy()))
    cam = view.choice()[0]  # the map shown over the image
    assert cam is not None and cam.run_id == 1
    view.store.put(cam_frame(2, np.ones((8, 8))))
    assert view.choice()[0].run_id == 2
    other = 255 - display
    view.store.put(started(3, other))  # a different image: the old CAM would be wrong on it
    assert view.choice()[0] is None
    np.testing.assert_array_equal(view.composite, other)
    view.store.put(cam_frame(2, np.ones((8, 8))))  # late, from the previous image
    assert view.choice()[0] is None


def test_cam_method_and_layer_choices_emit_signals(qtbot):
    view = shown(qtbot, CamView())
    with qtbot.assertNotEmitted(view.layerChanged):
        view.set_layers(["layer3", "layer4"], "layer4")
    assert view.layer == "layer4"
    with qtbot.waitSignal(view.layerChanged) as blocker:
        view.controls.layer_combo.setCurrentIndex(0)
    assert blocker.args == ["layer3"]
    with qtbot.waitSignal(view.methodChanged) as blocker:
        view.controls.method_combo.setCurrentIndex(view.controls.method_combo.findData("scorecam"))
    assert blocker.args == ["scorecam"]
    # The CAMs (a ViT's attention maps last), a separator (no data), then the input
    # attributions.
    methods = view.controls.method_combo
    assert [methods.itemData(i) for i in range(methods.count())] == [
        "gradcam", "gradcam++", "xgradcam", "layercam", "hirescam", "eigencam", "scorecam",
        "rollout", "gradrollout", "legrad",
        None, "saliency", "gxi", "smoothgrad", "ig", "occlusion"]


def test_cam_view_shows_the_selected_methods_map_when_several_arrive(qtbot):
    view = shown(qtbot, CamView())
    view.set_layers(["layer4"], "layer4")
    display = np.zeros((4, 4, 3), np.uint8)
    view.store.put(started(1, display))
    view.store.put(cam_frame(1, np.zeros((4, 4)), method="gradcam"))
    view.store.put(cam_frame(1, np.ones((4, 4)), method="layercam"))
    assert view.choice()[0].method == "gradcam"  # the combo's choice, not just the newest
    view.controls.method_combo.setCurrentIndex(view.controls.method_combo.findData("layercam"))
    assert view.choice()[0].method == "layercam"


def test_a_detection_run_that_found_nothing_says_so_in_predictions_and_the_cam_pane(qtbot):
    """Issue 22: "Predictions appear here after a run." after the run, and the CAM pane
    blamed gradients, which were on."""
    from inspector.core.records.frames import PredictionFrame, RunFinished

    store = RunStore()
    predictions_view = shown(qtbot, PredictionsView(store=store))
    cam = shown(qtbot, CamView(store=store))
    store.put(started(1, np.zeros((32, 32, 3), np.uint8)))
    store.put(PredictionFrame(1, (), None, "detection", (), score_threshold=0.05))
    store.put(RunFinished(1, "ok"))
    text = "No detection above 0.05 (the score threshold the model used)"
    assert predictions_view.empty.text().startswith(text), predictions_view.empty.text()
    assert predictions_view.stack.currentWidget() is predictions_view.empty
    assert cam.header.text().startswith(text) and "gradients" not in cam.header.text()
