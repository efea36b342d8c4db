"""Clear all edits: in the Edits dock and the Edit menu, one step of the undo stack (one
Ctrl+Z brings every edit back, in its row, switched on or off as it was)."""

from __future__ import annotations

from test_main_window import wait_run, write_png  # noqa: F401


def test_clear_all_edits_is_one_undo_step_from_the_dock_and_the_edit_menu(
    make_window, qtbot, tmp_path
):
    from inspector.core.edits.interventions import Occlude, ReplaceWithMean, ZeroChannels

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    dock = window.docks["edits"].widget()
    edit_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Edit")
    (in_menu,) = [a for a in edit_menu.actions() if a.text() == "Clear all edits"]
    assert in_menu is dock.clear_action and not in_menu.isEnabled()
    assert not dock.clear_button.isVisibleTo(dock)  # no edits: only the hint

    actions = window.edit_actions
    actions.zero_channel("features.0", 1)
    actions.add_occlusion((10, 5, 31, 21))
    actions.replace_with_mean("features.3")
    window.history.set_enabled(window.edits[1], False)
    made = [(e.intervention, e.enabled) for e in window.edits]
    assert made == [(ZeroChannels("features.0", (1,)), True),
                    (Occlude("", box=(10, 5, 31, 21)), False),
                    (ReplaceWithMean("features.3"), True)]
    wait_run(qtbot, window)
    assert in_menu.isEnabled() and dock.clear_button.isVisibleTo(dock)
    changes = []
    window.edits.changed.connect(lambda: changes.append(len(window.edits)))

    dock.clear_button.click()
    assert len(window.edits) == 0 and changes == [0]  # one change: one rerun, not three
    assert dock.rows() == [] and dock.hint.isVisibleTo(dock) and not in_menu.isEnabled()
    wait_run(qtbot, window)
    assert window.control.last_request.interventions == ()
    assert window.history.undoText() == "clear all 3 edits"

    window.menus.undo.trigger()  # Edit ▸ Undo: all three back, as they were
    assert [(e.intervention, e.enabled) for e in window.edits] == made and changes == [0, 3]
    assert [r.check.isChecked() for r in dock.rows()] == [True, False, True]
    wait_run(qtbot, window)
    assert window.control.last_request.interventions == (made[0][0], made[2][0])

    in_menu.trigger()  # Edit ▸ Clear all edits does the same
    assert len(window.edits) == 0
    window.history.undo()
    window.history.redo()
    assert len(window.edits) == 0
    window.history.undo()
    assert [(e.intervention, e.enabled) for e in window.edits] == made
    wait_run(qtbot, window)
