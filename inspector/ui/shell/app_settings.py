"""What the app remembers between sessions, through QSettings.

Window geometry and the dock layout, recent models and images, and the last choices a user
made (device, CAM method, which image view, folders of the file dialogs). Tests pass an INI
file in a temporary folder so they never touch the user's real settings.

Whatever is stored is read defensively: a settings file can be hand-edited, written by
another version of the app, or cut short. A value of the wrong type, a garbage string, a
number out of range or a name the app no longer knows falls back to the default; the value
is dropped from the store and a note goes to the log and to `on_problem` (the window shows
it in the status bar). A broken setting must never stop the app from running.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QDockWidget, QMainWindow

ORGANIZATION = "network-inspector"
APPLICATION = "network-inspector"
# Bumped by hand only to drop layouts a bug had spoiled (4: layouts saved after choosing
# Occlusion had widened the right-hand docks and squeezed the module tree). A change in the
# set of docks needs no bump: the version a layout is saved under names them (layout_version).
LAYOUT_REVISION = 4
MAX_RECENT = 10
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})

log = logging.getLogger(__name__)


class InvalidSetting(ValueError):
    """A stored value that cannot be used (the message says why)."""


class AppSettings:
    def __init__(self, qsettings: QSettings | None = None) -> None:
        self.qs = qsettings if qsettings is not None else QSettings(ORGANIZATION, APPLICATION)
        self.problems: list[str] = []  # notes about ignored values, oldest first
        self.on_problem: Callable[[str], None] | None = None  # the window's status bar
        self._versions: dict[int, int] = {}  # id(window) -> its layout version

    @classmethod
    def in_file(cls, path: str) -> AppSettings:
        """Settings kept in an INI file (tests, portable installs)."""
        return cls(QSettings(str(path), QSettings.Format.IniFormat))

    # -- window ---------------------------------------------------------------------------
    def save_window(self, window: QMainWindow) -> None:
        self.qs.setValue("window/geometry", window.saveGeometry())
        self.qs.setValue("window/state", window.saveState(self._layout_version(window)))

    def restore_window(self, window: QMainWindow) -> bool:
        """Restore geometry and dock layout; False when there was nothing (first start). A
        layout saved by a window with other docks is not restored (the default stays)."""
        geometry = self._bytes("window/geometry")
        state = self._bytes("window/state")
        restored = False
        if geometry is not None and not geometry.isEmpty():
            restored = window.restoreGeometry(geometry)
        if state is not None and not state.isEmpty():
            restored = window.restoreState(state, self._layout_version(window)) and restored
        return restored

    def saved_geometry(self) -> QByteArray | None:
        """The window geometry saved last (QWidget.saveGeometry), or None."""
        geometry = self._bytes("window/geometry")
        return None if geometry is None or geometry.isEmpty() else geometry

    def _layout_version(self, window: QMainWindow) -> int:
        """The version of `window`'s layouts: LAYOUT_REVISION and the docks it had when its
        layout was first restored or saved (a dock an add-on makes later, on demand, does not
        change it). Qt would restore a layout that lacks a newer dock around it, or drop
        the docks of an older one; another version is refused instead."""
        version = self._versions.get(id(window))
        if version is None:
            names = sorted(d.objectName() for d in window.findChildren(QDockWidget))
            key = "|".join([str(LAYOUT_REVISION), *names]).encode()
            version = self._versions[id(window)] = zlib.crc32(key) & 0x7FFFFFFF
        return version

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
                value = None
            if isinstance(value, dict):
                out.append(value)
            else:
                self._note(f"a recent model that is not a model description ({_shown(text)})")
        return out

    def add_recent_model(self, choice: dict[str, Any]) -> None:
        text = json.dumps(choice, sort_keys=True)
        items = [text] + [json.dumps(c, sort_keys=True) for c in self.recent_models()]
        self._set_list("recent/models", _unique(items)[:MAX_RECENT])

    # -- last choices -----------------------------------------------------------------------
    def value(
        self,
        key: str,
        default: Any = None,
        *,
        choices: Iterable[Any] | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Any:
        """The stored choice `key`, in the default's type, or `default` when nothing usable
        is stored: a value of another type, not among `choices` or outside [minimum,
        maximum] is dropped with a note. A default of None takes any stored value."""
        full = f"last/{key}"
        if not self.qs.contains(full):
            return default
        raw = self.qs.value(full)
        try:
            value = _as_type_of(default, raw)
            _check(value, choices, minimum, maximum)
        except InvalidSetting as e:
            self.qs.remove(full)
            self._note(f"“{key}” = {_shown(raw)} ({e}); using {_shown(default)}")
            return default
        return value

    def set_value(self, key: str, value: Any) -> None:
        self.qs.setValue(f"last/{key}", value)

    def reset(self) -> None:
        """Forget everything stored: layout, recent files, last choices."""
        self.qs.clear()
        self.qs.sync()
        self.problems.clear()

    def sync(self) -> None:
        self.qs.sync()

    # -- helpers ------------------------------------------------------------------------------
    def _note(self, problem: str) -> None:
        text = f"Ignored a saved setting: {problem}"
        self.problems.append(text)
        log.warning("%s (in %s)", text, self.qs.fileName())
        if self.on_problem is not None:
            self.on_problem(text)

    def _bytes(self, key: str) -> QByteArray | None:
        value = self.qs.value(key)
        if value is None or isinstance(value, QByteArray):
            return value
        self.qs.remove(key)
        self._note(f"“{key}” is not a saved window layout ({_shown(value)})")
        return None

    def _list(self, key: str) -> list[str]:
        value = self.qs.value(key, [])
        if value is None:
            return []
        if isinstance(value, str):  # QSettings gives a 1-item list back as a plain string
            return [value] if value else []
        if not isinstance(value, (list, tuple)):
            self.qs.remove(key)
            self._note(f"“{key}” is not a list ({_shown(value)})")
            return []
        return [str(v) for v in value]

    def _set_list(self, key: str, items: list[str]) -> None:
        self.qs.setValue(key, items)


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in items if not (i in seen or seen.add(i))]


def _as_type_of(default: Any, raw: Any) -> Any:
    """`raw` as the type of `default` (INI files give every value back as a string)."""
    if default is None:
        return raw
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower() if isinstance(raw, (str, int)) else None
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise InvalidSetting("not true or false")
    if isinstance(default, (int, float)):
        kind = type(default)
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise InvalidSetting("not a number")
        try:
            value = kind(raw) if not isinstance(raw, str) else kind(raw.strip())
        except ValueError:
            raise InvalidSetting("not a number") from None
        if kind is int and isinstance(raw, float) and raw != value:
            raise InvalidSetting("not a whole number")
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidSetting("not a finite number")
        return value
    if isinstance(raw, type(default)):
        return raw
    # A comma in a hand-edited INI value turns it into a list, for one.
    raise InvalidSetting(f"a {type(raw).__name__}, not a {type(default).__name__}")


def _check(value: Any, choices, minimum, maximum) -> None:
    if choices is not None and value not in set(choices):
        raise InvalidSetting("not one of the known choices")
    if minimum is not None and value < minimum:
        raise InvalidSetting(f"below {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidSetting(f"above {maximum}")


def _shown(value: Any, most: int = 40) -> str:
    """A stored value as a note quotes it: short, on one line."""
    if isinstance(value, QByteArray):
        return f"{value.size()} bytes"
    text = " ".join(repr(value).split())
    return text if len(text) <= most else text[: most - 1] + "…"
