"""Runs that fail, and runs that take long, in the window with the real engine: a failure
is a message naming the module, the views stop showing the earlier image's results, the
busy state ends and the next run works; a long run shows its progress in the status bar."""

from __future__ import annotations

import re

from PIL import Image
from PySide6.QtCore import Qt
from test_main_window import HERE, TIMEOUT, wait_run, write_png  # noqa: F401

from inspector.core.records.frames import ProgressFrame
from inspector.core.records.kinds import OUTPUT
from inspector.ui.module_tree.cells import COL_MEAN, compact
from inspector.ui.run.progress import format_time_left, progress_text, time_left
from inspector.ui.window import errors as error_messages

PICKY = {"name": None, "factory": f"{HERE / 'tiny_models.py'}:build_picky_model"}
GATED = {"name": None, "factory": f"{HERE / 'tiny_models.py'}:build_gated_model"}


def white_png(path):
    Image.new("RGB", (80, 80), (255, 255, 255)).save(path)
    return path


def run_after(qtbot, window, action, status="ok"):
    """Do `action` (open or step to an image) and wait for the run it starts to finish."""
    before = window.control.current_run
    action()
    qtbot.waitUntil(lambda: window.control.current_run != before, timeout=TIMEOUT)
    return wait_run(qtbot, window, status=status)


def add_white(window, tmp_path):
    return lambda: window.images.add_paths([white_png(tmp_path / "white.png")])


def test_a_run_failing_inside_an_aten_op_is_a_message_and_the_app_keeps_working(
    make_window, qtbot, tmp_path, monkeypatch
):
    # No hold time: the red message goes as soon as a later run succeeds (errors.resolved).
    monkeypatch.setattr(error_messages, "ERROR_HOLD_S", 0.0)
    window = make_window(model=PICKY, images=[write_png(tmp_path / "dark.png")])
    good = wait_run(qtbot, window)
    assert window.views["predictions"].frame.run_id == good.run_id
    errors = window.reporter.count

    failed = run_after(qtbot, window, add_white(window, tmp_path), "error")
    assert window.reporter.count > errors
    assert window.reporter.showing_error()
    message, details = window.reporter.last_message, window.reporter.last_details
    assert "'pick'" in message and "RuntimeError" in message, message
    assert "out of" in message, message  # ATen's words: index out of bounds
    assert "index_select" in details  # the traceback ends in the op
    assert not window.control.running
    assert window.status.run.text().startswith("failed run")
    assert not window.status.busy.isVisibleTo(window)
    assert window.model_name == "build_picky_model"  # the model and the images stay
    assert window.images.list.count() == 2

    # No view shows the dark image's results as this image's.
    predictions = window.views["predictions"]
    assert predictions.frame is None and "failed" in predictions.empty.text()
    cam = window.views["cam"]
    assert cam.choice()[0] is None and "failed" in cam.header.text()
    gradient = window.views["gradient"]
    assert gradient.current_frame() is None and gradient.flow_points()[0] == []
    assert "failed" in gradient.panel.message.text()
    # The first layer ran before the failure: what it shows is the white image's.
    activation = window.views["activation"]
    assert activation.current_frame().run_id == failed.run_id

    # The dark image again: the next run works.
    again = run_after(qtbot, window, lambda: window.images.step(-1))
    assert predictions.frame.run_id == again.run_id
    assert cam.choice()[0].run_id == again.run_id
    assert gradient.current_frame().run_id == again.run_id
    assert not window.reporter.showing_error()  # the failure is not what is going on now
    assert window.reporter.details_button.text() == "Last error…"


def test_a_run_failing_at_its_first_module_clears_every_view(
    make_window, qtbot, tmp_path
):
    """tiny_models.Boom raises before any layer runs: every view held the dark image's
    results, and each must now say that the run failed instead."""
    window = make_window(images=[write_png(tmp_path / "dark.png")])
    wait_run(qtbot, window)
    run_after(qtbot, window, add_white(window, tmp_path), "error")
    views = window.views
    assert views["predictions"].frame is None
    assert views["cam"].choice()[0] is None
    assert views["activation"].current_frame() is None
    assert "failed" in views["activation"].panel.message.text()
    assert views["gradient"].current_frame() is None
    for key in ("predictions", "cam", "activation", "gradient", "input_stats"):
        assert views[key].failed, key

    run = run_after(qtbot, window, lambda: window.images.step(-1))
    for key in ("predictions", "cam", "activation", "gradient", "input_stats"):
        assert not views[key].failed, key
    assert views["activation"].current_frame().run_id == run.run_id


def test_time_left_at_the_pace_so_far():
    frame = ProgressFrame(run_id=1, step="Score-CAM", done=10, total=30, elapsed=2.0)
    assert time_left(frame, since_frame=0.0) == 4.0
    assert time_left(frame, since_frame=1.5) == 2.5
    assert time_left(frame, since_frame=10.0) == 0.0
    assert time_left(ProgressFrame(1, "Score-CAM", 0, 30, 0.5), 0.0) is None
    assert format_time_left(4.0) == "about 4 s left"
    assert format_time_left(0.2) == "less than a second left"
    assert format_time_left(600.0) == "about 10 min left"
    assert progress_text(frame, 0.0) == "Score-CAM 10/30, about 4 s left"


def test_a_long_run_shows_its_progress_in_the_status_bar(make_window, qtbot, tmp_path):
    """Score-CAM on a 48-channel layer runs its masked inputs in two batches; the model's
    gate holds the second until the test has seen the status bar (so the run is longer than
    a second, whatever the machine's speed)."""
    window = make_window(model=GATED, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    assert window.run_progress.text is None  # short runs say only "last run … ms"
    gate = window.control.loaded.model.gate
    cam = window.views["cam"]
    gate.close(after=1)
    try:
        cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("scorecam"))
        qtbot.waitUntil(gate.held.is_set, timeout=TIMEOUT)
        qtbot.waitUntil(lambda: "Score-CAM" in window.status.run.text(), timeout=TIMEOUT)
        text = window.status.run.text()
        assert re.fullmatch(r"running x\.png: Score-CAM 32/48, "
                            r"(about \d+ (s|min)|less than a second|estimating the time) left",
                            text), text
        assert window.status.busy.isVisibleTo(window)
        assert (window.status.busy.value(), window.status.busy.maximum()) == (32, 48)
    finally:
        gate.open()
    run = wait_run(qtbot, window)
    shown = cam.choice()[0]  # the map shown over the image
    assert shown.run_id == run.run_id and shown.method == "scorecam"
    assert window.status.run.text().startswith("last run")
    assert not window.status.busy.isVisibleTo(window)
    assert window.run_progress.text is None


def test_a_progress_bar_does_not_outlive_the_run_it_belonged_to(qtbot):
    from PySide6.QtWidgets import QStatusBar

    from inspector.ui.run.progress import RunProgress
    from inspector.ui.shell.status_panel import StatusPanel

    bar = QStatusBar()
    qtbot.addWidget(bar)
    bar.show()
    status = StatusPanel(bar)
    now = [0.0]
    progress = RunProgress(status, clock=lambda: now[0])
    try:
        progress.begin(1)
        now[0] = 5.0  # a long run: its bar shows
        progress.update(ProgressFrame(1, "Score-CAM", 96, 512, 5.0))
        assert status.busy.isVisible() and status.busy.value() == 96
        progress.begin(2)  # another image before it finished; the new run is quick
        progress.end(2)
        assert not status.busy.isVisible()
    finally:
        progress.stop()


def cancel_in_score_cam(qtbot, window, start, forwards_before: int) -> None:
    """`start()` runs Score-CAM; the gate holds the masked forwards after `forwards_before`
    batches (48 channels: two batches a pass) and Esc cancels the run there."""
    gate = window.control.loaded.model.gate
    gate.close(after=forwards_before)
    try:
        start()
        qtbot.waitUntil(gate.held.is_set, timeout=TIMEOUT)
        window.runs.cancel()  # Run ▸ Cancel run (Esc)
    finally:
        gate.open()
    wait_run(qtbot, window, status="cancelled")  # its RunFinished reached the views


def test_after_cancelling_score_cam_with_edits_the_panes_show_the_last_complete_run(
    make_window, qtbot, tmp_path
):
    """Issue 22: Esc while the before or after pass of Score-CAM ran left the unedited run's
    probability without a label (no Before/After table) and an empty CAM pane."""
    window = make_window(model=GATED, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    predictions, cam = window.views["predictions"], window.views["cam"]
    store = window.router.store

    # Edits on, Grad-CAM: a complete edited run compared with its unedited run.
    window.edit_actions.add_occlusion((2, 2, 10, 10))
    wait_run(qtbot, window)
    window.edit_actions.add_occlusion((12, 12, 20, 20))
    edited = wait_run(qtbot, window).run_id
    before = store.reference_run
    assert before is not None and predictions.table.columnCount() == 5

    # Score-CAM: a new unedited run and a new edited run; Esc in the after pass.
    cancel_in_score_cam(qtbot, window, lambda: cam.controls.method_combo.setCurrentIndex(
        cam.controls.method_combo.findData("scorecam")), forwards_before=2)
    assert store.current_run > edited and store.status(store.current_run) == "cancelled"
    assert predictions.frame.run_id == edited
    assert predictions.reference.run_id == before  # the same before/after as it had
    assert predictions.table.columnCount() == 5
    header = predictions.header.text()
    assert f"run {edited} (x.png)</b>, the last complete run: run {store.current_run} " \
           "was cancelled" in header, header
    assert f"before</b>: run {before} (x.png, unedited)" in header, header
    assert cam.choice()[0].run_id == edited and cam.stack.currentWidget() is cam.view
    assert f"run {edited}</b> (run {store.current_run} was cancelled)" in cam.header.text()
    assert "Score-CAM at features not computed</i>" in cam.header.text()  # not "yet"
    # The module tree's statistics are the edited run's too, and its headers say so (its
    # rows kept the cancelled run's numbers, unlabelled).
    model = window.tree.model
    qtbot.waitUntil(lambda: "was cancelled" in (model.headerData(
        COL_MEAN, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) or ""),
        timeout=TIMEOUT)
    tip = model.headerData(COL_MEAN, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    assert f"of run {edited}, the last complete run (run {store.current_run} was cancelled)" in tip
    assert model.headerData(COL_MEAN, Qt.Orientation.Horizontal,
                            Qt.ItemDataRole.FontRole).italic()
    for name in ("features.0", "head"):
        shown = store.latest_tensor(name, OUTPUT)
        assert shown.run_id == edited
        cell = model.data(model.index_of(name, COL_MEAN), Qt.ItemDataRole.DisplayRole)
        assert cell == compact(shown.stats.mean), (name, cell)
    window.grab().save(str(tmp_path / "after-pass.png"))


def test_cancelling_the_first_edited_score_cam_run_shows_the_unedited_run_as_such(
    make_window, qtbot, tmp_path
):
    """Score-CAM on, then two occlusions, Esc in the before pass: the last complete run is
    the one without edits, and the panes say so (the CAM pane used to say "Drop an image")."""
    window = make_window(model=GATED, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    predictions, cam = window.views["predictions"], window.views["cam"]
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("scorecam"))
    plain = wait_run(qtbot, window).run_id

    def occlude_twice():
        window.edit_actions.add_occlusion((2, 2, 10, 10))
        window.edit_actions.add_occlusion((12, 12, 20, 20))

    cancel_in_score_cam(qtbot, window, occlude_twice, forwards_before=0)
    store = window.router.store
    assert predictions.frame.run_id == plain and predictions.reference is None
    assert f"run {plain} (x.png), without edits</b>, the last complete run" in \
        predictions.header.text()
    shown = cam.choice()[0]
    assert shown.run_id == plain and shown.method == "scorecam"
    assert cam.stack.currentWidget() is cam.view
    assert "was cancelled" in cam.header.text() and store.cancelled


def test_the_before_and_after_passes_are_named_with_one_estimate_for_both(qtbot):
    """Issue 22: with edits on, Score-CAM's progress ran to 512 for the unedited run, then
    started again from 0 for the edited run, without a word."""
    from PySide6.QtWidgets import QStatusBar

    from inspector.ui.run.progress import RunProgress, progress_bar
    from inspector.ui.shell.status_panel import StatusPanel

    before = ProgressFrame(1, "Score-CAM", 96, 512, 4.8)  # 0.05 s a forward
    assert progress_text(before, 0.0, "before") == "Score-CAM before 96/512, about 46 s left in all"
    assert progress_bar(before, "before") == (96, 1024)
    after = ProgressFrame(2, "Score-CAM", 32, 512, 1.6)
    assert progress_text(after, 0.0, "after") == "Score-CAM after 32/512, about 24 s left in all"
    # Going on at the pace of both passes: a slow start of the after pass (0.1 s a forward
    # for its first 8) does not make the estimate jump (it said 48 s from 8 forwards alone).
    done_before = ProgressFrame(1, "Score-CAM", 512, 512, 25.6)
    slow_start = ProgressFrame(2, "Score-CAM", 8, 512, 0.8)
    assert progress_text(slow_start, 0.0, "after") == \
        "Score-CAM after 8/512, about 50 s left in all"
    assert progress_text(slow_start, 0.0, "after", done_before) == \
        "Score-CAM after 8/512, about 26 s left in all"
    assert progress_bar(after, "after") == (544, 1024)

    bar = QStatusBar()
    qtbot.addWidget(bar)
    bar.show()
    status = StatusPanel(bar)
    now = [0.0]
    progress = RunProgress(status, clock=lambda: now[0])
    try:
        progress.begin(2, before_run=1)  # the edited run 2, after the unedited run 1
        progress.started(1, "x.png")
        now[0] = 5.0
        progress.update(before)
        assert status.run.text() == "running x.png: Score-CAM before 96/512, about 46 s left in all"
        progress.update(after)
        assert status.run.text() == "running x.png: Score-CAM after 32/512, about 24 s left in all"
        assert (status.busy.value(), status.busy.maximum()) == (544, 1024)
    finally:
        progress.stop()


def test_the_window_names_the_pass_of_score_cam_while_edits_are_on(
    make_window, qtbot, tmp_path
):
    window = make_window(model=GATED, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    window.edit_actions.add_occlusion((2, 2, 10, 10))
    wait_run(qtbot, window)
    gate = window.control.loaded.model.gate
    cam = window.views["cam"]
    left = r"(about \d+ (s|min)|less than a second|estimating the time) left in all"
    # Held in each pass in turn: two batches of 32 and 16 forwards a pass.
    for held_after, method, text, bar in ((1, "scorecam", "before 32/48", (32, 96)),
                                          (3, "scorecam", "after 32/48", (80, 96))):
        if cam.method == method:  # a new unedited run each time: the CAMs are in its key
            cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("gradcam"))
            wait_run(qtbot, window)
        gate.close(after=held_after)
        try:
            cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData(method))
            qtbot.waitUntil(gate.held.is_set, timeout=TIMEOUT)
            qtbot.waitUntil(lambda: "Score-CAM" in window.status.run.text(), timeout=TIMEOUT)
            shown = window.status.run.text()
            assert re.fullmatch(rf"running x\.png: Score-CAM {text}, {left}", shown), shown
            assert (window.status.busy.value(), window.status.busy.maximum()) == bar
            window.grab().save(str(tmp_path / f"{text.split()[0]}-pass.png"))
        finally:
            gate.open()
        wait_run(qtbot, window)
