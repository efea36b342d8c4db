"""The mosaic and the activation view, fed synthetic frames through a run store: what they
show after each frame, and when they paint."""

from __future__ import annotations

import os
from dataclasses import replace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # conftest sets it too

import numpy as np  # noqa: E402
from PySide6.QtCore import QPointF, Qt  # noqa: E402
from view_frames import (  # noqa: E402
    RNG,
    act,
    grad,
    make_stats,
    mosaic_tile,
    shown,
    started,
    tile,
)

from inspector.core.records.frames import ModelLoaded, RunFinished
from inspector.core.records.kinds import INPUT  # noqa: E402
from inspector.ui.views.activation_view import ActivationView  # noqa: E402
from inspector.ui.views.mosaic import GAP, PER_CHANNEL, SHARED, Mosaic, grid_shape  # noqa: E402
from inspector.ui.views.tensor_panel import (  # noqa: E402
    MESSAGE,
    MOSAIC,
    TOKENS,
    VECTOR,
    ZOOM,
)
from inspector.ui.views.token_page import (  # noqa: E402
    TOKEN_GRID_FEATURE,
    TOKEN_GRID_MEAN,
    token_grid_side,
)

# -- the mosaic itself --------------------------------------------------------------------------


def test_grid_is_roughly_square_and_holds_every_channel():
    for c, h, w in [(1, 8, 8), (3, 8, 8), (64, 7, 7), (10, 4, 16), (64, 64, 64)]:
        rows, cols = grid_shape(c, h, w)
        assert rows * cols >= c and (rows - 1) * cols < c
        ratio = (rows * (h + GAP)) / (cols * (w + GAP))
        assert 0.3 < ratio < 3.0, (c, h, w, rows, cols)


def test_mosaic_buffer_is_reused_and_gap_rects_cover_exactly_the_non_tiles():
    m = Mosaic()
    a = RNG.normal(size=(5, 4, 3)).astype(np.float32)
    first = m.fill(a)
    second = m.fill(a * 2)
    assert np.shares_memory(first, second)
    assert m.rows * m.cols > 5  # some tiles unused
    covered = np.zeros(m.image.shape, int)
    for x, y, w, h in m.gap_rects():
        covered[y:y + h, x:x + w] += 1
    in_tile = np.zeros(m.image.shape, bool)
    for k in range(5):
        y, x = m.origin(k)
        in_tile[y:y + 4, x:x + 3] = True
    assert not covered[in_tile].any()
    assert (covered[~in_tile] >= 1).all()


def test_mosaic_locate_maps_pixels_to_channels():
    m = Mosaic()
    m.fill(np.zeros((6, 3, 5), np.float32))
    for k in range(6):
        y, x = m.origin(k)
        assert m.locate(x + 4, y + 2) == (k, 2, 4)
    y, x = m.origin(1)
    assert m.locate(x - 0.5, y) is None  # the gap left of tile 1
    assert m.locate(-1, 0) is None


def test_constant_and_non_finite_channels_do_not_break_levels():
    data = np.zeros((3, 4, 4), np.float32)
    data[1] = 5.0
    data[2, 0, 0] = np.inf
    data[2, 1, 1] = -2.0
    m = Mosaic()
    m.fill(data, PER_CHANNEL)
    assert np.allclose(mosaic_tile(m, 0), 0) and np.allclose(mosaic_tile(m, 1), 0)  # lowest colour
    assert np.isfinite(mosaic_tile(m, 2)[1:, 1:]).all()
    m.fill(data, SHARED)
    assert m.levels == (-2.0, 5.0)


# -- ActivationView -----------------------------------------------------------------------------


def test_tiles_hold_each_channel_normalised_per_channel_then_shared(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("features.0")
    data = RNG.normal(size=(10, 6, 8)).astype(np.float32)
    view.store.put(act(1, "features.0", data))
    panel = view.panel
    assert panel.mode == MOSAIC
    rc = grid_shape(10, 6, 8)
    image = panel.mosaic_view.item.image
    assert image.shape == (rc[0] * 7 - 1, rc[1] * 9 - 1)
    for k in range(10):
        x = data[k]
        expected = (x - x.min()) / (x.max() - x.min())
        np.testing.assert_allclose(tile(image, k, rc, 6, 8), expected, rtol=1e-5, atol=1e-6)
    assert tuple(panel.mosaic_view.item.levels) == (0.0, 1.0)

    panel.controls.norm_combo.setCurrentIndex(panel.controls.norm_combo.findData(SHARED))
    image = panel.mosaic_view.item.image
    for k in range(10):
        np.testing.assert_array_equal(tile(image, k, rc, 6, 8), data[k])
    np.testing.assert_allclose(panel.mosaic_view.item.levels, (data.min(), data.max()))


def test_header_names_module_shape_and_stats(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("layer1.0.relu")
    data = np.maximum(RNG.normal(size=(4, 5, 5)), 0).astype(np.float32)
    data[2] = 0  # a dead channel
    view.store.put(act(3, "layer1.0.relu", data))
    text = view.header.text()
    s = make_stats(data[None])
    assert "layer1.0.relu" in text and "1\u00d74\u00d75\u00d75" in text
    assert f"mean {s.mean:.4g}" in text and f"max {s.max:.4g}" in text
    assert f"zeros {100 * s.zero_fraction:.1f}%" in text
    assert "1/4 channels all zero" in text


def test_empty_states_explain_what_to_do(qtbot):
    view = shown(qtbot, ActivationView())
    assert view.panel.mode == MESSAGE
    assert "Select a module" in view.panel.message.text()
    view.set_module("fc")
    assert "Drop an image" in view.panel.message.text()
    view.store.put(started(1))
    view.store.put(act(1, "conv", RNG.normal(size=(2, 3, 3))))
    assert "Waiting for the output of \u201cfc\u201d" in view.panel.message.text()
    view.store.put(RunFinished(run_id=1, status="ok"))
    assert "No output of \u201cfc\u201d was captured" in view.panel.message.text()


def test_selecting_another_module_shows_its_frame_without_a_new_run(qtbot):
    view = shown(qtbot, ActivationView())
    a = RNG.normal(size=(2, 4, 4)).astype(np.float32)
    b = RNG.normal(size=(16,)).astype(np.float32)
    view.store.put(act(1, "a", a))
    view.store.put(act(1, "b", b))
    view.set_module("b")
    assert view.panel.mode == VECTOR
    np.testing.assert_array_equal(view.panel.vector_page.bars.opts["height"], b)
    view.panel.controls.vector_combo.setCurrentText("Line")
    np.testing.assert_array_equal(view.panel.vector_page.line.yData, b)
    view.set_module("a")
    assert view.panel.mode == MOSAIC and view.panel.mosaic_view.mosaic.channels == 2


def test_input_frames_and_gradients_are_ignored_by_the_activation_view(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("a")
    view.store.put(act(1, "a", np.ones((2, 3, 3)), kind=INPUT))
    view.store.put(grad(1, "a", np.ones((2, 3, 3))))
    assert view.panel.mode == MESSAGE


def test_hover_names_channel_position_and_value_and_click_zooms(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("conv")
    data = RNG.normal(size=(9, 5, 7)).astype(np.float32)
    view.store.put(act(1, "conv", data))
    panel = view.panel
    k, i, j = 4, 2, 3
    y0, x0 = panel.mosaic_view.mosaic.origin(k)
    scene_pos = panel.mosaic_view.item.mapToScene(QPointF(x0 + j + 0.5, y0 + i + 0.5))
    panel.mosaic_view.hover(scene_pos)  # what a mouse move over the mosaic calls
    assert panel.hover_label.text() == f"channel {k}   y {i}, x {j}   value {data[k, i, j]:.4g}"

    # A real click on the tile zooms into that channel, with its histogram.
    graphics_view = panel.pages.currentWidget()
    qtbot.mouseClick(graphics_view.viewport(), Qt.MouseButton.LeftButton,
                     pos=graphics_view.mapFromScene(scene_pos))
    assert panel.mode == ZOOM and panel.zoomed == k
    np.testing.assert_array_equal(panel.zoom_page.item.image, data[k])
    np.testing.assert_allclose(panel.zoom_page.hist.getLevels(), (data[k].min(), data[k].max()))
    # Zoom stays on the channel when the next run's frame arrives.
    data2 = data + 1
    view.store.put(act(2, "conv", data2))
    np.testing.assert_array_equal(panel.zoom_page.item.image, data2[k])
    panel.controls.back_button.click()
    assert panel.mode == MOSAIC and panel.zoomed is None


def test_the_zoom_and_the_vector_name_the_value_under_the_mouse(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("conv")
    data = RNG.normal(size=(3, 5, 7)).astype(np.float32)
    view.store.put(act(1, "conv", data))
    panel = view.panel
    panel.zoom(1)
    item = panel.zoom_page.item
    item.scene().sigMouseMoved.emit(item.mapToScene(QPointF(4.5, 2.5)))  # a mouse move
    assert panel.hover_label.text() == f"channel 1   y 2, x 4   value {data[1, 2, 4]:.4g}"
    vector = RNG.normal(size=8).astype(np.float32)
    view.store.put(act(2, "fc", vector))
    view.set_module("fc")
    assert panel.mode == VECTOR
    plot = panel.vector_page.plot
    scene_pos = plot.getPlotItem().vb.mapViewToScene(QPointF(5, 0))
    plot.scene().sigMouseMoved.emit(scene_pos)
    assert panel.hover_label.text() == f"index 5   value {vector[5]:.4g}"
    # The zoom page is hidden now: a move over it says nothing.
    item.scene().sigMouseMoved.emit(item.mapToScene(QPointF(0.5, 0.5)))
    assert panel.hover_label.text() == f"index 5   value {vector[5]:.4g}"


def test_the_zoom_histogram_counts_every_pixel_and_its_levels_drive_the_image(qtbot):
    from inspector.ui.views import colormaps

    view = shown(qtbot, ActivationView())
    view.set_module("conv")
    panel = view.panel
    assert ZOOM not in panel._pages  # built on first use, not with the window
    data = RNG.normal(size=(3, 20, 30)).astype(np.float32)
    view.store.put(act(1, "conv", data))
    panel.controls.cmap_combo.setCurrentText("magma")
    panel.zoom(1)
    assert ZOOM in panel._pages
    # The page built late still gets the colour map chosen before it existed.
    np.testing.assert_array_equal(panel.zoom_page.item.lut, colormaps.lut("magma"))
    hist = panel.zoom_page.hist
    assert hist.bars.opts["width"].sum() == data[1].size
    hist.region.setRegion((-0.5, 0.25))  # what dragging the range does
    np.testing.assert_allclose(panel.zoom_page.item.levels, (-0.5, 0.25))
    np.testing.assert_allclose(hist.bar.levels(), (-0.5, 0.25))


def test_token_outputs_as_heatmap_or_patch_grid(qtbot):
    assert token_grid_side(197) == (14, 1) and token_grid_side(196) == (14, 0)
    assert token_grid_side(50) == (7, 1) and token_grid_side(7) is None
    view = shown(qtbot, ActivationView())
    view.set_module("encoder.layers.0")
    data = RNG.normal(size=(17, 6)).astype(np.float32)  # class token + 4x4 patches
    view.store.put(act(1, "encoder.layers.0", data))
    panel = view.panel
    assert panel.mode == TOKENS
    assert panel.tokens.item.image.shape == (17, 6)
    lo, hi = data.min(0), data.max(0)
    np.testing.assert_allclose(panel.tokens.item.image, (data - lo) / (hi - lo), atol=1e-6)
    panel.controls.token_combo.setCurrentIndex(panel.controls.token_combo.findData(TOKEN_GRID_MEAN))
    np.testing.assert_allclose(panel.tokens.item.image, data[1:].mean(1).reshape(4, 4), rtol=1e-6)
    layout_combo = panel.controls.token_combo
    layout_combo.setCurrentIndex(layout_combo.findData(TOKEN_GRID_FEATURE))
    panel.controls.feature_spin.setValue(5)
    np.testing.assert_array_equal(panel.tokens.item.image, data[1:, 5].reshape(4, 4))
    assert panel.controls.feature_spin.maximum() == 5


def test_header_says_how_core_reduced_the_preview_and_pooled_tokens_get_no_grid(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("layer3")
    data = RNG.normal(size=(64, 14, 14)).astype(np.float32)
    frame = replace(act(1, "layer3", data), shape=(1, 128, 28, 28))
    view.store.put(frame)
    assert "first 64 of 128 channels shown, averaged to 14\u00d714" in view.header.text()
    view.set_module("blocks")
    tokens = RNG.normal(size=(256, 16)).astype(np.float32)  # 256 = 16 x 16, but pooled
    view.store.put(replace(act(1, "blocks", tokens), shape=(1, 785, 16)))
    assert view.panel.mode == TOKENS and view.panel.tokens.item.image.shape == (256, 16)
    assert view.panel.controls.token_combo.isHidden()
    assert "shown reduced to 256\u00d716" in view.header.text()


def test_long_vectors_are_drawn_as_a_line(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("fc")
    logits = RNG.normal(size=1000).astype(np.float32)
    view.store.put(act(1, "fc", logits))
    assert view.panel.vector_page.line.isVisible() and not view.panel.vector_page.bars.isVisible()
    np.testing.assert_array_equal(view.panel.vector_page.line.yData, logits)


def test_hidden_view_paints_only_the_newest_frame_when_shown(qtbot):
    view = ActivationView()
    qtbot.addWidget(view)
    calls = []
    item = view.panel.mosaic_view.item
    original = item.setImage
    item.setImage = lambda *a, **k: (calls.append(a[0].copy()), original(*a, **k))
    view.set_module("conv")
    frames = [RNG.normal(size=(3, 4, 4)).astype(np.float32) for _ in range(3)]
    for run, data in enumerate(frames, start=1):
        view.store.put(act(run, "conv", data))
    assert calls == []
    view.show()
    qtbot.waitExposed(view)
    assert len(calls) == 1
    np.testing.assert_allclose(tile(calls[0], 2, grid_shape(3, 4, 4), 4, 4),
                               (frames[2][2] - frames[2][2].min()) / np.ptp(frames[2][2]),
                               rtol=1e-5)
    view.hide()
    view.store.put(act(9, "conv", frames[0]))
    assert len(calls) == 1
    view.show()
    assert len(calls) == 2


def test_new_run_keeps_the_old_picture_until_its_own_frame_arrives(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("a")
    old = RNG.normal(size=(2, 3, 3)).astype(np.float32)
    view.store.put(started(1))
    view.store.put(act(1, "a", old))
    before = view.panel.mosaic_view.item.image.copy()
    view.store.put(started(2))
    view.store.put(act(2, "b", RNG.normal(size=(2, 3, 3))))  # another module first
    np.testing.assert_array_equal(view.panel.mosaic_view.item.image, before)
    assert view.panel.mode == MOSAIC
    new = old * -3
    view.store.put(act(2, "a", new))
    assert view.current_frame().run_id == 2
    view.store.put(act(1, "a", old + 100))  # late frame of the old run: ignored
    assert view.current_frame().run_id == 2


def test_module_called_twice_offers_a_choice_of_call(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("shared")
    view.store.put(act(1, "shared", np.zeros(4), call=0))
    view.store.put(act(1, "shared", np.ones(4), call=1))
    assert view.part_combo.isVisible() and view.part_combo.count() == 2
    view.part_combo.setCurrentIndex(1)
    assert view.current_frame().call == 1
    np.testing.assert_array_equal(view.panel.vector_page.bars.opts["height"], np.ones(4))


def test_model_loaded_clears_the_view(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("a")
    view.store.put(act(1, "a", np.ones((2, 2, 2))))
    view.store.put(ModelLoaded(name="x", description="", pretrained=False, device="cpu",
                                  tree=None))
    assert view.current_frame() is None and view.panel.mode == MESSAGE
