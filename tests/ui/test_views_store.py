"""The views and the module tree driven by one run store, as in the window: each is told only
about the keys it shows, a failed run reaches each of them once, and a module selected after
a run is read from the store."""

from __future__ import annotations

import numpy as np
import pytest
from view_frames import FakeChannel, act, cam_frame, grad, predictions, started

from inspector.core.records.frames import RunFinished
from inspector.core.records.kinds import GRAD_OUTPUT, INPUT, OUTPUT
from inspector.core.run.store import RunStore
from inspector.ui.run.frame_router import FrameRouter
from inspector.ui.views.activation_view import ActivationView
from inspector.ui.views.cam_view import CamView
from inspector.ui.views.gradient_view import GradientView
from inspector.ui.views.input_stats_view import InputStatsView
from inspector.ui.views.predictions_view import PredictionsView
from inspector.ui.views.tensor_panel import MESSAGE, MOSAIC, VECTOR

VIEWS = (ActivationView, GradientView, InputStatsView, PredictionsView, CamView)


def shown_views(qtbot, store):
    views = {cls.__name__: cls(store=store) for cls in VIEWS}
    for view in views.values():
        qtbot.addWidget(view)
        view.resize(480, 360)
        view.show()
        qtbot.waitExposed(view)
    views["ActivationView"].set_module("conv")
    views["GradientView"].set_module("conv")
    return views


def a_run(run, image, status="ok"):
    """The frames of a run of the demo kind: forward, predictions, backward, CAM."""
    frames = [started(run, image)]
    for module, preview in (("conv", np.ones((2, 3, 3))), ("fc", np.arange(4.0))):
        frames += [act(run, module, preview, kind=INPUT), act(run, module, preview)]
    frames += [predictions(run, target=280), grad(run, "fc", np.ones(4)),
               grad(run, "conv", np.ones((2, 3, 3))), cam_frame(run, np.ones((8, 8)))]
    return frames + [RunFinished(run, status)]


def test_a_view_of_one_module_is_told_nothing_about_another(qtbot):
    store = RunStore()
    view = ActivationView(store=store)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    view.set_module("conv")
    store.put(started(1))
    paints = view.paint_count
    for _ in range(3):
        store.put(act(1, "fc", np.arange(4.0)))  # the same kind, another module
    assert view.paint_count == paints
    assert view.module_subscription.modules == {"conv"}
    store.put(act(1, "conv", np.ones((2, 3, 3))))
    assert view.paint_count == paints + 1 and view.panel.mode == MOSAIC
    view.set_module("fc")  # the store had fc's frame all along: no new run needed
    assert view.panel.mode == VECTOR and view.current_frame().module == "fc"
    assert store.runs() == [1]


def test_selecting_a_module_reads_its_newest_frames_from_the_store(qtbot):
    store = RunStore()
    views = shown_views(qtbot, store)
    image = np.zeros((8, 8, 3), np.uint8)
    for frame in a_run(1, image):
        store.put(frame)
    activation, gradient = views["ActivationView"], views["GradientView"]
    for view in (activation, gradient):
        view.set_module("fc")
        assert view.current_frame().module == "fc" and view.current_frame().run_id == 1
        assert view.panel.mode == VECTOR
    np.testing.assert_array_equal(activation.panel.vector_page.bars.opts["height"], np.arange(4.0))
    assert "fc" in gradient.header.text()
    activation.set_module("missing")
    assert activation.current_frame() is None and activation.panel.mode == MESSAGE
    assert "No output of \u201cmissing\u201d was captured" in activation.panel.message.text()


@pytest.mark.parametrize("stagger", [False, True])
def test_a_failed_run_reaches_every_view_once_and_each_says_so(qtbot, stagger):
    router = FrameRouter(batch_s=0.0, min_interval_s=0.0, stagger=stagger)
    channel = FakeChannel()
    router.set_channel(channel)
    views = shown_views(qtbot, router.store)
    finished = []
    router.runFinished.connect(finished.append)

    def run_through(frames):
        channel.pending = frames
        for _ in range(len(router.store.subscriptions) + 1):  # one view per tick at most
            router.tick()
        assert finished[-1].run_id == frames[-1].run_id  # every view was told

    run_through(a_run(1, np.zeros((8, 8, 3), np.uint8)))
    qtbot.waitUntil(lambda: views["InputStatsView"].layers == ["conv", "fc"])
    assert not any(view.failed for view in views.values())
    paints = {name: view.paint_count for name, view in views.items()}
    # Another image's run that fails before any layer ran.
    run_through([started(2, np.full((8, 8, 3), 255, np.uint8)), RunFinished(2, "error")])
    for name, view in views.items():
        assert view.failed, name
        # RunStarted changed some views' hints; the failure is one more paint, not one per frame.
        assert view.paint_count - paints[name] <= 2, name
    assert views["ActivationView"].current_frame() is None
    assert "failed" in views["ActivationView"].panel.message.text()
    assert views["GradientView"].flow_points()[0] == []
    assert views["PredictionsView"].frame is None and "failed" in views["PredictionsView"].empty.text()
    assert views["CamView"].choice()[0] is None and "failed" in views["CamView"].header.text()
    assert views["InputStatsView"].layers == [] and "failed" in views["InputStatsView"].empty.text()
    router.stop()


def test_every_view_is_told_of_a_failed_run_exactly_once(qtbot):
    store = RunStore()
    views = shown_views(qtbot, store)
    for frame in a_run(1, np.zeros((8, 8, 3), np.uint8)):
        store.put(frame)
    store.put(started(2))
    paints = {name: view.paint_count for name, view in views.items()}
    store.put(RunFinished(2, "error"))
    # A visible view paints once per notification about a run it shows (told twice, it
    # would paint twice): once here.
    painted = {name: view.paint_count - paints[name] for name, view in views.items()}
    assert painted == dict.fromkeys(views, 1)
    assert all(view.failed for view in views.values())


def test_the_module_tree_reads_statistics_of_its_own_modules_from_the_store(qtbot):
    import torch
    from torch import nn

    from inspector.core.models.tree import build_tree
    from inspector.ui.module_tree.cells import COL_MEAN
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    store = RunStore()
    widget = ModuleTreeWidget(store=store)
    qtbot.addWidget(widget)
    tree = build_tree(nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval(), torch.zeros(1, 4))
    widget.set_tree(tree, "net")
    model = widget.model
    assert model.subscription.modules == set(tree.modules)
    store.put(act(1, "elsewhere", np.ones(3)))  # not a module of this tree
    assert model._dirty == set()
    store.put(act(1, "0", np.array([1.0, 2.0, 3.0])))
    store.put(grad(1, "0", np.ones(3)))
    assert model.cells.stats_of("0").mean == pytest.approx(2.0)
    with qtbot.waitSignal(model.dataChanged):
        model.flush(force=True)
    assert model.data(model.index_of("0", COL_MEAN)) == "2"
    assert store.latest_tensor("0", GRAD_OUTPUT) is not None
    store.put(act(2, "1", np.zeros(3), kind=OUTPUT))  # run 2 did not capture "0"
    assert "earlier run" in model.data(model.index_of("0", COL_MEAN), 3)  # ToolTipRole
