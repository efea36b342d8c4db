"""After a crash, the next start of the window says so: a notice that does not block the
window, with the crash log's path and a button that copies the details."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from inspector import crashlog
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.crash_notice import CrashNotice
from inspector.ui.window.main_window import MainWindow

CRASH = (
    "import faulthandler\n"
    "from inspector import crashlog\n"
    "crashlog.start('gui')\n"
    "faulthandler._sigsegv()\n"
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_window_says_that_the_last_run_crashed(qtbot, tmp_path, monkeypatch):
    state = tmp_path / "state"
    env = {**os.environ, crashlog.STATE_DIR_ENV: str(state)}
    child = subprocess.run([sys.executable, "-c", CRASH], env=env, capture_output=True,
                           timeout=60)
    assert child.returncode == -signal.SIGSEGV
    monkeypatch.setenv(crashlog.STATE_DIR_ENV, str(state))

    reports = crashlog.previous_crashes("gui")  # what inspector.app.main does at start
    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.show()
    window.show_crash_notice(reports)

    notice = window.findChild(CrashNotice)
    assert notice is not None and notice.isVisible()
    assert not notice.isModal()
    assert window.isEnabled()
    path = str(reports[0].path)
    assert path in notice.message.text()
    assert path in window.reporter.label.text()
    assert "Segmentation fault" in notice.log.toPlainText()

    QGuiApplication.clipboard().clear()
    qtbot.mouseClick(notice.copy_button, Qt.MouseButton.LeftButton)
    copied = QGuiApplication.clipboard().text()
    assert path in copied and "Segmentation fault" in copied
    assert f"process {reports[0].pid}" in copied

    notice.close()
    window.show_crash_notice(crashlog.previous_crashes("gui"))  # reported once: no notice now
    qtbot.waitUntil(lambda: window.findChild(CrashNotice) is None)
