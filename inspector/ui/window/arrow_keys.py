"""Arrow keys step through images anywhere in the window (a window-wide shortcut), except
in widgets that move their own selection with them: those claim the keys first."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt

_ARROWS = (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down)


def claims_arrow_keys(e: QEvent) -> bool:
    """Call from a widget's event(): True (and the event accepted) for an arrow-key override,
    so that the window's image-stepping shortcut does not also fire."""
    if e.type() == QEvent.Type.ShortcutOverride and e.key() in _ARROWS:
        e.accept()
        return True
    return False
