"""Failures as messages in the window: one line in the status bar, the full text on demand.

Nothing a user does (a bad image, a model that will not load, a hook that raises, CUDA out
of memory) may close the app or lose their work. Every failure goes through `ErrorReporter`:
the status bar shows the one-line message in red with a "Details…" button, and the button
opens a dialog with the full text (a traceback, the list of mismatched checkpoint keys) that
can be copied into a bug report.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QFontMetrics,
    QGuiApplication,
    QPainter,
    QPalette,
)
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QStatusBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

ERROR_COLOR = "#c62828"
ERROR_STYLE = f"color: {ERROR_COLOR}; font-weight: 600;"
ERROR_HOLD_S = 12.0  # a failure stays in the status bar at least this long
INFO_STYLE = ""


class DetailsDialog(QDialog):
    """The full text of the last failure, selectable and copyable. Not modal: the user can
    keep working while it is open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("What went wrong")
        self.resize(680, 360)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        copy = buttons.addButton("Copy", QDialogButtonBox.ButtonRole.ActionRole)
        copy.clicked.connect(self._copy)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.message)
        layout.addWidget(self.details, 1)
        layout.addWidget(buttons)

    def show_error(self, message: str, details: str) -> None:
        self.message.setText(message)
        self.details.setPlainText(details or message)
        self.details.setVisible(bool(details))
        self.show()
        self.raise_()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(f"{self.message.text()}\n\n{self.details.toPlainText()}")


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" when the window is too narrow (the tooltip and the
    details dialog have the whole text) instead of cutting the text off mid-word."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(60, super().minimumSizeHint().height())

    def paintEvent(self, _event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        if self.styleSheet():
            painter.setPen(QColor(ERROR_COLOR))
            font = painter.font()
            font.setBold(True)
            painter.setFont(font)
        metrics = QFontMetrics(painter.font())
        rect = self.contentsRect()
        text = metrics.elidedText(self.text(), Qt.TextElideMode.ElideRight, rect.width())
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), text)


class ErrorReporter(QObject):
    """Puts messages in a status bar. `report` is for failures, `info` for news.

    `report_from_any_thread` may be called from a worker thread: it is a queued signal."""

    reported = Signal(str, str)  # message, details: after a failure was shown
    _crossThread = Signal(str, str, bool)

    def __init__(self, status_bar: QStatusBar, parent_window: QWidget) -> None:
        super().__init__(parent_window)
        self._window = parent_window
        self.label = ElidedLabel()
        self.details_button = QToolButton()
        self.details_button.setText("Details…")
        self.details_button.setAutoRaise(True)
        self.details_button.setToolTip("Show the full error text")
        self.details_button.setStyleSheet("QToolButton { color: #c62828; }")
        self.details_button.hide()
        self.details_button.clicked.connect(self.show_details)
        status_bar.addWidget(self.label, 1)
        status_bar.addWidget(self.details_button)
        # A hover tip (a menu's or a toolbar's status tip) hides the status bar's widgets while
        # it shows; the button, shown during it, would be drawn over it. It waits for the tip.
        self._status_bar = status_bar
        self._button_wanted = False
        status_bar.messageChanged.connect(self._tip_changed)
        self._dialog: DetailsDialog | None = None
        self.last_message = ""
        self.last_details = ""
        # Failures reported since the window opened, also those a later message replaced
        # before anyone read them. Nothing in the window shows it: it is how a test checks
        # that a failure was reported, and only once.
        self.count = 0
        self._error_time: float | None = None  # when the failure on screen was reported
        self._pending_info: tuple[str, int] | None = None
        self._resolved = False  # a later action succeeded while the failure was fresh
        self._unseen = False  # a failure was reported and its details never opened
        # Info messages fade after a while; errors stay until the next message.
        self._clear_timer = QTimer(self)
        self._clear_timer.setSingleShot(True)
        self._clear_timer.timeout.connect(self._clear_info)
        self._crossThread.connect(self._report_slot, Qt.ConnectionType.QueuedConnection)

    def report(self, message: str, details: str = "", *, popup: bool = False) -> None:
        """Show a failure. `popup` opens the details at once (for something the user just
        asked for and is waiting on, like loading a model)."""
        message = " ".join(str(message).split()) or "Something went wrong"
        self.count += 1
        self.last_message, self.last_details = message, details
        self._clear_timer.stop()
        self._error_time = time.monotonic()
        self._pending_info = None
        self._resolved = False
        self._clear_timer.start(int(ERROR_HOLD_S * 1000))  # then a waiting info may show
        self.label.setStyleSheet(ERROR_STYLE)
        self.label.setText(message)
        self.label.setToolTip(message)
        self._unseen = True
        self.details_button.setText("Details…")
        self._show_button(True)
        if popup:
            self.show_details()
        self.reported.emit(message, details)

    def report_exception(self, context: str, exc: BaseException, *, popup: bool = False) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.report(f"{context}: {exc}" if str(exc) else f"{context}: {type(exc).__name__}",
                    text, popup=popup)

    def report_from_any_thread(self, message: str, details: str = "", popup: bool = False) -> None:
        self._crossThread.emit(message, details, popup)

    @Slot(str, str, bool)
    def _report_slot(self, message: str, details: str, popup: bool) -> None:
        self.report(message, details, popup=popup)

    def info(self, message: str, timeout_ms: int = 6000) -> None:
        """News ("Loaded resnet18"). It waits while a failure is fresh: a message that
        arrives just after an error must not push the error away before it was read."""
        if self._error_time is not None and time.monotonic() - self._error_time < ERROR_HOLD_S:
            self._pending_info = (message, timeout_ms)
            return
        self._pending_info = None
        self._resolved = False
        self._error_time = None
        self.label.setStyleSheet(INFO_STYLE)
        self.label.setText(message)
        self.label.setToolTip(message)
        # A failure nobody has looked at yet stays one click away.
        self.details_button.setText("Last error…")
        self._show_button(self._unseen)
        if timeout_ms:
            self._clear_timer.start(timeout_ms)

    def resolved(self) -> None:
        """A later action succeeded (a run finished, a model loaded, an image opened): the
        failure on screen is old news and goes, once it has been there ERROR_HOLD_S (a run
        that succeeds just after a failure must not hide it unread). A failure whose
        details were never opened stays one click away ("Last error…")."""
        if not self.showing_error():
            return
        if self._error_time is not None and time.monotonic() - self._error_time < ERROR_HOLD_S:
            self._resolved = True  # _clear_info clears it when the hold time is over
            return
        self._clear_error()

    def showing_error(self) -> bool:
        return self.label.styleSheet() == ERROR_STYLE

    def _clear_error(self) -> None:
        self._error_time = None
        self._resolved = False
        self.label.setStyleSheet(INFO_STYLE)
        self.label.clear()
        self.label.setToolTip("")
        self.details_button.setText("Last error…")
        self._show_button(self._unseen)

    def _show_button(self, visible: bool) -> None:
        self._button_wanted = visible
        if not self._status_bar.currentMessage():
            self.details_button.setVisible(visible)

    def _tip_changed(self, message: str) -> None:
        if not message:
            self.details_button.setVisible(self._button_wanted)

    def _clear_info(self) -> None:
        if self._error_time is not None:  # the error's hold time is over
            self._error_time = None
            if self._pending_info is not None:
                self.info(*self._pending_info)
            elif self._resolved:
                self._clear_error()
            return  # else the error stays on screen until the next message
        self.label.clear()
        self.label.setToolTip("")

    def show_details(self) -> None:
        self._unseen = False
        if not self.showing_error():  # the error was already replaced
            self._show_button(False)
        if self._dialog is None:
            self._dialog = DetailsDialog(self._window)
        self._dialog.show_error(self.last_message, self.last_details)

    def stop(self) -> None:
        self._clear_timer.stop()
        if self._dialog is not None:
            self._dialog.close()


def install_excepthooks(reporter: ErrorReporter) -> None:
    """Route uncaught exceptions (in a slot, in any thread) to the window instead of a crash
    or a silent traceback on a terminal the user never sees."""

    def hook(exc_type, exc, tb) -> None:
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        sys.__stderr__.write(text)
        reporter.report_from_any_thread(f"Internal error: {exc_type.__name__}: {exc}", text)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        hook(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = hook
    threading.excepthook = thread_hook
