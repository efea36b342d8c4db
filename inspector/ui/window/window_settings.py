"""What the main window keeps in its settings: the layout, the tree's columns, the choices it
restores at start, saved values it could not use, and Help ▸ Reset settings."""

from __future__ import annotations

import logging

from PySide6.QtCore import QByteArray, QDataStream, QIODevice, QRect, QTimer
from PySide6.QtWidgets import QMessageBox

from inspector.ui.shell import docks

log = logging.getLogger(__name__)
GEOMETRY_MAGIC = 0x1D9D0CB  # what QWidget.saveGeometry's bytes start with


class WindowSettings:
    def __init__(self, window, settings, reporter) -> None:
        self.window = window
        self.settings = settings  # AppSettings
        self.reporter = reporter
        self._report_pending = False
        settings.on_problem = self.report_problems
        if settings.problems:
            self.report_problems()

    def restore(self) -> bool:
        """The window's geometry and docks, the tree's columns; False: nothing was saved, or
        the saved layout was wider than the screen (the status bar says so)."""
        too_wide = self._wider_than_screen()
        if too_wide:
            log.info(too_wide)
            self.reporter.info(too_wide, 20000)
            restored = False
        else:
            restored = self.settings.restore_window(self.window)
        self.window.tree.restore_header_state(self.settings.value("tree_header", QByteArray()),
                                              self.settings.value("tree_widths_by_user", False))
        return restored

    def _wider_than_screen(self) -> str:
        """Why the saved layout is not restored, or "": a window that something had pushed
        wider than its screen (a long label once did) saved docks squeezed to fit, and
        restoring them would keep it so at every start."""
        geometry = self.settings.saved_geometry()
        saved = None if geometry is None else saved_rect(geometry)
        if saved is None:
            return ""  # nothing, or not a geometry: Qt's restoreGeometry refuses it
        room = docks.screen_room(self.window, saved.center())
        if saved.width() <= room.width():
            return ""
        return (f"The saved window layout was wider than the screen ({saved.width()} pixels "
                f"on {room.width()}): the default layout is used.")

    def save(self) -> None:
        self.settings.save_window(self.window)
        self.settings.set_value("tree_header", self.window.tree.header_state())
        self.settings.set_value("tree_widths_by_user", self.window.tree.widths_set_by_user)
        self.settings.sync()

    def report_problems(self, _problem: str = "") -> None:
        """One report for the problems found while the window reads its settings (they come
        one value at a time), after the current event: not one report per value."""
        if not self._report_pending:
            self._report_pending = True
            QTimer.singleShot(0, self._report_now)

    def _report_now(self) -> None:
        self._report_pending = False
        problems = self.settings.problems
        where = self.settings.qs.fileName()
        if len(problems) == 1:
            message = f"{problems[0]}."
        else:
            message = f"Ignored {len(problems)} saved settings that could not be used; " \
                      "their defaults are used."
        self.reporter.report(message, "\n".join(problems) + f"\n\nSettings file: {where}")

    def ask_and_reset(self) -> None:
        """After asking, forget everything saved and use the defaults now (the layout,
        computing gradients, the CAM method); run again when a choice changed."""
        window = self.window
        answer = QMessageBox.question(
            window, "Reset settings",
            "Forget the window layout, the recent images and models, and every choice the "
            "app remembers? The loaded model and images stay open.",
            QMessageBox.StandardButton.Reset | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel)
        if answer != QMessageBox.StandardButton.Reset:
            return
        window.run_settings.reset()  # the widgets follow, and a changed choice runs again
        self.settings.reset()  # after: nothing of this session stays stored
        window.reset_layout()
        self.reporter.info("Settings reset to their defaults")


def saved_rect(geometry: QByteArray) -> QRect | None:
    """The window's rectangle without its frame in QWidget.saveGeometry's bytes (the frame's
    before format 3, Qt 6.4), or None when they are not a saved geometry."""
    stream = QDataStream(geometry, QIODevice.OpenModeFlag.ReadOnly)
    stream.setVersion(QDataStream.Version.Qt_4_0)
    if stream.readUInt32() != GEOMETRY_MAGIC:
        return None
    major = stream.readUInt16()
    stream.readUInt16()  # minor version

    def rect() -> QRect:
        left, top, right, bottom = (stream.readInt32() for _ in range(4))
        return QRect(left, top, right - left + 1, bottom - top + 1)

    shown = rect()  # the frame's
    rect()  # the normal (not maximised) geometry
    if major >= 3:
        stream.readInt32()  # screen number
        stream.readUInt8()  # maximised
        stream.readUInt8()  # full screen
        stream.readInt32()  # the screen's width when saved
        shown = rect()  # without the frame
    return shown if stream.status() == QDataStream.Status.Ok else None
