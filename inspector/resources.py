"""Where the app's resources (icons, the demo model, sample images) are on this machine.

One place answers it for every way the app runs:

1. ``$INSPECTOR_RESOURCES`` when set: a user or a packager points at a folder explicitly;
2. a PyInstaller bundle: ``resources/`` inside the bundle (``sys._MEIPASS``), where
   packaging/network_inspector.spec puts it;
3. a source checkout or an editable install: ``resources/`` at the top of the tree;
4. an installed wheel: ``<prefix>/share/network-inspector/resources`` (the wheel's data
   files; ``pip install --user`` puts them under the user base instead).

Importing this module is cheap and imports neither Qt nor torch (inspector.demo uses it).
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

ENV = "INSPECTOR_RESOURCES"
ICON_NAME = "network-inspector"  # also the icon's name in the freedesktop icon theme
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def candidates() -> list[Path]:
    """The folders searched, in order (the first that exists wins)."""
    found: list[Path] = []
    env = os.environ.get(ENV)
    if env:
        found.append(Path(env).expanduser())
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        found.append(Path(bundle) / "resources")
    found.append(Path(__file__).resolve().parents[1] / "resources")
    for base in (sys.prefix, site.getuserbase()):
        found.append(Path(base) / "share" / "network-inspector" / "resources")
    return found


def resources_dir() -> Path:
    """The resources folder in use. When none exists, the first candidate, so that what
    fails later names a folder the user can create or point ``INSPECTOR_RESOURCES`` at."""
    options = candidates()
    if os.environ.get(ENV):
        return options[0].resolve()  # an explicit choice is never second-guessed
    for folder in options:
        if folder.is_dir():
            return folder.resolve()
    return options[0]


def icons_dir() -> Path:
    return resources_dir() / "icons"


def icon_png(size: int) -> Path:
    """The app icon rendered at size x size pixels (one of ICON_SIZES)."""
    if size not in ICON_SIZES:
        raise ValueError(f"no {size} px icon; the sizes are {ICON_SIZES}")
    return icons_dir() / f"{ICON_NAME}-{size}.png"


def icon_svg() -> Path:
    return icons_dir() / f"{ICON_NAME}.svg"


def is_frozen() -> bool:
    """True inside a PyInstaller (or similar) bundle."""
    return bool(getattr(sys, "frozen", False))
