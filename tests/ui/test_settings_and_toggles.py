"""Settings and toggles never break the app: every combination of the window's checkable
actions still runs, a corrupt settings file falls back to defaults with a note, and the
settings can be reset from the command line and from the Help menu."""

from __future__ import annotations

import itertools
import re

import pytest
from PySide6.QtCore import QByteArray, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox, QToolBar
from test_main_window import TIMEOUT, TINY, wait_run, write_png  # noqa: F401

from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow

FULL_PRODUCT_UP_TO = 4  # toggles; above that, pairwise combinations


def checkable_actions(window: MainWindow) -> list[QAction]:
    """Every on/off toggle in the window's menus (and submenus) and toolbars. Actions in an
    exclusive group (the Device menu) are a choice of one, not toggles: left out."""
    found: list[QAction] = []

    def walk(actions) -> None:
        for action in actions:
            menu = action.menu()
            if isinstance(menu, QMenu):
                walk(menu.actions())
            elif action.isCheckable() and not (action.actionGroup() is not None
                                               and action.actionGroup().isExclusive()):
                if action not in found:
                    found.append(action)

    walk(window.menuBar().actions())
    for bar in window.findChildren(QToolBar):
        walk(bar.actions())
    return found


def pairwise_rows(n: int) -> list[tuple[bool, ...]]:
    """All on, all off, then rows chosen greedily until every value pair of every two
    toggles appears in some row."""
    rows = [(True,) * n, (False,) * n]
    uncovered = {(i, a, j, b) for i, j in itertools.combinations(range(n), 2)
                 for a in (False, True) for b in (False, True)}
    uncovered -= {p for row in rows for p in covered_pairs(row)}
    while uncovered:
        i, a, j, b = min(uncovered)
        row: dict[int, bool] = {i: a, j: b}
        for k in range(n):
            if k not in row:
                row[k] = max((True, False), key=lambda v, k=k, row=row: sum(
                    pair(k, v, m, w) in uncovered for m, w in row.items()))
        full = tuple(row[k] for k in range(n))
        rows.append(full)
        uncovered -= set(covered_pairs(full))
    return rows


def pair(i: int, a: bool, j: int, b: bool) -> tuple[int, bool, int, bool]:
    return (i, a, j, b) if i < j else (j, b, i, a)


def covered_pairs(row: tuple[bool, ...]):
    for i, j in itertools.combinations(range(len(row)), 2):
        yield (i, row[i], j, row[j])


def combinations_to_try(n: int) -> list[tuple[bool, ...]]:
    if n <= FULL_PRODUCT_UP_TO:
        return list(itertools.product((False, True), repeat=n))
    return pairwise_rows(n)


def test_without_gradients_the_capture_keeps_the_forward_kinds():
    from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT
    from inspector.core.run.capture_spec import CaptureSpec

    kinds = {"a": frozenset({OUTPUT, GRAD_OUTPUT}), "b": frozenset({GRAD_INPUT}),
             "c": frozenset({INPUT})}
    assert CaptureSpec(modules=kinds).without_gradients().modules == {
        "a": frozenset({OUTPUT}), "c": frozenset({INPUT})}


def test_the_pairwise_rows_cover_every_pair():
    for n in range(2, 12):
        rows = pairwise_rows(n)
        assert rows[0] == (True,) * n and rows[1] == (False,) * n
        covered = {p for row in rows for p in covered_pairs(row)}
        assert len(covered) == 4 * n * (n - 1) // 2, n
        assert len(rows) <= 2 + 4 * n  # far fewer than 2**n


def test_every_combination_of_the_toggles_still_runs(make_window, qtbot, tmp_path):
    """Every checkable action of the menus and toolbars, found at run time (so a toggle added
    later is covered too). With up to FULL_PRODUCT_UP_TO toggles every combination (2^n) is
    tried; with more, all on, all off, and rows that together hold every on/off pair of every
    two toggles (pairwise). Today's window has "Compute gradients" and one toggle per dock:
    pairwise. After each combination, "Run again" must finish a run whose predictions reach
    the view, with a CAM when gradients are computed and a note that there is none when not."""
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    toggles = checkable_actions(window)
    names = [a.text().replace("&", "") for a in toggles]
    assert "Compute gradients" in names and "Predictions" in names
    rows = combinations_to_try(len(toggles))
    for row in rows:
        for action, on in zip(toggles, row, strict=True):
            if action.isChecked() != on:
                action.trigger()  # as a click would: toggles and emits triggered
            assert action.isChecked() == on
        window.menus.rerun.trigger()
        run = wait_run(qtbot, window)
        states = dict(zip(names, row, strict=True))
        predictions = window.views["predictions"].frame
        assert predictions is not None and predictions.run_id == run.run_id, states
        cam = window.views["cam"]
        if states["Compute gradients"]:
            assert cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id, states
            assert predictions.target is not None
        else:
            assert cam.choice()[0] is None, states
            if cam.isVisible():  # a hidden view paints when shown
                assert "computed no CAM" in cam.header.text(), states
            assert predictions.target is None
    assert window.reporter.count == 0, window.reporter.last_message


def test_gradients_off_is_remembered_and_the_next_start_still_runs(
    make_window, qtbot, tmp_path
):
    png = write_png(tmp_path / "x.png")
    window = make_window(images=[png])
    wait_run(qtbot, window)
    window.backward_action.trigger()
    assert not window.backward_action.isChecked()
    run = wait_run(qtbot, window)
    assert window.views["predictions"].frame.run_id == run.run_id
    window.close()

    again = make_window(images=[png])  # the same settings file: gradients stay off
    assert not again.backward_action.isChecked()
    run = wait_run(qtbot, again)
    assert again.views["predictions"].frame.run_id == run.run_id
    assert again.views["gradient"].current_frame() is None


CORRUPT_INI = r"""[last]
backward=maybe
cam_method=no-such-method
device=cuda:7, cpu
model_dialog\tab=99
tree_header=not a header
image_dir=/tmp
module\build_model=features.3

[window]
geometry=garbage
state=1234

[recent]
models=not json, {\"name\": \"resnet18\"}
"""


def test_a_corrupt_settings_file_falls_back_to_defaults_with_a_note(tmp_path):
    path = tmp_path / "settings.ini"
    path.write_text(CORRUPT_INI)
    settings = AppSettings.in_file(str(path))
    notes: list[str] = []
    settings.on_problem = notes.append

    assert settings.value("backward", True) is True
    assert settings.value("cam_method", "gradcam", choices=["gradcam", "scorecam"]) == "gradcam"
    assert settings.value("device", "") == ""  # a comma made it a list
    assert settings.value("model_dialog/tab", 0, minimum=0, maximum=5) == 0  # 99: no such tab
    assert settings.value("tree_header", QByteArray()).isEmpty()
    assert settings.value("image_dir", "") == "/tmp"  # valid values still count
    assert settings.value("module/build_model", "") == "features.3"
    assert settings.recent_models() == [{"name": "resnet18"}]
    assert len(notes) == 6 and notes == settings.problems
    for key in ("backward", "cam_method", "device", "model_dialog/tab", "tree_header"):
        assert any(f"“{key}”" in note for note in notes), key
    assert "'maybe'" in notes[0]

    # What was ignored is dropped from the file: the next start reads defaults without a note.
    settings.sync()
    again = AppSettings.in_file(str(path))
    assert again.value("backward", False) is False
    assert again.value("model_dialog/tab", 2) == 2
    assert again.problems == []


@pytest.mark.parametrize("stored, default, expected, noted", [
    ("12", 3, 12, False),
    ("1e9", 3, 3, True),
    ("-4", 3, 3, True),  # below the minimum
    ("5000", 3, 3, True),  # above the maximum
    ("nan", 0.5, 0.5, True),
    ("0.25", 0.5, 0.25, False),
    ("off", True, False, False),
    ("2", True, True, True),
])
def test_numbers_and_switches_are_checked(tmp_path, stored, default, expected, noted):
    path = tmp_path / "s.ini"
    path.write_text(f"[last]\nx={stored}\n")
    settings = AppSettings.in_file(str(path))
    limits = {"minimum": 0, "maximum": 100} if isinstance(default, int) else {}
    value = settings.value("x", default, **limits)
    assert value == expected and type(value) is type(expected)
    assert bool(settings.problems) == noted


def test_the_window_starts_on_a_corrupt_settings_file_and_runs(qtbot, tmp_path):
    from inspector.core.run.session import Session

    path = tmp_path / "settings.ini"
    path.write_text(CORRUPT_INI)
    window = MainWindow(AppSettings.in_file(str(path)))
    qtbot.addWidget(window)
    window.build_views()
    window.show()
    assert window.backward_action.isChecked()
    assert window.views["cam"].method == "gradcam"
    qtbot.waitUntil(lambda: window.reporter.count > 0, timeout=TIMEOUT)
    assert re.search(r"Ignored \d+ saved settings", window.reporter.last_message)
    assert window.reporter.count == 1  # one report for all of them, not one per value
    assert "backward" in window.reporter.last_details
    assert "cam_method" in window.reporter.last_details
    assert str(path) in window.reporter.last_details
    window.start([write_png(tmp_path / "x.png")], dict(TINY), session=Session())
    qtbot.waitUntil(lambda: window.model_name != "", timeout=TIMEOUT)
    run = wait_run(qtbot, window)
    assert window.views["cam"].choice()[0].run_id == run.run_id


def test_reset_settings_on_the_command_line(tmp_path, monkeypatch, qtbot):
    from inspector.app import SETTINGS_ENV, open_settings, parse_args

    path = tmp_path / "settings.ini"
    monkeypatch.setenv(SETTINGS_ENV, str(path))
    stored = AppSettings.in_file(str(path))
    stored.set_value("backward", False)
    stored.add_recent_images(["/img/a.png"])
    stored.sync()

    kept = open_settings(parse_args(["a.png"]))
    assert kept.value("backward", True) is False and kept.recent_images() == ["/img/a.png"]
    args = parse_args(["--reset-settings", "a.png"])
    assert args.reset_settings and args.images == ["a.png"]
    fresh = open_settings(args)
    assert fresh.value("backward", True) is True and fresh.recent_images() == []
    assert AppSettings.in_file(str(path)).qs.allKeys() == []  # gone from the file too


def answer_next_question(button: QMessageBox.StandardButton, seen: list[str]) -> None:
    """Click `button` of the message box that is about to open (as a user would)."""

    def click() -> None:
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox), box
        seen.append(box.text())
        box.button(button).click()

    QTimer.singleShot(0, click)


def test_help_reset_settings_asks_then_resets(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    reset = next(a for a in help_menu.actions() if a.text().startswith("Reset settings"))
    window.backward_action.trigger()  # off, and saved
    cam = window.views["cam"]
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("eigencam"))
    window.docks["cam"].close()
    wait_run(qtbot, window)
    assert window.settings.value("backward", True) is False
    assert window.settings.value("cam_method", "") == "eigencam"
    assert window.settings.recent_images()

    seen: list[str] = []
    answer_next_question(QMessageBox.StandardButton.Cancel, seen)
    reset.trigger()
    assert seen and "Forget" in seen[0]
    assert window.settings.value("backward", True) is False  # nothing changed
    assert not window.backward_action.isChecked()

    answer_next_question(QMessageBox.StandardButton.Reset, seen)
    reset.trigger()
    assert len(seen) == 2
    assert window.settings.qs.allKeys() == []
    assert window.backward_action.isChecked() and window.control.last_request.gradients
    assert cam.method == "gradcam" and window.control.last_request.cams[0][0] == "gradcam"
    assert not window.docks["cam"].isHidden()  # the default layout is back
    assert window.reporter.label.text() == "Settings reset to their defaults"
    assert window.reporter.count == 0
    run = wait_run(qtbot, window)  # the defaults run: with gradients, a Grad-CAM
    assert cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id
    assert cam.choice()[0].method == "gradcam"


def test_with_gradients_off_a_clicked_class_is_explained(make_window, qtbot, tmp_path):
    """Issue 22: "Click a class to explain it" ran again without a CAM while Compute
    gradients was off. The click's run computes the CAM of that class (a backward to the CAM
    layer only); the gradient views stay off, as the toggle says."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    window.backward_action.trigger()
    wait_run(qtbot, window)
    predictions, cam = window.views["predictions"], window.views["cam"]
    assert predictions.target is None and cam.choice()[0] is None
    assert "Click a class to explain it" in predictions.header.text()

    row = 1  # not the top class: the map must be of the class clicked
    chosen = predictions.rows[row]
    table = predictions.table
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualRect(table.model().index(row, 1)).center())
    run = wait_run(qtbot, window)
    assert not window.control.last_request.gradients
    assert predictions.frame.run_id == run.run_id and predictions.target == chosen
    assert cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id
    shown = cam.choice()[0]  # the map shown over the image
    assert shown.target == chosen and shown.method == "gradcam"
    store = window.router.store  # no gradient frames in that run: the toggle is off
    assert not any(store.tensors(m, ("grad_output", "grad_input"), run.run_id)
                   for m in store.forward_order(run.run_id))
    window.grab().save(str(tmp_path / "clicked.png"))
