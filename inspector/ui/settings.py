"""What the app remembers between sessions, through QSettings.

Window geometry and the dock layout, recent models and images, and the last choices a user
made (device, CAM method, which image view, folders of the file dialogs). Tests pass an INI
file in a temporary folder so they never touch the user's real settings.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow

ORGANIZATION = "network-inspector"
APPLICATION = "network-inspector"
# Bump when the set of docks changes: Qt would otherwise restore a layout that lacks the
# new docks, or refuse the old one silently.
LAYOUT_VERSION = 1
MAX_RECENT = 10


class AppSettings:
    def __init__(self, qsettings: QSettings | None = None) -> None:
        self.qs = qsettings if qsettings is not None else QSettings(ORGANIZATION, APPLICATION)

    @classmethod
    def in_file(cls, path: str) -> AppSettings:
        """Settings kept in an INI file (tests, portable installs)."""
        return cls(QSettings(str(path), QSettings.Format.IniFormat))

    # -- window ---------------------------------------------------------------------------
    def save_window(self, window: QMainWindow) -> None:
        self.qs.setValue("window/geometry", window.saveGeometry())
        self.qs.setValue("window/state", window.saveState(LAYOUT_VERSION))

    def restore_window(self, window: QMainWindow) -> bool:
        """Restore geometry and dock layout; False when there was nothing (first start)."""
        geometry = self.qs.value("window/geometry")
        state = self.qs.value("window/state")
        restored = False
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            restored = window.restoreGeometry(geometry)
        if isinstance(state, QByteArray) and not state.isEmpty():
            restored = window.restoreState(state, LAYOUT_VERSION) and restored
        return restored

    # -- recent lists ---------------------------------------------------------------------
    def recent_images(self) -> list[str]:
        return self._list("recent/images")

    def add_recent_images(self, paths: list[str]) -> None:
        items = [str(p) for p in paths] + self.recent_images()
        self._set_list("recent/images", _unique(items)[:MAX_RECENT])

    def recent_models(self) -> list[dict[str, Any]]:
        """Model choices as dicts (ModelChoice.to_dict), newest first."""
        out = []
        for text in self._list("recent/models"):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def add_recent_model(self, choice: dict[str, Any]) -> None:
        text = json.dumps(choice, sort_keys=True)
        items = [text] + [json.dumps(c, sort_keys=True) for c in self.recent_models()]
        self._set_list("recent/models", _unique(items)[:MAX_RECENT])

    # -- last choices -----------------------------------------------------------------------
    def value(self, key: str, default: Any = None) -> Any:
        value = self.qs.value(f"last/{key}", default)
        # INI files give strings back: keep the default's type.
        if isinstance(default, bool) and isinstance(value, str):
            return value.lower() in ("1", "true", "yes")
        if isinstance(default, int) and not isinstance(default, bool) and isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return default
        return value

    def set_value(self, key: str, value: Any) -> None:
        self.qs.setValue(f"last/{key}", value)

    def sync(self) -> None:
        self.qs.sync()

    # -- helpers ------------------------------------------------------------------------------
    def _list(self, key: str) -> list[str]:
        value = self.qs.value(key, [])
        if value is None:
            return []
        if isinstance(value, str):  # QSettings gives a 1-item list back as a plain string
            return [value] if value else []
        return [str(v) for v in value]

    def _set_list(self, key: str, items: list[str]) -> None:
        self.qs.setValue(key, items)


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in items if not (i in seen or seen.add(i))]
