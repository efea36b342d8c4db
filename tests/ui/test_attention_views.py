"""The attention explorer and the Depth tab on synthetic frames, the CAM pane's attention
maps, the run settings they write, and the window with a real ViT: the explorer live on a
run, the logit lens, the methods greyed out for a CNN."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401 (fixture)
from view_frames import shown, started

from inspector.core.explain.attention.explorer import mean_attention_distance
from inspector.core.records.frames import AttentionFrame, LensFrame, Prediction
from inspector.ui.run.settings import RunSettings
from inspector.ui.views.attention_view import AttentionView
from inspector.ui.views.cam_controls import CamControls
from inspector.ui.views.lens_view import LensView

RNG = np.random.default_rng(3)


def attention_frame(run=1, blocks=3, heads=4, grid=(3, 4), prefix=1, all_queries=True):
    n = prefix + grid[0] * grid[1]
    a = RNG.random((blocks, heads, n, n)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    distance = np.stack([mean_attention_distance(b, prefix, grid) for b in a]).astype(np.float32)
    probs = a if all_queries else a[:, :, :1]
    return AttentionFrame(run, tuple(f"blocks.{i}.attn" for i in range(blocks)),
                          probs.astype(np.float16), distance, prefix, grid,
                          all_queries=all_queries,
                          budget_note="" if all_queries else "only the class token's row came")


def explorer(qtbot, frame):
    view = shown(qtbot, AttentionView())
    view.resize(800, 700)
    display = np.full((48, 64, 3), 90, np.uint8)  # 3 x 4 patches of 16 pixels
    view.store.put(started(frame.run_id, display))
    view.store.put(frame)
    qtbot.wait(200)  # the layout settles: where the image is on screen
    return view


def test_the_class_token_is_the_default_query_of_the_last_block(qtbot):
    frame = attention_frame()
    view = explorer(qtbot, frame)
    a = frame.probs[-1].astype(np.float32)
    np.testing.assert_allclose(view.maps, a[:, 0, 1:].reshape(4, 3, 4))
    np.testing.assert_allclose(view.fused, a[:, 0, 1:].mean(0).reshape(3, 4), rtol=1e-6)
    assert view.slider.value() == 2 and "the class token" in view.header.text()
    assert "blocks.2.attn" in view.header.text() and "mean over the heads" in view.header.text()
    np.testing.assert_allclose(view.distance.all_heads.getData()[1], frame.distance.ravel(),
                               rtol=1e-6)
    view.slider.setValue(0)
    np.testing.assert_allclose(view.maps[1], frame.probs[0, 1, 0, 1:].astype(np.float32)
                               .reshape(3, 4))
    view.fusion_combo.setCurrentIndex(view.fusion_combo.findData("max"))
    np.testing.assert_allclose(view.fused, view.maps.max(0))


def test_clicking_a_patch_makes_it_the_query(qtbot):
    frame = attention_frame()
    view = explorer(qtbot, frame)
    # The centre of patch (2, 1) of the 48 x 64 image, as the scene sees it.
    scene = view.box.mapViewToScene(QPointF(1.5 * 16, 2.5 * 16))
    qtbot.mouseClick(view.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.view.mapFromScene(scene))
    assert view.query == 1 + 2 * 4 + 1
    a = frame.probs[-1].astype(np.float32)
    np.testing.assert_allclose(view.maps, a[:, view.query, 1:].reshape(4, 3, 4))
    assert "patch (2, 1), token 10" in view.header.text() and view.marker.isVisible()
    view._hover(scene)
    assert f"{float(view.fused[2, 1]):.4g}" in view.hover_label.text()
    # A head's map answers the same way: head 3's cell (0, 3).
    box = view.heads.boxes[3]
    view._hover(box.mapViewToScene(QPointF(3.5, 0.5)))
    assert f"head 3: {float(view.maps[3, 0, 3]):.4g}" in view.hover_label.text()
    view.reset.click()
    assert view.query is None and not view.marker.isVisible()


def test_a_model_change_clears_the_readout_and_the_blocks(qtbot):
    """timm's 3-head model showed vit_b_16's 12 values; a CNN showed "11 of 0..11"."""
    view = explorer(qtbot, attention_frame(blocks=12, heads=12))
    scene = view.box.mapViewToScene(QPointF(1.5 * 16, 2.5 * 16))
    view._hover(scene)
    assert view.hover_label.text().count(", ") >= 11  # the 12 heads' values
    view.store.clear()  # what the window does when another model is loaded
    qtbot.wait(50)
    assert view.hover_label.text().strip() == "" and not view.controls.isVisible()
    # The next model's frame (3 heads, 2 blocks): its own blocks, and readouts of 3 heads.
    view.store.put(started(2, np.full((48, 64, 3), 90, np.uint8)))
    view.store.put(attention_frame(run=2, blocks=2, heads=3))
    qtbot.wait(50)
    assert view.controls.isVisible() and view.slider.maximum() == 1
    assert view.hover_label.text().strip() == ""
    view._hover(scene)
    values = view.hover_label.text().split("per head")[-1]
    assert values.count(", ") == 2, view.hover_label.text()
    # And a CNN after it: no blocks at all, the sentence why.
    view.store.clear()
    view.set_refusal("This model has no self-attention.")
    qtbot.wait(50)
    assert not view.controls.isVisible() and view.empty.text().startswith("This model")


def test_a_new_run_keeps_the_query_and_block(qtbot):
    view = explorer(qtbot, attention_frame())
    view.set_query(0, 3)
    view.slider.setValue(1)
    second = attention_frame(run=2)
    view.store.put(started(2, np.zeros((48, 64, 3), np.uint8)))
    view.store.put(second)
    assert view.frame is second and view.query == 4 and view.slider.value() == 1
    np.testing.assert_allclose(view.maps, second.probs[1, :, 4, 1:].astype(np.float32)
                               .reshape(4, 3, 4))


def test_over_its_budget_only_the_class_token_row_comes_and_clicks_say_so(qtbot):
    frame = attention_frame(all_queries=False)
    view = explorer(qtbot, frame)
    view.set_query(1, 1)
    assert view.query is None
    assert "only the class token&#x27;s row came" in view.header.text()
    assert "click a patch" not in view.header.text()
    np.testing.assert_allclose(view.maps, frame.probs[-1, :, 0, 1:].astype(np.float32)
                               .reshape(4, 3, 4))


def test_the_explorer_says_why_a_model_has_no_attention(qtbot):
    view = shown(qtbot, AttentionView())
    assert "click a patch" in view.empty.text()
    view.set_refusal("This model has no self-attention.")
    assert view.empty.text() == "This model has no self-attention."
    view.store.put(started(4))
    view.store.put(AttentionFrame(4, (), np.zeros((0, 0, 0, 0), np.float16),
                                  np.zeros((0, 0), np.float32), 0, (0, 0),
                                  budget_note="Its attention runs over windows."))
    assert view.empty.text() == "Its attention runs over windows."


def test_the_depth_tab_draws_the_lens(qtbot):
    view = shown(qtbot, LensView())
    top = tuple((Prediction(2, "cat", 0.5 + i / 10, 1.0), Prediction(1, "dog", 0.2, 0.5),
                 Prediction(0, "owl", 0.1, 0.1)) for i in range(3))
    frame = LensFrame(1, ("blocks.0", "blocks.1", "blocks.2"), 1,
                      np.array([0.1, 0.15, 0.2], np.float32), top, "through its head", "dog")
    view.store.put(started(1))
    view.store.put(frame)
    np.testing.assert_allclose(view.curve.getData()[1], [0.1, 0.15, 0.2])
    assert view.table.rowCount() == 3 and view.table.item(2, 1).text() == "cat 70.0%"
    assert view.table.item(0, 2).font().bold()  # the explained class
    text = view.header.text()
    assert "\u201cdog\u201d" in text and "20.0% after the last" in text
    other = shown(qtbot, LensView())
    other.set_refusal("no blocks")
    assert other.empty.text() == "no blocks"


def test_attention_maps_read_no_layer_and_are_greyed_out_for_a_cnn(qtbot):
    controls = CamControls()
    qtbot.addWidget(controls)
    controls.set_layers(["a", "b"], "b")
    controls.set_method("rollout")
    assert controls.layer is None and not controls.layer_combo.isEnabled()
    controls.set_method("gradcam")
    assert controls.layer == "b" and controls.layer_combo.isEnabled()
    controls.set_attention_refusal("No attention here.")
    model, combo = controls.method_combo.model(), controls.method_combo
    for name in ("rollout", "gradrollout", "legrad"):
        i = combo.findData(name)
        assert not model.item(i).isEnabled()
        assert combo.itemData(i, Qt.ItemDataRole.ToolTipRole) == "No attention here."
    assert model.item(combo.findData("gradcam")).isEnabled()
    controls.set_attention_refusal("")
    assert model.item(combo.findData("legrad")).isEnabled()


def test_the_settings_ask_for_attention_only_for_the_views_shown():
    plain = RunSettings().request("x.png", "x", None, "layer")
    assert plain.attention is None
    both = RunSettings(attention_views=frozenset({"explorer", "lens"})).request(
        "x.png", "x", None, "layer")
    assert both.attention.explorer and both.attention.lens == 3
    live = RunSettings(attention_views=frozenset({"explorer"}), live=True).request(
        "x.png", "x", None, "layer")
    assert live.attention.explorer and live.attention.lens == 0
    rollout = RunSettings(cam_method="rollout", gradients=False).request("x.png", "x", None, "l")
    assert rollout.cams == (("rollout", None),)


# -- the window with a real ViT --------------------------------------------------------------


@pytest.fixture
def vit_window(tmp_path):
    from tests.attention_models import vit_factory

    factory = tmp_path / "vit.py"
    factory.write_text(vit_factory())
    return {"name": None, "factory": f"{factory}:build"}


def test_the_window_reads_attention_while_its_docks_are_shown(make_window, qtbot, tmp_path,
                                                              vit_window):
    window = make_window(model=vit_window, images=[write_png(tmp_path / "one.png")])
    wait_run(qtbot, window)
    assert window.control.last_request.attention is None  # docks hidden: fused attention
    window.docks["attention"].raise_()
    qtbot.waitUntil(lambda: window.control.last_request.attention is not None, timeout=TIMEOUT)
    run = wait_run(qtbot, window)
    view = window.views["attention"]
    qtbot.waitUntil(lambda: view.frame is not None and view.frame.run_id == run.run_id,
                    timeout=TIMEOUT)
    assert view.frame.probs.shape == (4, 4, 17, 17) and view.maps.shape == (4, 4, 4)
    window.docks["depth"].raise_()
    qtbot.waitUntil(lambda: window.control.last_request.attention.lens == 3, timeout=TIMEOUT)
    run = wait_run(qtbot, window)
    lens = window.views["depth"]
    qtbot.waitUntil(lambda: lens.frame is not None and lens.frame.run_id == run.run_id,
                    timeout=TIMEOUT)
    predictions = window.views["predictions"].frame
    assert lens.frame.top[-1][0].index == predictions.top[0].index
    cam = window.views["cam"]
    methods = cam.controls.method_combo
    methods.setCurrentIndex(methods.findData("gradrollout"))
    run = wait_run(qtbot, window)
    qtbot.waitUntil(lambda: cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id,
                    timeout=TIMEOUT)
    assert cam.choice()[0].method == "gradrollout"
    assert "Gradient rollout" in cam.header.text() and "(4 blocks)" in cam.header.text()


def test_a_cnn_greys_the_attention_out_and_asks_for_none(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "one.png")])
    wait_run(qtbot, window)
    window.docks["attention"].raise_()
    qtbot.wait(300)
    assert window.run_settings.value.attention_views == frozenset()
    combo = window.views["cam"].controls.method_combo
    assert not combo.model().item(combo.findData("rollout")).isEnabled()
    assert "no self-attention" in window.views["attention"].empty.text()
