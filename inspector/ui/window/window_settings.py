"""What the main window keeps in its settings: the layout, the tree's columns, the choices it
restores at start, saved values it could not use, and Help ▸ Reset settings."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QTimer
from PySide6.QtWidgets import QMessageBox


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
        """The window's geometry and docks, the tree's columns; False: nothing was saved."""
        restored = self.settings.restore_window(self.window)
        self.window.tree.restore_header_state(self.settings.value("tree_header", QByteArray()),
                                              self.settings.value("tree_widths_by_user", False))
        return restored

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
