"""Arrow keys step through images anywhere in the window (a window-wide shortcut), except
in widgets that move their own selection with them: those claim the keys first."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

_ARROWS = (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down)


def claims_arrow_keys(e: QEvent) -> bool:
    """Call from a widget's event(): True (and the event accepted) for an arrow-key override,
    so that the window's image-stepping shortcut does not also fire."""
    if e.type() == QEvent.Type.ShortcutOverride and e.key() in _ARROWS:
        e.accept()
        return True
    return False


# Widgets whose arrow keys are their own (a focused block slider moved the image, not the
# block): Qt asks the focused widget first with a ShortcutOverride, and these claim it.
_OWN_ARROWS = (QAbstractSlider, QAbstractSpinBox, QComboBox, QLineEdit, QTextEdit,
               QPlainTextEdit, QAbstractItemView)


def keep_arrows_in_focused_widgets(app: QApplication) -> None:
    """Once per application (the filter lives as long as it does)."""
    if app.findChild(FocusedWidgetsKeepArrows) is None:
        FocusedWidgetsKeepArrows(app)


class FocusedWidgetsKeepArrows(QObject):
    """A focused slider, spin box, text field or list keeps its arrow keys; elsewhere they
    step through the images. Filters only the widget that takes the focus (installed on it
    then), not every event of the application."""

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        app.focusChanged.connect(self._focus_changed)

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if isinstance(new, _OWN_ARROWS):
            new.installEventFilter(self)  # again for the same widget: still once

    def eventFilter(self, watched: QObject, e: QEvent) -> bool:
        if isinstance(watched, _OWN_ARROWS) and watched.isEnabled():
            claims_arrow_keys(e)  # accepted: Qt delivers the key to the widget
        return False
