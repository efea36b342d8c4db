"""File ▸ Save view as PNG and Save run as NPZ in the real window, with the real engine: the
NPZ holds what `network-inspector analyse` writes for the same image."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401
from view_frames import predictions, shown

from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.ui.export.save_view import MIN_PNG_SIZE, save_view_png
from inspector.ui.views.predictions_view import BAR_COLOR, PredictionsView


def test_the_file_menu_saves_each_view_as_png_and_says_what_it_could_not(
    make_window, qtbot, tmp_path
):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    actions = window.save_actions  # installed once, when the views were built
    window.build_views()  # again: nothing added twice
    assert window.save_actions is actions
    file_actions = window.menuBar().actions()[0].menu().actions()
    assert sum(a.text() == actions.npz_action.text() for a in file_actions) == 1
    file_menu = window.menuBar().actions()[0].menu()
    assert actions.png_menu.menuAction() in file_menu.actions()
    assert actions.npz_action in file_menu.actions()
    asked = []
    actions.ask = lambda *args: asked.append(args[1:]) or str(tmp_path / "activation.png")
    actions.png_actions["activation"].trigger()
    assert asked[0][1] == "activation.png"
    image = QImage(str(tmp_path / "activation.png"))
    assert not image.isNull() and image.width() > 50 and image.height() > 50
    saved = actions.save_png("predictions", str(tmp_path / "predictions.png"))
    view = window.views["predictions"]
    ratio = view.devicePixelRatioF()
    width = max(view.width(), MIN_PNG_SIZE.width())
    assert QImage(str(saved)).size().width() == round(width * ratio)
    # The CAM: its header (method, layer, class label) above the overlay and its colour bar.
    cam = window.views["cam"]
    qtbot.waitUntil(lambda: cam.drawn[0] is not None, timeout=TIMEOUT)
    saved = QImage(str(actions.save_png("cam", str(tmp_path / "cam.png"))))
    ratio = cam.devicePixelRatioF()
    assert saved.height() == round((cam.header.height() + cam.view.height()) * ratio)
    assert saved.width() == round(max(cam.header.width(), cam.view.width()) * ratio)
    assert "for " in cam.header.text()  # the class the map explains is in the picture
    # A folder that is not there: one line in the status bar, no traceback, no file.
    before = window.reporter.count
    assert actions.save_png("activation", str(tmp_path / "nope" / "a.png")) is None
    assert window.reporter.count == before + 1 and "could not write" in window.reporter.last_message


@pytest.mark.slow
def test_save_run_as_npz_writes_what_analyse_writes_for_the_demo_model(
    make_window, qtbot, tmp_path, demo_samples, monkeypatch
):
    import tqdm

    from inspector.batch.analyse.command import Analysis
    from inspector.core.models.base import ModelSpec

    image = demo_samples[0]
    window = make_window(model={}, images=[image])
    wait_run(qtbot, window)
    request = window.control.last_request
    assert request.gradients and request.cams, "the demo run explains its top class"
    actions = window.save_actions
    path = tmp_path / "window.npz"
    assert actions.save_npz(str(path))
    qtbot.waitUntil(lambda: not actions.saver.busy, timeout=TIMEOUT)
    assert path.is_file(), window.reporter.last_message
    # The window's views still show the run they showed: the export run went elsewhere.
    assert window.router.store.current_run == window.control.current_run

    layers = [m for m, kinds in request.capture.modules.items() if {OUTPUT, GRAD_OUTPUT} <= kinds]
    assert layers
    (method, layer), = request.cams
    out = tmp_path / "analyse"
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)  # no monitor thread left running
    analysis = Analysis(ModelSpec(name="demo_shapes"), out, layers, [method], cam_layer=layer,
                        tensorboard=False, progress=False)
    assert analysis.run([str(image)]) == 0
    (written,) = out.rglob("*.npz")
    with np.load(written) as expected, np.load(path) as got:
        only_window = {k for k in set(got.files) - set(expected.files)
                       if not k.startswith("activation/")}  # modules captured without grads
        assert not only_window and set(expected.files) <= set(got.files)
        assert {"input", "logits", f"cam/{method}", f"gradient/{layers[0]}"} <= set(got.files)
        for key in expected.files:
            assert got[key].shape == expected[key].shape, key
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, atol=1e-6,
                                       err_msg=key)


# -- views on a tab behind another, and tables taller than their pane ---------------------------


def _array(image: QImage) -> np.ndarray:
    """(H, W, 3) uint8 RGB of a QImage."""
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    line = rgb.bytesPerLine()
    data = np.frombuffer(rgb.constBits(), np.uint8, line * rgb.height())
    return data.reshape(rgb.height(), line)[:, : rgb.width() * 3].reshape(
        rgb.height(), rgb.width(), 3).copy()


def test_a_view_on_a_tab_behind_another_is_saved_as_it_looks_in_front(
    make_window, qtbot, tmp_path
):
    """With Divergence in front, Gradients was saved as 405x97: its stale tab size, the
    header and a squashed sliver of the mosaic."""
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    actions = window.save_actions
    tabs = ("activation", "gradient", "input_stats", "divergence")
    for front in ("divergence", "activation"):
        window.docks[front].raise_()
        qtbot.waitUntil(lambda f=front: not window.views[f].visibleRegion().isEmpty())
        for key in (k for k in tabs if k != front):
            view = window.views[key]
            assert view.visibleRegion().isEmpty(), f"{key} is behind {front}"
            size = view.size()
            hidden = QImage(str(actions.save_png(key, str(tmp_path / f"{key}-hidden.png"))))
            assert view.size() == size  # the view got its own size back
            window.docks[key].raise_()
            qtbot.waitUntil(lambda v=view: not v.visibleRegion().isEmpty())
            shown = QImage(str(actions.save_png(key, str(tmp_path / f"{key}-front.png"))))
            ratio = view.devicePixelRatioF()
            assert hidden.size() == shown.size(), key
            assert hidden.width() >= MIN_PNG_SIZE.width() * ratio
            assert hidden.height() >= 200 * ratio, key  # was 97 for Gradients
            pixels = _array(hidden)
            colours = np.unique(pixels.reshape(-1, 3), axis=0)
            assert len(colours) > 20, key  # the mosaic or the plot, not an empty pane
            # What the hidden view's picture shows is what its tab shows in front.
            same = (pixels == _array(shown)).all(axis=2).mean()
            assert same > 0.98, (key, same)
            window.docks[front].raise_()
            qtbot.waitUntil(lambda f=front: not window.views[f].visibleRegion().isEmpty())
    # A closed pane paints nothing that arrives: a sentence says how to open it, no dialog.
    window.docks["gradient"].close()
    asked = []
    actions.ask = lambda *args: asked.append(args) or str(tmp_path / "closed.png")
    assert actions.save_png("gradient") is None and not asked
    assert "closed" in window.reporter.last_message and "View" in window.reporter.last_message


def test_the_saved_predictions_hold_every_row_of_the_table(qtbot, tmp_path):
    """At the default layout the pane showed 4 and a half of the 5 rows, and so did its PNG."""
    view = shown(qtbot, PredictionsView())
    view.store.put(predictions(1, target=280))
    view.resize(326, 190)
    table = view.table
    qtbot.waitUntil(lambda: table.viewport().height() < table.verticalHeader().length())
    table.verticalScrollBar().setValue(1)  # scrolled a little: the picture still starts at row 1
    size, scrolled = view.size(), table.verticalScrollBar().value()
    image = QImage(str(save_view_png(view, tmp_path / "predictions.png")))
    assert view.size() == size and table.verticalScrollBar().value() == scrolled
    ratio = view.devicePixelRatioF()
    assert image.height() >= round((view.header.height() + table.horizontalHeader().height()
                                    + table.verticalHeader().length()) * ratio)
    # Each row's probability bar, whole: as many bands of the bar's colour, all as tall.
    bar = np.array(BAR_COLOR.getRgb()[:3], np.uint8)
    rows = (_array(image) == bar).all(axis=2).any(axis=1)
    edges = np.flatnonzero(np.diff(np.r_[0, rows.astype(np.int8), 0]))
    heights = edges[1::2] - edges[::2]
    assert len(heights) == table.rowCount() == 5
    assert len(set(heights.tolist())) == 1 and heights[0] >= 10, heights
