"""Where the window's commands write by default: a folder per result under the user's data
folder (QStandardPaths' generic data location, then the app's name: on Linux
~/.local/share/network-inspector), never a shared temporary folder that another user of the
machine could read or fill first."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from inspector.ui.shell.app_settings import APPLICATION


def data_folder() -> Path:
    """The app's own data folder (not created here: the command that writes creates it)."""
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return (Path(base) if base else Path.home() / ".local" / "share") / APPLICATION


def output_folder(kind: str, *names: str) -> Path:
    """A default output folder for a result of `kind` ("atlases", "comparisons") named after
    what made it: the names kept to letters, digits, '.', '_' and '-' so that a model given
    as path/to/file.py:build makes one folder, not a path."""
    parts = [_slug(n) for n in names if n and _slug(n)]
    return data_folder() / kind / ("-".join(parts) or "result")


def _slug(name: str) -> str:
    if ".py:" in name:  # path/to/file.py:function (a Windows path has a colon of its own)
        path, function = name.rsplit(":", 1)
        name = f"{Path(path).stem}.{function}"
    elif "/" in name or "\\" in name:
        name = Path(name).stem
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:60]
