"""Esc cancels a model load that never returns; the model shown stays and runs again."""

from __future__ import annotations

from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401


def test_esc_cancels_a_load_that_never_returns_and_the_model_stays(
    make_window, qtbot, tmp_path
):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    first = wait_run(qtbot, window)
    endless = tmp_path / "endless.py"
    endless.write_text("def build():\n    while True:\n        pass\n")
    window.control.load_model(window.control.make_spec(name=None, factory=f"{endless}:build"))
    assert window.control.loading
    assert "Esc cancels" in window.reporter.label.text()
    cancel = next(a for a in window.findChildren(type(window.backward_action))
                  if a.shortcut().toString() == "Esc")
    cancel.trigger()
    qtbot.waitUntil(lambda: not window.control.loading, timeout=TIMEOUT)
    message = window.reporter.label.text()
    assert message.startswith("Loading endless.py") and "was cancelled" in message, message
    assert "build_model stays loaded" in message
    assert window.model_name == "build_model" and not window.status.busy.isVisible()
    window.runs.rerun()  # the engine took the next run
    assert wait_run(qtbot, window).run_id > first.run_id
