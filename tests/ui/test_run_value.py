"""Each run is a value the window builds from its widgets: the tree's checkboxes change the
tree only, and the next run reads them into a new RunRequest; the Session keeps none of it."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401


def test_two_reruns_with_different_checkboxes_submit_different_values(
    make_window, qtbot, tmp_path
):
    from inspector.core.records.frames import GradientFrame
    from inspector.core.records.kinds import GRAD_INPUT
    from inspector.ui.module_tree.cells import COLUMN_OF_KIND

    window = make_window(images=[write_png(tmp_path / "x.png")])
    first = wait_run(qtbot, window)
    before = window.control.last_request
    model = window.tree.model
    check = model.index_of("features.3", COLUMN_OF_KIND[GRAD_INPUT])
    model.setData(check, Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    # The checkbox changed the tree, nothing else: no run was submitted yet.
    assert window.control.last_request is before
    window.runs.rerun()
    second = wait_run(qtbot, window)
    after = window.control.last_request
    assert second.run_id > first.run_id
    assert after != before and before.with_(capture=after.capture) == after
    assert GRAD_INPUT not in before.capture.kinds_for("features.3")
    assert GRAD_INPUT in after.capture.kinds_for("features.3")
    # The values are frozen: the earlier one still says what its run captured.
    assert before.capture.kinds_for("features.3") == model.default_kinds("features.3")
    gradient = window.views["gradient"]
    gradient.set_module("features.3")
    gradient.set_kind(GRAD_INPUT)
    qtbot.waitUntil(lambda: isinstance(gradient.current_frame(), GradientFrame)
                    and gradient.current_frame().run_id == second.run_id, timeout=TIMEOUT)
    # The session holds no capture state between runs.
    session = window.control.session
    assert not hasattr(session, "set_capture") and not hasattr(session, "capture")
    assert not [name for name in vars(session) if "capture" in name]


def test_the_cam_layer_comes_from_model_loaded_not_from_the_ui_thread(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.core.run.session import Session

    def not_on_the_ui_thread(self):
        raise AssertionError("the window asked the session to walk the model")

    monkeypatch.setattr(Session, "default_cam_layer", not_on_the_ui_thread, raising=True)
    window = make_window()
    cam = window.views["cam"]
    assert window.runs.default_cam_layer is not None
    assert cam.layer == window.runs.default_cam_layer


def test_the_views_read_the_routers_run_store(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    run = wait_run(qtbot, window)
    store = window.router.store
    assert all(view.store is store for view in window.views.values())
    order = store.forward_order(run.run_id)
    assert order[""] == 0 and "features.0" in order
    points, _ = window.views["gradient"].flow_points()
    names = [p.name for p in points]
    assert names and names == sorted(names, key=lambda n: order.get(n, order.get("", 0)))
