"""While the engine starts and a model loads, the status bar and the note over the empty
module tree say what is happening: importing, then building, loading weights, probing."""

from __future__ import annotations

from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow


def test_the_window_says_what_a_load_is_doing(qtbot, tmp_path, monkeypatch):
    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.show()
    monkeypatch.setattr(window.control, "start", lambda session=None: None)  # no engine
    window.model_loads.start(None)
    for text in (window.overlay.text(), window.reporter.label.text()):
        assert "Importing PyTorch" in text, text
    window.control.modelLoading.emit("vit_b_16")
    for text in (window.overlay.text(), window.reporter.label.text()):
        assert "vit_b_16" in text and "building the model" in text, text
        assert "loading its weights" in text and "Esc cancels" in text, text
    assert window.overlay.isVisible() and window.status.busy.isVisible()
    window.shutdown()
