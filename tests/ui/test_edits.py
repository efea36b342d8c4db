"""Edits in the window: made from the mosaic, the tree and the image, listed in the Edits
dock, undone with the undo stack, run beside the unedited run of the same image, and Copy
as Python. The window runs core's real Session on the tiny model (see test_main_window)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QInputDialog
from test_main_window import HERE, TIMEOUT, wait_run, write_png  # noqa: F401

from inspector.ui.edits.actions import NumbersError, parse_numbers
from inspector.ui.edits.commands import EditHistory
from inspector.ui.edits.edit_list import EditList
from inspector.ui.image.canvas import ImageCanvas
from inspector.ui.module_tree.cells import (
    COL_MEAN,
    COL_NAME,
    EDIT_GLYPH,
    EDITED_COLOR,
    STATS_COLUMNS,
)

PICKY = {"name": None, "factory": f"{HERE / 'tiny_models.py'}:build_picky_model"}


# -- helpers ------------------------------------------------------------------------------------
def record_submissions(window, monkeypatch) -> list:
    """Every RunRequest the window gives the Session from now on, in order."""
    session = window.control.session
    submitted = []
    original = session.submit_request

    def submit_request(request):
        submitted.append(request)
        return original(request)

    monkeypatch.setattr(session, "submit_request", submit_request)
    return submitted


def logits(window, run_id) -> np.ndarray:
    """The logits of every class in `run_id`'s predictions (the tiny model has 4 classes)."""
    frame = window.router.store.get(("predictions",), run_id)
    assert frame is not None, f"no predictions of run {run_id} in the store"
    out = np.zeros(len(frame.top))
    for p in frame.top:
        out[p.index] = p.logit
    return out


def action(menu, text: str):
    found = [a for a in menu.actions() if a.text() == text]
    assert found, f"no “{text}” in {[a.text() for a in menu.actions()]}"
    return found[0]


def badge(window, module: str) -> str:
    model = window.tree.model
    return model.data(model.index_of(module, COL_NAME))


def right_click_tile(panel, channel: int) -> None:
    """A real right-click in the middle of channel `channel`'s tile of the mosaic."""
    y0, x0 = panel.mosaic_view.mosaic.origin(channel)
    mosaic = panel.mosaic_view.mosaic
    centre = QPointF(x0 + mosaic.width / 2, y0 + mosaic.height / 2)
    view = panel.mosaic_view.item.scene().views()[0]
    pos = view.mapFromScene(panel.mosaic_view.item.mapToScene(centre))
    QTest.mouseClick(view.viewport(), Qt.MouseButton.RightButton,
                     Qt.KeyboardModifier.NoModifier, pos)


def answer_text(monkeypatch, text: str) -> None:
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: (text, True)))


# -- without the engine ---------------------------------------------------------------------------
def test_numbers_typed_in_a_dialog_are_read_or_refused_with_a_reason():
    assert parse_numbers("0, 6", ("min", "max")) == [0.0, 6.0]
    assert parse_numbers(" -1 ;", ("min", "max"), optional=True) == [-1.0, None]
    assert parse_numbers("0.5, 7", ("std", "seed"), integer=("seed",)) == [0.5, 7]
    with pytest.raises(NumbersError, match="seed must be a whole number"):
        parse_numbers("0.5, 1.5", ("std", "seed"), integer=("seed",))
    with pytest.raises(NumbersError, match="expected 2 numbers"):
        parse_numbers("3", ("min", "max"))
    with pytest.raises(NumbersError, match="max must be finite"):
        parse_numbers("0, inf", ("min", "max"))


def test_undo_and_redo_put_back_the_same_edit_in_the_same_row(qtbot):
    from inspector.core.edits.interventions import Clamp, ReplaceWithMean, ZeroChannels

    edits = EditList()
    history = EditHistory(edits)
    changes = []
    edits.changed.connect(lambda: changes.append(edits.interventions()))
    a = history.add(ZeroChannels("a", (1,)))
    b = history.add(Clamp("b", 0.0, 1.0))
    c = history.add(ReplaceWithMean("c"))
    history.delete(b)
    assert [e.module for e in edits] == ["a", "c"]
    history.set_enabled(a, False)
    assert edits.interventions() == (ReplaceWithMean("c"),)
    assert edits.by_module() == {"c": [c]}
    history.undo()  # a back on
    history.undo()  # b back, in the middle
    assert list(edits) == [a, b, c] and all(e.enabled for e in edits)
    history.redo()
    assert list(edits) == [a, c]
    assert len(changes) == 8  # one `changed` for each of 3 adds, delete, switch, 2 undos, redo
    assert history.undoText() == "delete “clamp b to [0, 1]”"


def test_a_box_dragged_on_the_canvas_is_in_the_pictures_own_pixels(qtbot):
    canvas = ImageCanvas("")
    qtbot.addWidget(canvas)
    canvas.resize(300, 200)
    image = QImage(64, 32, QImage.Format.Format_RGB888)
    image.fill(0)
    canvas.set_image(image)
    canvas.boxes_allowed = True
    canvas.set_box_mode(True)
    # 64 x 32 fits 300 x 200 at 4.6875x: 300 x 150, 25 pixels down from the top.
    assert canvas.image_rect().getRect() == (0.0, 25.0, 300.0, 150.0)
    boxes = []
    canvas.boxDrawn.connect(boxes.append)
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPointF(100, 80).toPoint())
    QTest.mouseMove(canvas, QPointF(60, 50).toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       QPointF(10, 30).toPoint())
    # x 10..100 -> 2.13..21.3 -> pixels 2..21; y (30..80) - 25 -> 1.07..11.7 -> pixels 1..11.
    assert boxes == [(2, 1, 22, 12)]
    # Off the picture's edge, the box stops at it; a click is not a box.
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPointF(250, 150).toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       QPointF(299, 199).toPoint())
    QTest.mouseClick(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPointF(50, 50).toPoint())
    assert boxes[1:] == [(53, 26, 64, 32)]
    # Without box mode a plain drag draws nothing; Shift+drag does.
    canvas.set_box_mode(False)
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPointF(10, 30).toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       QPointF(100, 80).toPoint())
    assert len(boxes) == 2
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                     QPointF(10, 30).toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                       QPointF(100, 80).toPoint())
    assert boxes[2:] == [(2, 1, 22, 12)]


def test_the_router_keeps_the_frames_of_the_unedited_run_beside_the_newer_edited_run(qtbot):
    from view_frames import FakeChannel, act

    from inspector.core.records.frames import RunFinished, RunStarted
    from inspector.ui.run.frame_router import FrameRouter

    router = FrameRouter(batch_s=0.0, min_interval_s=0.0)
    channel = FakeChannel()
    router.set_channel(channel)
    router.store.set_baseline(5)  # what SessionControl.submit_baseline does
    router.expect_run(5)
    router.expect_run(6)  # the edited run, submitted right after it
    # One batch: the baseline's frames and the edited run's start (a newer run), and a
    # run older than both, which is stale.
    channel.pending = [RunStarted(5, "x", "m", "cpu"), act(5, "a", [1.0]), act(4, "a", [3.0]),
                       RunFinished(5, "ok"), RunStarted(6, "x", "m", "cpu"), act(6, "a", [2.0]),
                       RunFinished(6, "ok")]
    router.tick()
    store = router.store
    assert store.current_run == 6 and store.baseline_run == 5
    assert store.get(("tensor", "a", "output", 0, ""), 5) is not None
    assert store.get(("tensor", "a", "output", 0, ""), 4) is None
    assert store.status(5) == "ok"
    router.stop()


# -- in the window ------------------------------------------------------------------------------------
def test_zeroing_a_channel_from_the_mosaic_changes_the_prediction_and_undo_restores_it(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.core.edits.interventions import ZeroChannels
    from inspector.ui.views.tensor_panel import MOSAIC

    window = make_window(images=[write_png(tmp_path / "x.png")])
    plain = wait_run(qtbot, window)
    before = logits(window, plain.run_id)
    submitted = record_submissions(window, monkeypatch)
    view = window.views["activation"]
    assert view.module == "features.0"
    qtbot.waitUntil(lambda: view.panel.mode == MOSAIC and view.panel.data is not None,
                    timeout=TIMEOUT)
    # The strongest channel: zeroing it must reach the logits.
    channel = int(np.argmax(view.panel.data.mean(axis=(1, 2))))

    right_click_tile(view.panel, channel)
    menu = QApplication.activePopupWidget()  # the channel's context menu, shown
    assert menu is not None and menu.isVisible()
    action(menu, "Zero this channel").trigger()
    menu.close()
    edited = wait_run(qtbot, window)
    after = logits(window, edited.run_id)
    assert not np.allclose(after, before, atol=1e-4)
    assert window.router.store.edited(edited.run_id)
    # The unedited run went first, kept for comparisons, and the edited run names it.
    zero = ZeroChannels("features.0", (channel,))
    assert [r.interventions for r in submitted] == [(), (zero,)]
    baseline = window.control.baseline_run
    assert submitted[0].keep_outputs and submitted[1].compare_with == baseline
    assert window.router.store.baseline_run == baseline
    qtbot.waitUntil(lambda: window.router.store.status(baseline) == "ok", timeout=TIMEOUT)
    np.testing.assert_allclose(logits(window, baseline), before, rtol=1e-6, atol=1e-6)
    assert window.router.store.reference_run == baseline
    assert badge(window, "features.0").startswith(EDIT_GLYPH)
    tip = window.tree.model.data(window.tree.model.index_of("features.0", COL_NAME),
                                 Qt.ItemDataRole.ToolTipRole)
    assert zero.describe() in tip

    window.menus.undo.trigger()  # Ctrl+Z
    restored = wait_run(qtbot, window)
    assert len(window.edits) == 0 and not badge(window, "features.0").startswith(EDIT_GLYPH)
    assert submitted[2].interventions == () and submitted[2].compare_with is None
    assert window.router.store.baseline_run is None and window.control.baseline_run is None
    np.testing.assert_allclose(logits(window, restored.run_id), before, rtol=1e-6, atol=1e-6)

    window.menus.redo.trigger()  # Ctrl+Shift+Z: the same edit, the same picture
    again = wait_run(qtbot, window)
    np.testing.assert_allclose(logits(window, again.run_id), after, rtol=1e-6, atol=1e-6)
    assert window.menus.undo.shortcut().toString() == "Ctrl+Z"
    assert window.menus.redo.shortcut().toString() == "Ctrl+Shift+Z"


def test_edits_from_the_tree_reach_the_next_run_and_the_unedited_run_is_cached(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.core.edits.interventions import AddNoise, Clamp, ScaleChannels, ScaleGradient

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    submitted = record_submissions(window, monkeypatch)

    answer_text(monkeypatch, "0, 0.5")
    action(window.tree._build_menu("features.2"), "Clamp output…").trigger()
    first = wait_run(qtbot, window)
    clamp = Clamp("features.2", 0.0, 0.5)
    assert [r.interventions for r in submitted] == [(), (clamp,)]
    baseline = window.control.baseline_run
    qtbot.waitUntil(lambda: window.router.store.status(baseline) == "ok", timeout=TIMEOUT)
    assert window.router.store.edited(first.run_id)

    # Only the edits change: the unedited run is not run again.
    answer_text(monkeypatch, "0.2, 7")
    action(window.tree._build_menu("features.3"), "Add noise…").trigger()
    wait_run(qtbot, window)
    assert len(submitted) == 3
    assert submitted[2].interventions == (clamp, AddNoise("features.3", 0.2, 7))
    assert submitted[2].compare_with == baseline == window.router.store.baseline_run

    # A new image: its own unedited run first.
    window.images.add_paths([write_png(tmp_path / "y.png", (90, 30, 30))])
    qtbot.waitUntil(lambda: len(submitted) == 5, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert submitted[3].interventions == () and submitted[3].label == "y.png"
    assert submitted[4].compare_with == window.control.baseline_run != baseline
    # Scale factors come from a number dialog: the channel menu's and the gradient's.
    monkeypatch.setattr(QInputDialog, "getDouble", staticmethod(lambda *a, **k: (0.25, True)))
    action(window.edit_actions.channel_menu("features.3", 5), "Scale this channel…").trigger()
    action(window.tree._build_menu("features.1"), "Scale gradient…").trigger()
    wait_run(qtbot, window)
    assert submitted[-1].interventions[2:] == (
        ScaleChannels("features.3", (5,), 0.25), ScaleGradient("features.1", 0.25))

    # Switching every edit off: plain runs, no baseline kept.
    for edit in list(window.edits):
        window.history.set_enabled(edit, False)
    wait_run(qtbot, window)
    assert submitted[-1].interventions == () and submitted[-1].compare_with is None
    assert window.router.store.baseline_run is None

    # Another model: edits of modules it lacks go (and the history that named them).
    for edit in list(window.edits):
        window.history.set_enabled(edit, True)
    wait_run(qtbot, window)
    window.control.load_model(window.control.make_spec(**PICKY))
    qtbot.waitUntil(lambda: "features.3" not in window.tree.model.tree.modules, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert [e.module for e in window.edits] == ["features.1"]
    said = window.reporter.label.text()  # and the Edits dock's note, until dismissed
    assert "dropped 'features.3:noise=0.2,7'" in window.docks["edits"].widget().note.text()
    assert ("Edits after switching to build_picky_model: dropped 'features.2:clamp=0,0.5' "
            "(build_picky_model has no module 'features.2')") in said
    assert "dropped 'features.3:noise=0.2,7'" in said
    assert said.endswith("kept 'features.1:grad-scale=0.25'.")
    assert not window.history.canUndo()
    assert submitted[-1].interventions == (ScaleGradient("features.1", 0.25),)
    assert badge(window, "features.1").startswith(EDIT_GLYPH)

    # Bad numbers: a message, no edit, no run.
    runs = len(submitted)
    answer_text(monkeypatch, "1, 0")
    action(window.tree._build_menu("features.0"), "Clamp output…").trigger()
    assert "minimum 1 is above the maximum 0" in window.reporter.last_message
    assert len(window.edits) == 1 and len(submitted) == runs


def test_the_edits_dock_switches_and_deletes_edits_and_the_tree_badge_follows(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.core.edits.interventions import Occlude, ReplaceWithMean
    from inspector.ui.image.pane import MODEL_INPUT

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    submitted = record_submissions(window, monkeypatch)
    dock = window.docks["edits"].widget()
    assert dock.hint.isVisibleTo(dock)

    # An occlusion box dragged on the model input (Shift+drag, no button needed).
    pane = window.images
    pane.set_mode(MODEL_INPUT)
    canvas = pane.canvas
    assert canvas.image.size().toTuple() == (64, 64)
    start, end = canvas.from_image(QPointF(10.5, 5.5)), canvas.from_image(QPointF(30.5, 20.5))
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                     start.toPoint())
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier,
                       end.toPoint())
    occlude = Occlude("", box=(10, 5, 31, 21))
    assert window.edits.interventions() == (occlude,)
    wait_run(qtbot, window)
    assert submitted[-1].interventions == (occlude,)
    assert badge(window, "").startswith(EDIT_GLYPH)  # the model's own row: its input is edited
    assert canvas.marks == [(10, 5, 31, 21)]  # outlined on the model input

    window.edit_actions.replace_with_mean("features.3")
    wait_run(qtbot, window)
    rows = dock.rows()
    assert [r.check.text() for r in rows] == [occlude.describe(),
                                              ReplaceWithMean("features.3").describe()]
    assert not dock.hint.isVisibleTo(dock)

    rows[0].check.click()  # off: kept in the list, not in the runs
    wait_run(qtbot, window)
    assert submitted[-1].interventions == (ReplaceWithMean("features.3"),)
    assert not badge(window, "").startswith(EDIT_GLYPH)
    assert canvas.marks == [] and len(window.edits) == 2

    rows[1].delete.click()
    wait_run(qtbot, window)
    assert submitted[-1].interventions == ()  # the one left is off: a plain run
    assert window.router.store.baseline_run is None
    assert not badge(window, "features.3").startswith(EDIT_GLYPH)
    assert len(dock.rows()) == 1 and not dock.rows()[0].check.isChecked()

    window.history.undo()  # the deleted edit is back, in its row, with its badge
    wait_run(qtbot, window)
    assert [r.check.text() for r in dock.rows()][1] == ReplaceWithMean("features.3").describe()
    assert badge(window, "features.3").startswith(EDIT_GLYPH)
    window.history.undo()  # the switch: the checkbox follows
    wait_run(qtbot, window)
    assert dock.rows()[0].check.isChecked()
    assert submitted[-1].interventions == (occlude, ReplaceWithMean("features.3"))


def test_copy_as_python_puts_the_script_on_the_clipboard_or_says_why_not(
    make_window, qtbot, tmp_path, monkeypatch
):
    calls = []

    class ScriptExportError(Exception):
        pass

    def script_for(loaded, request):
        calls.append((loaded, request))
        if request.label == "refused.png":
            raise ScriptExportError("this model was built from a Python file it cannot name")
        return f"# reproduces {request.label} on {loaded.name}\nprint('hi')\n"

    fake = types.ModuleType("inspector.core.script.export")
    fake.script_for, fake.ScriptExportError = script_for, ScriptExportError
    monkeypatch.setitem(sys.modules, "inspector.core.script.export", fake)

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    window.edit_actions.zero_channel("features.0", 2)
    wait_run(qtbot, window)
    QGuiApplication.clipboard().setText("before")
    window.menus.copy_python.trigger()  # Edit ▸ Copy as Python
    loaded, request = calls[-1]
    assert loaded is window.control.session.loaded
    assert request is window.control.last_request and request.interventions
    assert QGuiApplication.clipboard().text() == (
        f"# reproduces x.png on {loaded.name}\nprint('hi')\n")
    assert "Copied a 3-line Python script" in window.reporter.label.text()

    QGuiApplication.clipboard().setText("before")
    window.images.add_paths([write_png(tmp_path / "refused.png")])
    qtbot.waitUntil(lambda: window.control.last_request.label == "refused.png", timeout=TIMEOUT)
    wait_run(qtbot, window)
    action(window.tree._build_menu("features.0"), "Copy as Python").trigger()  # the tree's menu
    assert "cannot name" in window.reporter.last_message
    assert QGuiApplication.clipboard().text() == "before"


def test_edits_given_at_start_are_checked_against_the_model_and_run(make_window, qtbot,
                                                                     tmp_path):
    """`network-inspector-gui --edit SPEC`: the specs the model has go into the Edits dock and
    reach the first run; one naming a module the model lacks is reported, not added."""

    from inspector.core.edits.interventions import ZeroChannels

    image = write_png(tmp_path / "a.png")
    window = make_window(images=[str(image)], edits=["features.0:zero=1,2", "nosuch:mean"])
    assert [e.intervention for e in window.edits] == [ZeroChannels("features.0", (1, 2))]
    assert "nosuch" in window.reporter.last_message
    # The edited module's row is shown, its badge before the name (never elided away).
    assert window.tree.view.isExpanded(window.tree.model.index_of("features"))
    assert badge(window, "features.0").startswith(EDIT_GLYPH)
    wait_run(qtbot, window)
    assert window.control.last_request.interventions == (ZeroChannels("features.0", (1, 2)),)
    assert window.router.store.edited()
    # The tree's statistics are the edited run's, and their headers say so, in colour and
    # in their tooltips, without growing past their columns ("Zeros ✎" was cut).
    model, header = window.tree.model, window.tree.view.header()
    horizontal = Qt.Orientation.Horizontal
    for column in STATS_COLUMNS:
        brush = model.headerData(column, horizontal, Qt.ItemDataRole.ForegroundRole)
        assert brush is not None and brush.color().name() == EDITED_COLOR
        assert "of the edited run" in model.headerData(column, horizontal,
                                                       Qt.ItemDataRole.ToolTipRole)
        assert header.sectionSizeHint(column) <= header.sectionSize(column) + 1, column
    window.history.undo()  # the last edit (the only one) is gone: an unedited run
    wait_run(qtbot, window)
    assert model.headerData(COL_MEAN, horizontal, Qt.ItemDataRole.ForegroundRole) is None
    assert "edited" not in model.headerData(COL_MEAN, horizontal, Qt.ItemDataRole.ToolTipRole)


def test_copy_as_python_gives_a_script_that_reproduces_the_edited_run(
    make_window, qtbot, tmp_path
):
    """The real script on the clipboard, run on its own, prints the logits the window shows
    for the edited run."""
    import json
    import subprocess

    image = write_png(tmp_path / "x.png")
    window = make_window(images=[image])
    wait_run(qtbot, window)
    window.edit_actions.zero_channel("features.0", 2)
    edited = wait_run(qtbot, window)
    window.menus.copy_python.trigger()
    script = tmp_path / "run.py"
    script.write_text(QGuiApplication.clipboard().text())
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(script), str(image), str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = np.array(json.loads(out.read_text())["logits"]).reshape(-1)
    shown = logits(window, edited.run_id)
    assert np.allclose(result, shown, atol=1e-4), (result, shown)


def test_an_edit_made_in_the_window_is_checked_as_the_cli_checks_it(
    make_window, qtbot, tmp_path
):
    """The window's edits go through the Session's check (core.edits.spec.check_edits): a
    channel the output does not have is refused with a message, and nothing is added."""
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    window.edit_actions.zero_channel("features.0", 99)  # features.0 has 8 channels
    assert len(window.edits) == 0
    assert "out of range" in window.reporter.last_message
    window.edit_actions.zero_channel("features.0", 7)
    assert [e.intervention.channels for e in window.edits] == [(7,)]
