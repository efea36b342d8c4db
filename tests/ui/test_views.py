"""The data views, fed synthetic frames: what they hold after each frame, and when they paint."""

from __future__ import annotations

import math
import os
from dataclasses import replace

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # conftest sets it too

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QPointF, Qt  # noqa: E402

from inspector.core.frames import (  # noqa: E402
    GRAD_INPUT,
    GRAD_OUTPUT,
    INPUT,
    OUTPUT,
    ActivationFrame,
    CamFrame,
    GradientFrame,
    ModelLoaded,
    Prediction,
    PredictionFrame,
    RunFinished,
    RunStarted,
    TensorStats,
)
from inspector.ui.views import (  # noqa: E402
    ActivationView,
    CamView,
    GradientView,
    InputStatsView,
    PredictionsView,
)
from inspector.ui.views.cam_view import heat_rgb  # noqa: E402
from inspector.ui.views.mosaic import GAP, PER_CHANNEL, SHARED, Mosaic, grid_shape  # noqa: E402
from inspector.ui.views.tensor_panel import (  # noqa: E402
    MESSAGE,
    MOSAIC,
    TOKEN_GRID_FEATURE,
    TOKEN_GRID_MEAN,
    TOKENS,
    VECTOR,
    ZOOM,
    token_grid_side,
)

# -- synthetic frames ---------------------------------------------------------------------------


def make_stats(batch: np.ndarray) -> TensorStats:
    """TensorStats of a tensor with its batch dimension, as core computes them (dim 1 = channel)."""
    x = np.asarray(batch, dtype=np.float64)
    per = np.moveaxis(x, 1, 0).reshape(x.shape[1], -1) if x.ndim >= 2 else x.reshape(1, -1)
    finite = x[np.isfinite(x)] if x.size else np.zeros(1)
    return TensorStats(
        mean=float(finite.mean()),
        std=float(finite.std()),
        min=float(finite.min()),
        max=float(finite.max()),
        zero_fraction=float((x == 0).mean()),
        numel=int(x.size),
        channel_mean=per.mean(1),
        channel_std=per.std(1),
        channel_min=per.min(1),
        channel_max=per.max(1),
        channel_zero_fraction=(per == 0).mean(1),
        abs_mean=float(np.abs(finite).mean()),
        nonfinite=int((~np.isfinite(x)).sum()),
    )


def act(run, module, preview, kind=OUTPUT, call=0, path="", stats=None):
    """An ActivationFrame whose preview is `preview` (the first batch item)."""
    preview = np.asarray(preview, np.float32)
    return ActivationFrame(
        run_id=run, module=module, call=call, kind=kind, path=path,
        shape=(1, *preview.shape), dtype="float32",
        stats=stats or make_stats(preview[None]), preview=preview,
    )


def grad(run, module, preview, kind=GRAD_OUTPUT, stats=None, call=0):
    preview = np.asarray(preview, np.float32)
    return GradientFrame(
        run_id=run, module=module, call=call, kind=kind, path="",
        shape=(1, *preview.shape), dtype="float32",
        stats=stats or make_stats(preview[None]), preview=preview,
    )


def started(run, display=None):
    return RunStarted(run_id=run, label="img.png", model="m", device="cpu", display=display)


def shown(qtbot, widget):
    qtbot.addWidget(widget)
    widget.resize(640, 480)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def tile(item_image: np.ndarray, k: int, rows_cols: tuple[int, int], h: int, w: int):
    _, cols = rows_cols
    r, c = divmod(k, cols)
    return item_image[r * (h + GAP): r * (h + GAP) + h, c * (w + GAP): c * (w + GAP) + w]


RNG = np.random.default_rng(0)

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
    assert np.allclose(m.tile(0), 0) and np.allclose(m.tile(1), 0)  # constant: lowest colour
    assert np.isfinite(m.tile(2)[1:, 1:]).all()
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
    image = panel.mosaic_item.image
    assert image.shape == (rc[0] * 7 - 1, rc[1] * 9 - 1)
    for k in range(10):
        x = data[k]
        expected = (x - x.min()) / (x.max() - x.min())
        np.testing.assert_allclose(tile(image, k, rc, 6, 8), expected, rtol=1e-5, atol=1e-6)
    assert tuple(panel.mosaic_item.levels) == (0.0, 1.0)

    panel.norm_combo.setCurrentIndex(panel.norm_combo.findData(SHARED))
    image = panel.mosaic_item.image
    for k in range(10):
        np.testing.assert_array_equal(tile(image, k, rc, 6, 8), data[k])
    np.testing.assert_allclose(panel.mosaic_item.levels, (data.min(), data.max()))


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
    np.testing.assert_array_equal(view.panel.vector_bars.opts["height"], b)
    view.panel.vector_combo.setCurrentText("Line")
    np.testing.assert_array_equal(view.panel.vector_line.yData, b)
    view.set_module("a")
    assert view.panel.mode == MOSAIC and view.panel.mosaic.channels == 2


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
    y0, x0 = panel.mosaic.origin(k)
    scene_pos = panel.mosaic_item.mapToScene(QPointF(x0 + j + 0.5, y0 + i + 0.5))
    panel._mosaic_hover(scene_pos)
    assert panel.hover_label.text() == f"channel {k}   y {i}, x {j}   value {data[k, i, j]:.4g}"

    # A real click on the tile zooms into that channel, with its histogram.
    graphics_view = panel.pages.currentWidget()
    qtbot.mouseClick(graphics_view.viewport(), Qt.MouseButton.LeftButton,
                     pos=graphics_view.mapFromScene(scene_pos))
    assert panel.mode == ZOOM and panel.zoomed == k
    np.testing.assert_array_equal(panel.zoom_item.image, data[k])
    np.testing.assert_allclose(panel.zoom_hist.getLevels(), (data[k].min(), data[k].max()))
    # Zoom stays on the channel when the next run's frame arrives.
    data2 = data + 1
    view.store.put(act(2, "conv", data2))
    np.testing.assert_array_equal(panel.zoom_item.image, data2[k])
    panel.back_button.click()
    assert panel.mode == MOSAIC and panel.zoomed is None


def test_the_zoom_histogram_counts_every_pixel_and_its_levels_drive_the_image(qtbot):
    from inspector.ui import colormaps

    view = shown(qtbot, ActivationView())
    view.set_module("conv")
    panel = view.panel
    assert ZOOM not in panel._pages  # built on first use, not with the window
    data = RNG.normal(size=(3, 20, 30)).astype(np.float32)
    view.store.put(act(1, "conv", data))
    panel.cmap_combo.setCurrentText("magma")
    panel.zoom(1)
    assert ZOOM in panel._pages
    # The page built late still gets the colour map chosen before it existed.
    np.testing.assert_array_equal(panel.zoom_item.lut, colormaps.lut("magma"))
    hist = panel.zoom_hist
    assert hist.bars.opts["width"].sum() == data[1].size
    hist.region.setRegion((-0.5, 0.25))  # what dragging the range does
    np.testing.assert_allclose(panel.zoom_item.levels, (-0.5, 0.25))
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
    assert panel.token_item.image.shape == (17, 6)
    lo, hi = data.min(0), data.max(0)
    np.testing.assert_allclose(panel.token_item.image, (data - lo) / (hi - lo), atol=1e-6)
    panel.token_combo.setCurrentIndex(panel.token_combo.findData(TOKEN_GRID_MEAN))
    np.testing.assert_allclose(panel.token_item.image, data[1:].mean(1).reshape(4, 4), rtol=1e-6)
    panel.token_combo.setCurrentIndex(panel.token_combo.findData(TOKEN_GRID_FEATURE))
    panel.feature_spin.setValue(5)
    np.testing.assert_array_equal(panel.token_item.image, data[1:, 5].reshape(4, 4))
    assert panel.feature_spin.maximum() == 5


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
    assert view.panel.mode == TOKENS and view.panel.token_item.image.shape == (256, 16)
    assert view.panel.token_combo.isHidden()
    assert "shown reduced to 256\u00d716" in view.header.text()


def test_long_vectors_are_drawn_as_a_line(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("fc")
    logits = RNG.normal(size=1000).astype(np.float32)
    view.store.put(act(1, "fc", logits))
    assert view.panel.vector_line.isVisible() and not view.panel.vector_bars.isVisible()
    np.testing.assert_array_equal(view.panel.vector_line.yData, logits)


def test_hidden_view_paints_only_the_newest_frame_when_shown(qtbot):
    view = ActivationView()
    qtbot.addWidget(view)
    calls = []
    item = view.panel.mosaic_item
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
    before = view.panel.mosaic_item.image.copy()
    view.store.put(started(2))
    view.store.put(act(2, "b", RNG.normal(size=(2, 3, 3))))  # another module first
    np.testing.assert_array_equal(view.panel.mosaic_item.image, before)
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
    np.testing.assert_array_equal(view.panel.vector_bars.opts["height"], np.ones(4))


def test_model_loaded_clears_the_view(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("a")
    view.store.put(act(1, "a", np.ones((2, 2, 2))))
    view.store.put(ModelLoaded(name="x", description="", pretrained=False, device="cpu",
                                  tree=None))
    assert view.current_frame() is None and view.panel.mode == MESSAGE


# -- GradientView -------------------------------------------------------------------------------


def test_gradient_levels_are_symmetric_about_zero(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("conv")
    data = (RNG.normal(size=(4, 5, 5)) + 0.7).astype(np.float32)
    view.store.put(grad(1, "conv", data))
    panel = view.panel
    lo, hi = panel.mosaic_item.levels
    assert lo == -hi == -1.0
    rc = grid_shape(4, 5, 5)
    for k in range(4):
        a = np.abs(data[k]).max()
        np.testing.assert_allclose(tile(panel.mosaic_item.image, k, rc, 5, 5), data[k] / a,
                                   rtol=1e-6)
    panel.norm_combo.setCurrentIndex(panel.norm_combo.findData(SHARED))
    lo, hi = panel.mosaic_item.levels
    assert hi == -lo == pytest.approx(np.abs(data).max())
    assert panel.cmap_combo.currentText() == "blue-white-red"


def test_gradient_kind_toggle_switches_between_output_and_input_gradients(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("fc")
    out, inp = np.full(3, 1.0), np.full(5, -2.0)
    view.store.put(grad(1, "fc", out, kind=GRAD_OUTPUT))
    view.store.put(grad(1, "fc", inp, kind=GRAD_INPUT))
    np.testing.assert_array_equal(view.panel.vector_bars.opts["height"], out)
    view.kind_combo.setCurrentIndex(view.kind_combo.findData(GRAD_INPUT))
    np.testing.assert_array_equal(view.panel.vector_bars.opts["height"], inp)
    assert "gradient of the input" in view.header.text()


def _flow_run(view, run, grads):
    """Forward frames in order, then gradient frames in backward order, as a run sends them."""
    view.store.put(started(run))
    for name in grads:
        view.store.put(act(run, name, np.ones(2)))
    for name in reversed(list(grads)):
        view.store.put(grad(run, name, grads[name]))


def test_gradient_flow_has_one_point_per_layer_in_forward_order(qtbot):
    view = shown(qtbot, GradientView())
    grads = {
        "conv1": np.array([0.1, -0.3, 0.2]),
        "layer1": np.array([0.01, 0.02, -0.05]),
        "fc": np.array([1.0, -2.0, 0.5]),
    }
    _flow_run(view, 1, grads)
    qtbot.waitUntil(lambda: len(view.flow.points) == 3)
    flow = view.flow
    assert [p.name for p in flow.points] == ["conv1", "layer1", "fc"]
    expected_max = [np.abs(g).max() for g in grads.values()]
    expected_mean = [np.abs(g).mean() for g in grads.values()]
    np.testing.assert_allclose(flow.max_values, expected_max, rtol=1e-6)
    np.testing.assert_allclose(flow.mean_values, expected_mean, rtol=1e-6)
    assert len(flow.max_curve.xData) == 3
    np.testing.assert_allclose(flow.max_curve.yData, expected_max, rtol=1e-6)
    np.testing.assert_allclose(flow.mean_curve.yData, expected_mean, rtol=1e-6)
    assert flow.mean_label == "mean |grad|" and "mean |grad|" in flow.summary.text()


def test_gradient_flow_falls_back_to_rms_without_abs_mean(qtbot):
    view = shown(qtbot, GradientView())
    g = np.array([1.0, -3.0])
    stats = replace(make_stats(g[None]), abs_mean=0.0)  # as from a core that leaves it unset
    view.store.put(grad(1, "fc", g, stats=stats))
    view.flush()
    np.testing.assert_allclose(view.flow.mean_values, [math.hypot(g.mean(), g.std())])
    assert "RMS" in view.flow.mean_label  # says it is a stand-in
    assert "RMS" in view.flow.summary.text()


def test_zero_and_non_finite_gradients_are_marked(qtbot):
    view = shown(qtbot, GradientView())
    grads = {
        "a": np.array([0.5, -0.5]),
        "dead": np.zeros(2),
        "bad": np.array([np.nan, 1.0]),
    }
    _flow_run(view, 1, grads)
    view.flush()
    flow = view.flow
    assert flow.zero_layers == ["dead"] and flow.nonfinite_layers == ["bad"]
    assert np.isnan(flow.max_values[1:]).all() and flow.max_values[0] == 0.5
    assert len(flow.zero_marks.xData) == 1 and flow.zero_marks.xData[0] == 1
    assert len(flow.bad_marks.xData) == 1 and flow.bad_marks.xData[0] == 2
    assert "zero gradient: dead" in flow.summary.text() and "NaN/Inf: bad" in flow.summary.text()
    assert flow.zero_marks.yData[0] < np.nanmin(flow.mean_values)  # below every drawn point
    assert flow.bad_marks.yData[0] > np.nanmax(flow.max_values)  # above every drawn point


def test_gradient_flow_is_replaced_only_when_the_next_run_has_gradients(qtbot):
    view = shown(qtbot, GradientView())
    _flow_run(view, 1, {"a": np.ones(2), "b": np.ones(2)})
    view.flush()
    view.store.put(started(2))
    view.store.put(act(2, "a", np.ones(2)))
    view.flush()
    assert len(view.flow.points) == 2  # still run 1's
    view.store.put(grad(2, "b", np.full(2, 3.0)))
    view.flush()
    assert [p.name for p in view.flow.points] == ["b"]
    assert view.flow.max_values[0] == 3.0


def test_hidden_gradient_view_draws_the_flow_when_shown(qtbot):
    view = GradientView()
    qtbot.addWidget(view)
    _flow_run(view, 1, {"a": np.ones(2), "b": np.ones(2)})
    qtbot.wait(20)
    assert view.flow.points == [] and view.paint_count == 0
    view.show()
    qtbot.waitExposed(view)
    assert len(view.flow.points) == 2 and view.paint_count == 1


# -- InputStatsView -----------------------------------------------------------------------------


def test_input_stats_plot_mean_and_std_per_layer_in_arrival_order(qtbot):
    view = shown(qtbot, InputStatsView())
    assert "Drop an image" in view.empty.text()
    inputs = {
        "conv1": RNG.normal(size=(3, 8, 8)),
        "layer1": RNG.normal(2.0, 3.0, size=(4, 4, 4)),
        "fc": RNG.normal(size=(10,)),
    }
    view.store.put(started(1))
    for name, x in inputs.items():
        view.store.put(act(1, name, x, kind=INPUT))
        view.store.put(act(1, name, x, kind=OUTPUT))  # ignored
    qtbot.waitUntil(lambda: len(view.layers) == 3)
    assert view.layers == ["conv1", "layer1", "fc"]
    np.testing.assert_allclose(view.mean_curve.yData, [x.mean() for x in inputs.values()],
                               rtol=1e-5)
    np.testing.assert_allclose(view.std_curve.yData, [x.std() for x in inputs.values()],
                               rtol=1e-5)
    assert "looks normalised" in view.header.text()


def test_input_stats_flag_an_input_that_is_not_normalised(qtbot):
    view = shown(qtbot, InputStatsView())
    view.store.put(act(1, "conv1", RNG.uniform(0, 255, size=(3, 8, 8)), kind=INPUT))
    view.flush()
    assert "check the preprocessing" in view.header.text()


# -- PredictionsView ----------------------------------------------------------------------------


def predictions(run, target):
    probs = [0.6, 0.2, 0.1, 0.06, 0.04]
    labels = ["tabby", "tiger cat", "Egyptian cat", "lynx", "carton"]
    top = tuple(Prediction(index=280 + i, label=lab, prob=p, logit=math.log(p))
                for i, (lab, p) in enumerate(zip(labels, probs, strict=True)))
    return PredictionFrame(run_id=run, top=top, target=target)


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


def cam_frame(run, cam, method="gradcam", layer="layer4", target=281):
    return CamFrame(run_id=run, method=method, layer=layer, target=target,
                    cam=np.asarray(cam, np.float32))


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
    view.alpha_slider.setValue(100)
    np.testing.assert_array_equal(view.composite, heat.astype(np.uint8))
    view.alpha_slider.setValue(0)
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
    assert view.cam_frame is not None and view.cam_frame.run_id == 1
    view.store.put(cam_frame(2, np.ones((8, 8))))
    assert view.cam_frame.run_id == 2
    other = 255 - display
    view.store.put(started(3, other))  # a different image: the old CAM would be wrong on it
    assert view.cam_frame is None
    np.testing.assert_array_equal(view.composite, other)
    view.store.put(cam_frame(2, np.ones((8, 8))))  # late, from the previous image
    assert view.cam_frame is None


def test_cam_method_and_layer_choices_emit_signals(qtbot):
    view = shown(qtbot, CamView())
    with qtbot.assertNotEmitted(view.layerChanged):
        view.set_layers(["layer3", "layer4"], "layer4")
    assert view.layer == "layer4"
    with qtbot.waitSignal(view.layerChanged) as blocker:
        view.layer_combo.setCurrentIndex(0)
    assert blocker.args == ["layer3"]
    with qtbot.waitSignal(view.methodChanged) as blocker:
        view.method_combo.setCurrentIndex(view.method_combo.findData("scorecam"))
    assert blocker.args == ["scorecam"]
    assert [view.method_combo.itemData(i) for i in range(view.method_combo.count())] == [
        "gradcam", "gradcam++", "xgradcam", "layercam", "hirescam", "eigencam", "scorecam"]


def test_cam_view_shows_the_selected_methods_map_when_several_arrive(qtbot):
    view = shown(qtbot, CamView())
    view.set_layers(["layer4"], "layer4")
    display = np.zeros((4, 4, 3), np.uint8)
    view.store.put(started(1, display))
    view.store.put(cam_frame(1, np.zeros((4, 4)), method="gradcam"))
    view.store.put(cam_frame(1, np.ones((4, 4)), method="layercam"))
    assert view.cam_frame.method == "gradcam"  # the combo's choice, not just the newest
    view.method_combo.setCurrentIndex(view.method_combo.findData("layercam"))
    assert view.cam_frame.method == "layercam"
