"""Comparing two runs in the window: predictions and CAMs before/after an edit and A/B, the
divergence plot, and Compare ▸ Pin as A. The views are fed synthetic frames through a run
store (as the Session would send them); Pin as A runs in the real window."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401 (a fixture)
from view_frames import RNG, cam_frame, shown

from inspector.core.records.frames import (
    DivergenceFrame,
    ModelLoaded,
    Prediction,
    PredictionFrame,
    RunFinished,
    RunStarted,
)
from inspector.ui.views import colormaps
from inspector.ui.views.cam_overlay import difference_rgb
from inspector.ui.views.cam_view import DIFFERENCE, REFERENCE, CamView
from inspector.ui.views.divergence_view import DivergenceView
from inspector.ui.views.predictions_view import PROB_ROLE, PredictionsView

LABELS = {280: "tabby", 281: "tiger cat", 282: "Egyptian cat", 283: "lynx", 284: "carton",
          285: "fox"}


def start(run, edits=(), display=None, label="img.png"):
    return RunStarted(run, label, "m", "cpu", display=display, edits=edits)


def predictions(run, probs: dict[int, float], target=280):
    top = tuple(Prediction(i, LABELS[i], p, float(np.log(p)))
                for i, p in sorted(probs.items(), key=lambda kv: -kv[1]))
    return PredictionFrame(run, top, target)


BEFORE = {280: 0.60, 281: 0.20, 282: 0.10, 283: 0.06, 284: 0.04}
AFTER = {280: 0.30, 281: 0.35, 282: 0.12, 283: 0.05, 285: 0.03}  # 284 left the top 5, 285 came


def before_and_after(store):
    """The unedited run 1 and the edited run 2 of the same image, as the window runs them."""
    store.set_baseline(1)
    for frame in (start(1), predictions(1, BEFORE), RunFinished(1, "ok"),
                  start(2, edits=("zero features.0[3]", "scale head x0.5")),
                  predictions(2, AFTER), RunFinished(2, "ok")):
        store.put(frame)


def column(table, col):
    return [table.item(r, col) for r in range(table.rowCount())]


# -- the frame router ---------------------------------------------------------------------------


@pytest.mark.parametrize("stagger", [False, True])
def test_router_keeps_the_unedited_run_submitted_before_the_edited_one(qtbot, stagger):
    from view_frames import FakeChannel

    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter(batch_s=0.0, min_interval_s=0.0, stagger=stagger)
    channel = FakeChannel()
    router.set_channel(channel)
    store = router.store
    seen = []
    store.subscribe(seen.append, kinds=("predictions",))
    store.subscribe(lambda _f: None)  # a second subscriber: staggering needs two
    router.expect_run(1)
    store.set_baseline(1)  # what the window does right after submitting the unedited run
    router.expect_run(2)  # then the edited run
    channel.pending = [start(1), start(2, edits=("zero conv[0]",)), predictions(1, BEFORE),
                       predictions(2, AFTER), predictions(0, BEFORE),  # run 0: stale
                       RunFinished(1, "ok"), RunFinished(2, "ok")]
    for _ in range(3):  # staggered: one subscriber per tick
        router.tick()
    assert sorted(f.run_id for f in seen) == [1, 2]
    assert store.current_run == 2 and store.reference_run == 1
    router.stop()


# -- predictions --------------------------------------------------------------------------------


def test_predictions_before_and_after_show_both_and_the_largest_change_first(qtbot):
    view = shown(qtbot, PredictionsView())
    before_and_after(view.store)
    table = view.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["#", "Class", "Before", "After", "Change"]
    # |change|: tabby 30, tiger cat 15, Egyptian cat 2, lynx 1; carton and fox left or
    # entered the top 5, so only a range is known (carton: -4.0 .. -1.0, fox: -1.0 .. +3.0).
    assert [i.text() for i in column(table, 1)] == [
        "tabby", "tiger cat", "Egyptian cat", "carton", "lynx", "fox"]
    assert view.rows == [280, 281, 282, 284, 283, 285]
    assert [i.data(PROB_ROLE) for i in column(table, 2)][:3] == pytest.approx([0.6, 0.2, 0.1])
    assert [i.data(PROB_ROLE) for i in column(table, 3)][:3] == pytest.approx([0.3, 0.35, 0.12])
    changes = [i.text() for i in column(table, 4)]
    assert changes[:3] == ["\u221230.0 pp", "+15.0 pp", "+2.0 pp"]
    assert changes[3] == "\u22124.0 \u2026 \u22121.0 pp"  # 0.04 before, below 0.03 after
    assert changes[5] == "\u22121.0 \u2026 +3.0 pp"  # below 0.04 before, 0.03 after
    assert column(table, 3)[3].data(PROB_ROLE) is None and column(table, 3)[3].text() == "< 3.0%"
    header = view.header.text()
    assert "edited:" in header and "zero features.0[3]; scale head x0.5" in header
    assert "<b>before</b>: run 1" in header and "unedited" in header
    assert "<b>after</b>: run 2" in header
    # The target's row is bold; clicking a row asks for that row's class, not top[row]'s.
    assert column(table, 1)[0].font().bold()
    with qtbot.waitSignal(view.targetChosen) as blocker:
        view._row_chosen(3)
    assert blocker.args == [284]


def test_every_cell_of_before_and_after_has_its_whole_text_in_its_tooltip(qtbot):
    """A narrow dock clips the class names, the percentages drawn over the bars and the
    ranges of change: each cell's tooltip says all of it."""
    view = shown(qtbot, PredictionsView())
    view.resize(260, 300)
    before_and_after(view.store)
    table = view.table
    for row, change in enumerate(view.changes):
        label, before, after, delta = (table.item(row, c) for c in (1, 2, 3, 4))
        assert label.toolTip().startswith(f"{change.label} (class {change.index})")
        for cell, prob, run in ((before, change.before, 1), (after, change.after, 2)):
            text = f"{100 * prob:.2f}% in run {run}" if prob is not None else cell.text()
            assert cell.toolTip().startswith(text), (row, cell.toolTip())
        assert delta.toolTip().startswith(delta.text() + ":")
    assert "range" in table.item(3, 4).toolTip()  # carton: only a range is known


def test_predictions_against_a_pinned_run_are_a_and_b_and_unpinning_ends_it(qtbot):
    view = shown(qtbot, PredictionsView())
    store = view.store
    store.pin(1)
    for frame in (start(1, label="cat.png"), predictions(1, BEFORE), RunFinished(1, "ok"),
                  start(2, label="fox.png"), predictions(2, AFTER), RunFinished(2, "ok")):
        store.put(frame)
    table = view.table
    assert [table.horizontalHeaderItem(c).text() for c in (2, 3)] == ["A", "B"]
    assert "<b>A</b>: run 1 (cat.png)" in view.header.text()
    assert "edited" not in view.header.text()
    store.pin(None)
    view.request_paint()  # Compare ▸ Unpin A asks every view to paint
    assert table.columnCount() == 3 and [i.text() for i in column(table, 1)] == [
        "tiger cat", "tabby", "Egyptian cat", "lynx", "fox"]  # run 2's own order
    assert view.changes == []


def test_an_edited_run_without_its_unedited_run_is_still_marked_edited(qtbot):
    view = shown(qtbot, PredictionsView())
    view.store.put(start(1, edits=("clamp relu [-1, 1]",)))
    view.store.put(predictions(1, AFTER))
    assert view.table.columnCount() == 3
    assert "edited:</b></span> clamp relu [-1, 1]" in view.header.text()


# -- CAM ----------------------------------------------------------------------------------------


def test_cam_selector_shows_after_before_and_their_difference(qtbot):
    view = shown(qtbot, CamView())
    view.set_layers(["layer4"], "layer4")
    store = view.store
    display = RNG.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    before = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    after = before[::-1].copy()
    store.set_baseline(1)
    store.put(start(1, display=display))
    store.put(cam_frame(1, before))
    assert view.compare_combo.isHidden()  # nothing to compare with yet
    store.put(start(2, edits=("zero layer4[0]",), display=display))
    store.put(cam_frame(2, after))
    combo = view.compare_combo
    assert combo.isVisible()
    assert [combo.itemText(i) for i in range(3)] == ["after", "before", "after \u2212 before"]
    assert view.choice()[0].run_id == 2 and view.drawn[0].run_id == 2

    combo.setCurrentIndex(combo.findData(REFERENCE))
    assert view.drawn[0].run_id == 1 and "<b>before</b> (run 1)" in view.header.text()

    combo.setCurrentIndex(combo.findData(DIFFERENCE))
    np.testing.assert_allclose(view.overlay.difference, after - before)
    extent = float(np.abs(after - before).max())
    assert view.overlay.extent == pytest.approx(extent)
    heat = difference_rgb(after - before, extent)
    expected = np.clip(display + 0.5 * (heat - display) + 0.5, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(view.composite, expected)
    assert view.bar.levels() == pytest.approx((-extent, extent))
    assert f"range \u00b1{extent:.3g}" in view.header.text()
    # Centred on 0: a pixel that did not change gets the diverging map's middle colour.
    lut = colormaps.lut(colormaps.DEFAULT_DIVERGING)
    np.testing.assert_array_equal(difference_rgb(np.array([-extent, 0.0, extent]), extent),
                                  lut[[0, 128, 255]])


def test_cam_selector_is_hidden_without_a_map_of_the_same_method_and_layer(qtbot):
    view = shown(qtbot, CamView())
    view.set_layers(["layer3", "layer4"], "layer4")
    store = view.store
    store.set_baseline(1)
    store.put(start(1))
    store.put(cam_frame(1, np.zeros((4, 4)), layer="layer3"))
    store.put(start(2, edits=("zero layer4[0]",)))
    store.put(cam_frame(2, np.ones((4, 4)), layer="layer4"))
    assert view.compare_combo.isHidden() and view.overlay.difference is None
    assert view.bar.levels() == pytest.approx((0.0, 1.0))


def test_cam_difference_of_a_b_is_b_minus_a_and_disabled_for_maps_of_other_sizes(qtbot):
    view = shown(qtbot, CamView())
    view.set_layers(["layer4"], "layer4")
    store = view.store
    store.pin(1)
    store.put(start(1))
    store.put(cam_frame(1, np.full((4, 4), 0.25)))
    store.put(start(2))
    store.put(cam_frame(2, np.full((4, 4), 0.75)))
    combo = view.compare_combo
    assert [combo.itemText(i) for i in range(3)] == ["B", "A", "B \u2212 A"]
    combo.setCurrentIndex(combo.findData(DIFFERENCE))
    np.testing.assert_allclose(view.overlay.difference, 0.5)
    store.put(start(3))
    store.put(cam_frame(3, np.ones((6, 6))))  # another input size: no pixelwise difference
    assert not combo.model().item(2).isEnabled() and view.overlay.difference is None
    assert view.drawn[0].run_id == 3


# -- divergence ---------------------------------------------------------------------------------

MODULES = ("features.0", "features.1", "features.2", "features.3", "head")


def divergence(run=2, reference=1):
    return DivergenceFrame(run, reference, MODULES, np.array([0.0, 0.0, 0.2, 0.5, 1.5]),
                           np.array([1.0, 1.0, 0.97, 0.8, 0.1]))


def click_module(qtbot, view, i):
    """A real left click on module `i`'s relative-L2 point."""
    vb = view.plot.getPlotItem().vb
    scene = vb.mapViewToScene(QPointF(i, float(view.frame.rel_l2[i])))
    widget = view.plot
    qtbot.mouseClick(widget.viewport(), Qt.MouseButton.LeftButton,
                     pos=widget.mapFromScene(scene))


def test_divergence_plot_has_a_point_per_module_and_a_click_selects_it(qtbot):
    view = shown(qtbot, DivergenceView())
    assert "Pin as A" in view.empty.text()
    store = view.store
    store.set_baseline(1)
    for frame in (start(1), RunFinished(1, "ok"), start(2, edits=("zero features.0[3]",)),
                  divergence(), RunFinished(2, "ok")):
        store.put(frame)
    assert view.stack.currentWidget() is view.plot
    x, y = view.l2_curve.getData()
    assert list(x) == [0, 1, 2, 3, 4] and list(y) == pytest.approx([0, 0, 0.2, 0.5, 1.5])
    assert list(view.cosine_curve.getData()[1]) == pytest.approx([1, 1, 0.97, 0.8, 0.1])
    header = view.header.text()
    assert "after (run 2) vs before (run 1)" in header
    assert "part at <b>features.2</b>" in header and "at <b>head</b>" in header
    with qtbot.waitSignal(view.moduleClicked) as blocker:
        click_module(qtbot, view, 3)
    assert blocker.args == ["features.3"]
    # The next run is compared with nothing: its plot says so, not the last run's.
    store.put(start(3))
    store.put(RunFinished(3, "ok"))
    assert view.stack.currentWidget() is view.empty and "not compared" in view.empty.text()


def test_divergence_plot_hover_names_the_module(qtbot):
    view = shown(qtbot, DivergenceView())
    view.store.pin(1)
    view.store.put(start(1))
    view.store.put(start(2))
    view.store.put(divergence())
    assert "B (run 2) vs A (run 1)" in view.header.text()
    vb = view.plot.getPlotItem().vb
    view._hover(vb.mapViewToScene(QPointF(4, 1.0)))
    assert view.hover_label.text().startswith("module 4: head") and "rel L2 1.5" in \
        view.hover_label.text()
    # Another model: nothing of the old model's modules stays, above or below the plot.
    view.store.put(ModelLoaded("other", "", True, "cpu", None))
    assert view.frame is None and view.stack.currentWidget() is view.empty
    assert view.hover_label.text().strip() == "" and view.header.text() == ""


# -- the window: Pin as A, and the divergence plot selecting modules -----------------------------


def test_pin_as_a_reruns_with_kept_outputs_and_pins_that_run(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    first = wait_run(qtbot, window)
    compare, store = window.compare, window.router.store
    assert compare.pin_action.isEnabled() and not compare.unpin_action.isEnabled()
    assert compare.menu.title() == "&Compare" and compare.label.isHidden()
    submitted = []
    submit = window.control.session.submit_request
    window.control.session.submit_request = lambda r: (submitted.append(r), submit(r))[1]
    previous = window.control.last_request
    compare.pin_action.trigger()
    assert len(submitted) == 1 and submitted[0].keep_outputs
    assert submitted[0].image == previous.image and submitted[0].capture == previous.capture
    pinned = window.control.current_run
    assert pinned != first.run_id and store.pinned_run == pinned
    wait_run(qtbot, window)
    assert compare.label.isVisible() and compare.label.text() == f"A: run {pinned} (x.png)"
    assert compare.unpin_action.isEnabled()
    window.images.add_paths([write_png(tmp_path / "y.png", color=(200, 40, 40))])
    qtbot.waitUntil(lambda: window.control.last_request.label == "y.png", timeout=TIMEOUT)
    b = wait_run(qtbot, window)  # run B, of another image: A stays, and B is compared with it
    assert b.run_id > pinned and store.reference_run == pinned
    # The divergence plot: a point per module whose output the runs captured.
    divergence = store.get(("divergence",), b.run_id)
    assert divergence is not None and divergence.reference_run == pinned
    captured = {m for m, kinds in window.control.last_request.capture.modules.items()
                if "output" in kinds}
    assert set(divergence.modules) == captured
    assert len(divergence.modules) == len(captured)
    assert (divergence.rel_l2 > 0).any()  # another image: the outputs differ
    view = window.views["divergence"]
    qtbot.waitUntil(lambda: view.shown_frame() is divergence, timeout=TIMEOUT)
    assert len(view.l2_curve.getData()[0]) == len(captured)
    compare.unpin_action.trigger()
    assert store.pinned_run is None and compare.label.isHidden()
    assert not compare.unpin_action.isEnabled()


def test_clicking_a_module_in_the_divergence_plot_selects_it_in_the_tree(
        make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    store = window.router.store
    run = store.current_run
    window.docks["divergence"].show()
    window.docks["divergence"].raise_()
    view = window.views["divergence"]
    qtbot.waitExposed(view)
    store.put(DivergenceFrame(run, run - 1, ("features.0", "features.3", "head"),
                              np.array([0.0, 0.4, 0.9]), np.array([1.0, 0.9, 0.5])))
    store.notify()  # the window's store is deferred: the router would deliver this
    assert view.frame is not None and len(view.l2_curve.getData()[0]) == 3
    assert window.tree.current_module() != "features.3"
    click_module(qtbot, view, 1)
    assert window.tree.current_module() == "features.3"


def test_a_tiny_change_of_probability_is_not_shown_as_none():
    """0.65 % -> 0.61 % read "0.0 pp", in red."""
    from inspector.ui.views.predictions_view import _points

    assert _points(-0.0004) == "\u22120.04"
    assert _points(0.0004) == "+0.04"
    assert _points(0.00001) == "0.0" and _points(0.0) == "0.0"
    assert _points(0.152) == "+15.2"
