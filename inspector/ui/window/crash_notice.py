"""The notice at start that the app crashed last time: where the crash log is, and a button
that copies the details for a bug report. Not modal: the app is usable at once."""

from __future__ import annotations

import html
import platform
import sys

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from inspector.crashlog import CrashReport


def crash_details(report: CrashReport) -> str:
    """What goes into a bug report: the log's place, the platform, and the log itself."""
    return (
        f"Network Inspector crashed (process {report.pid}).\n"
        f"Crash log: {report.path}\n"
        f"Python {sys.version.split()[0]} on {platform.platform()}\n\n"
        f"{report.text}"
    )


class CrashNotice(QDialog):
    def __init__(self, report: CrashReport, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = report
        self.setModal(False)
        self.setWindowTitle("Network Inspector crashed last time")
        self.resize(640, 360)
        self.message = QLabel(
            "<b>The last time it ran, Network Inspector crashed</b> "
            f"({html.escape(report.summary())}).<br>The crash log is "
            f"<code>{html.escape(str(report.path))}</code>. Please attach the details to a "
            "bug report."
        )
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log = QPlainTextEdit(report.text)
        self.log.setReadOnly(True)
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = self.buttons.addButton(
            "Copy details", QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy_details)
        self.buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.message)
        layout.addWidget(self.log, 1)
        layout.addWidget(self.buttons)

    def copy_details(self) -> None:
        QGuiApplication.clipboard().setText(crash_details(self.report))
