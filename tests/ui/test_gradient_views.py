"""The gradient view (the selected module's gradient and the gradient flow) and the input
statistics view, fed synthetic frames through a run store."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from view_frames import (
    RNG,
    act,
    grad,
    make_stats,
    paint_pending,
    shown,
    started,
    tile,
)

from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT
from inspector.ui.views.gradient_view import GradientView
from inspector.ui.views.input_stats_view import InputStatsView
from inspector.ui.views.mosaic import SHARED, grid_shape

# -- GradientView -------------------------------------------------------------------------------


def test_gradient_levels_are_symmetric_about_zero(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("conv")
    data = (RNG.normal(size=(4, 5, 5)) + 0.7).astype(np.float32)
    view.store.put(grad(1, "conv", data))
    panel = view.panel
    lo, hi = panel.mosaic_view.item.levels
    assert lo == -hi == -1.0
    rc = grid_shape(4, 5, 5)
    for k in range(4):
        a = np.abs(data[k]).max()
        np.testing.assert_allclose(tile(panel.mosaic_view.item.image, k, rc, 5, 5), data[k] / a,
                                   rtol=1e-6)
    panel.controls.norm_combo.setCurrentIndex(panel.controls.norm_combo.findData(SHARED))
    lo, hi = panel.mosaic_view.item.levels
    assert hi == -lo == pytest.approx(np.abs(data).max())
    assert panel.controls.cmap_combo.currentText() == "blue-white-red"


def test_gradient_kind_toggle_switches_between_output_and_input_gradients(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("fc")
    out, inp = np.full(3, 1.0), np.full(5, -2.0)
    view.store.put(grad(1, "fc", out, kind=GRAD_OUTPUT))
    view.store.put(grad(1, "fc", inp, kind=GRAD_INPUT))
    np.testing.assert_array_equal(view.panel.vector_page.bars.opts["height"], out)
    view.kind_combo.setCurrentIndex(view.kind_combo.findData(GRAD_INPUT))
    np.testing.assert_array_equal(view.panel.vector_page.bars.opts["height"], inp)
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
    assert len(flow.max_curve.xData) == 3
    np.testing.assert_allclose(flow.max_curve.yData, expected_max, rtol=1e-6)
    np.testing.assert_allclose(flow.mean_curve.yData, expected_mean, rtol=1e-6)
    assert "mean |grad|" in flow.summary.text()  # the legend names the mean curve


def test_gradient_flow_falls_back_to_rms_without_abs_mean(qtbot):
    view = shown(qtbot, GradientView())
    g = np.array([1.0, -3.0])
    stats = replace(make_stats(g[None]), abs_mean=0.0)  # as from a core that leaves it unset
    view.store.put(grad(1, "fc", g, stats=stats))
    paint_pending()
    np.testing.assert_allclose(view.flow.mean_curve.yData, [math.hypot(g.mean(), g.std())])
    assert "RMS" in view.flow.summary.text()  # the legend says it is a stand-in


def test_zero_and_non_finite_gradients_are_marked(qtbot):
    view = shown(qtbot, GradientView())
    grads = {
        "a": np.array([0.5, -0.5]),
        "dead": np.zeros(2),
        "bad": np.array([np.nan, 1.0]),
    }
    _flow_run(view, 1, grads)
    paint_pending()
    flow = view.flow
    assert flow.zero_layers == ["dead"] and flow.nonfinite_layers == ["bad"]
    peak, mean = flow.max_curve.yData, flow.mean_curve.yData  # NaN: no point, a marker
    assert np.isnan(peak[1:]).all() and peak[0] == 0.5
    assert len(flow.zero_marks.xData) == 1 and flow.zero_marks.xData[0] == 1
    assert len(flow.bad_marks.xData) == 1 and flow.bad_marks.xData[0] == 2
    assert "zero gradient: dead" in flow.summary.text() and "NaN/Inf: bad" in flow.summary.text()
    assert flow.zero_marks.yData[0] < np.nanmin(mean)  # below every drawn point
    assert flow.bad_marks.yData[0] > np.nanmax(peak)  # above every drawn point


def test_gradient_flow_is_replaced_only_when_the_next_run_has_gradients(qtbot):
    view = shown(qtbot, GradientView())
    _flow_run(view, 1, {"a": np.ones(2), "b": np.ones(2)})
    paint_pending()
    view.store.put(started(2))
    view.store.put(act(2, "a", np.ones(2)))
    paint_pending()
    assert len(view.flow.points) == 2  # still run 1's
    view.store.put(grad(2, "b", np.full(2, 3.0)))
    paint_pending()
    assert [p.name for p in view.flow.points] == ["b"]
    assert view.flow.max_curve.yData[0] == 3.0


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
    paint_pending()
    assert "check the preprocessing" in view.header.text()
