"""Linux desktop integration: a menu entry, the icon, and "Open with" for image files.

    network-inspector --install-desktop     # into $XDG_DATA_HOME (~/.local/share)
    network-inspector --uninstall-desktop   # removes exactly what the install wrote

`install_desktop` writes a freedesktop `.desktop` entry into ``applications/`` and the icon
at every size into the ``hicolor`` theme, and records each file and folder it created in a
manifest; `uninstall_desktop` removes what the manifest lists and nothing else (a folder
only when it is empty), so a user's other files and entries are never touched.

The entry's Exec line starts this very installation: the frozen app's executable, else
the `network-inspector-gui` script of the Python environment that ran the install, else
that Python with ``-m inspector``. Reinstall after moving the app or its environment.

No Qt and no torch here: this runs from the command line in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from inspector import __version__
from inspector.resources import ICON_NAME, ICON_SIZES, icon_png, icon_svg, is_frozen

APP_ID = "network-inspector"  # the .desktop file's name: also Qt's desktopFileName
GUI_SCRIPT = "network-inspector-gui"
MANIFEST = Path(APP_ID) / "desktop-install.json"  # relative to the data home
# What the app opens (Pillow reads them all): the formats of the window's Open dialog.
MIME_TYPES = (
    "image/png",
    "image/jpeg",
    "image/bmp",
    "image/gif",
    "image/tiff",
    "image/webp",
    "image/x-portable-pixmap",
    "image/x-portable-graymap",
    "image/x-portable-bitmap",
    "image/x-portable-anymap",
)
# Characters that make an Exec argument need quotes (Desktop Entry Specification, "The Exec
# key"); inside double quotes these four must be escaped with a backslash.
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_ESCAPE_IN_QUOTES = '"`$\\'


class DesktopIntegrationError(RuntimeError):
    """The entry cannot be installed or removed here (with the reason and the path)."""


# -- where -----------------------------------------------------------------------------------


def data_home(path: str | os.PathLike | None = None) -> Path:
    """``path``, else ``$XDG_DATA_HOME``, else ``~/.local/share`` (XDG Base Directory)."""
    if path is not None:
        return Path(path).expanduser().absolute()
    env = os.environ.get("XDG_DATA_HOME", "")
    # The specification says a relative value is invalid and must be ignored.
    if env and Path(env).is_absolute():
        return Path(env)
    return Path.home() / ".local" / "share"


def desktop_file(home: Path) -> Path:
    return home / "applications" / f"{APP_ID}.desktop"


def icon_targets(home: Path) -> dict[Path, Path]:
    """Each icon file to install (in the hicolor theme) and the resource it is copied from."""
    hicolor = home / "icons" / "hicolor"
    targets = {hicolor / f"{s}x{s}" / "apps" / f"{ICON_NAME}.png": icon_png(s) for s in ICON_SIZES}
    targets[hicolor / "scalable" / "apps" / f"{ICON_NAME}.svg"] = icon_svg()
    return targets


# -- what to run -----------------------------------------------------------------------------


def launch_command() -> list[str]:
    """The argv that starts this installation's desktop app (absolute paths)."""
    if is_frozen():
        exe = Path(sys.executable).absolute()
        # Windows builds have a console and a windowed executable: the entry wants the latter.
        gui = exe.with_name(GUI_SCRIPT + exe.suffix)
        return [str(gui if gui.is_file() else exe)]
    names = [GUI_SCRIPT + (".exe" if os.name == "nt" else "")]
    # Not resolved: a venv's bin/python is a link to the base interpreter, and the script
    # lives next to the link.
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).absolute().parent):
        for name in names:
            script = folder / name
            if script.is_file() and os.access(script, os.X_OK):
                return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "inspector"]


def exec_quote(arg: str) -> str:
    """One Exec argument, quoted as the Desktop Entry Specification requires."""
    arg = arg.replace("%", "%%")  # a literal % is written %% (field codes start with %)
    if arg and not (_RESERVED & set(arg)):
        return arg
    quoted = "".join("\\" + c if c in _ESCAPE_IN_QUOTES else c for c in arg)
    return f'"{quoted}"'


def exec_value(argv: list[str]) -> str:
    """The Exec key's value: the quoted command, then %F (the files to open)."""
    line = " ".join(exec_quote(a) for a in argv) + " %F"
    # The key's value is itself a string with the general escape rules: a backslash that
    # the quoting put in must be written twice.
    return line.replace("\\", "\\\\")


def desktop_entry(argv: list[str]) -> str:
    """The text of the .desktop file for a launcher that runs ``argv``."""
    try_exec = argv[0].replace("\\", "\\\\")
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.4",
        "Name=Network Inspector",
        "GenericName=Neural Network Inspector",
        "Comment=Look inside a PyTorch model while it runs: activations, gradients, "
        "class activation maps",
        f"Exec={exec_value(argv)}",
        f"TryExec={try_exec}",
        f"Icon={ICON_NAME}",
        "Terminal=false",
        "Categories=Science;ArtificialIntelligence;DataVisualization;",
        "Keywords=PyTorch;neural network;deep learning;Grad-CAM;activation;gradient;",
        "MimeType=" + "".join(f"{m};" for m in MIME_TYPES),
        "StartupNotify=true",
        # The window's X11 class (Qt: the application name that inspector.app sets), so a
        # dock groups the window under this entry's icon.
        f"StartupWMClass={APP_ID}",
        "",
    ])


# -- install / uninstall -----------------------------------------------------------------------


def install_desktop(data_home_path: str | os.PathLike | None = None) -> list[Path]:
    """Write the desktop entry and icons under the data home; return the files written.

    Writing again over an earlier install is fine: the manifest keeps everything either
    install created, so one uninstall removes both."""
    _require_freedesktop()
    home = data_home(data_home_path)
    icons = icon_targets(home)
    missing = [str(src) for src in icons.values() if not src.is_file()]
    if missing:
        raise DesktopIntegrationError(
            "the app icon is missing from the resources folder: " + ", ".join(missing)
            + " (run packaging/render_icons.py, or set INSPECTOR_RESOURCES)")
    argv = launch_command()

    record = _read_manifest(home) or {"files": [], "dirs": []}
    files: list[str] = list(record["files"])
    dirs: list[str] = list(record["dirs"])
    written: list[Path] = []

    def note(path: Path) -> None:
        rel = path.relative_to(home).as_posix()
        if rel not in files:
            files.append(rel)
        written.append(path)

    error: OSError | None = None
    try:
        entry = desktop_file(home)
        _make_dirs(entry.parent, home, dirs)
        _write_atomic(entry, desktop_entry(argv).encode())
        note(entry)
        for target, source in icons.items():
            _make_dirs(target.parent, home, dirs)
            _write_atomic(target, source.read_bytes())
            note(target)
    except OSError as e:
        error = e
    # Even after a failure the manifest lists every file and folder that now exists
    # because of an install, so that an uninstall can remove them.
    manifest = home / MANIFEST
    try:
        _make_dirs(manifest.parent, home, dirs)
        payload = {"app": APP_ID, "version": __version__, "exec": argv,
                   "files": files, "dirs": dirs}
        _write_atomic(manifest, (json.dumps(payload, indent=2) + "\n").encode())
    except OSError as e:
        error = error or e
    if error is not None:
        raise DesktopIntegrationError(
            f"cannot write {error.filename or home}: {error.strerror or error}") from error
    written.append(manifest)
    _refresh_caches(home)
    return written


def uninstall_desktop(data_home_path: str | os.PathLike | None = None) -> list[Path]:
    """Remove what install_desktop wrote under the data home; return what was removed.

    Only paths the manifest lists, only inside the data home, and folders only when they
    are empty (another app's icons in the same theme folder keep it). Without a manifest
    there is nothing of ours to remove."""
    home = data_home(data_home_path)
    record = _read_manifest(home)
    if record is None:
        return []
    removed: list[Path] = []
    for rel in record["files"] + [MANIFEST.as_posix()]:
        path = _inside(home, rel)
        if path is not None and (path.is_file() or path.is_symlink()):
            path.unlink()
            removed.append(path)
    # Deepest first, so that a folder's created sub-folders go before it.
    for rel in sorted(record["dirs"], key=lambda r: r.count("/"), reverse=True):
        path = _inside(home, rel)
        if path is not None and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
            removed.append(path)
    _refresh_caches(home)
    return removed


def desktop_command(uninstall: bool = False, data_home_path=None) -> int:
    """`network-inspector --install-desktop` / `--uninstall-desktop`: do it and say what."""
    try:
        if uninstall:
            paths = uninstall_desktop(data_home_path)
            if not paths:
                print(f"network-inspector: no desktop entry installed in {data_home(data_home_path)}")
            folders = [p for p in paths if not p.suffix]
            for path in paths:
                if path not in folders:
                    print(f"removed {path}")
            if folders:
                print(f"removed {len(folders)} empty folders the install had created")
            return 0
        for path in install_desktop(data_home_path):
            print(f"wrote {path}")
        print(f"Network Inspector is in the applications menu; it runs: "
              f"{' '.join(launch_command())}")
        return 0
    except DesktopIntegrationError as e:
        print(f"network-inspector: {e}", file=sys.stderr)
        return 1


# -- helpers ---------------------------------------------------------------------------------


def _require_freedesktop() -> None:
    if sys.platform in ("win32", "cygwin", "darwin"):
        raise DesktopIntegrationError(
            "desktop entries are for Linux desktops; on Windows and macOS use the packaged "
            "app (see packaging/README.md)")


def _read_manifest(home: Path) -> dict | None:
    path = home / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DesktopIntegrationError(f"cannot read the install manifest {path}: {e}") from e
    if not isinstance(data, dict) or data.get("app") != APP_ID:
        raise DesktopIntegrationError(f"{path} is not a Network Inspector install manifest")
    return {key: [str(p) for p in data.get(key, []) if isinstance(p, str)]
            for key in ("files", "dirs")}


def _inside(home: Path, rel: str) -> Path | None:
    """home/rel when rel is a plain relative path (a manifest must not reach outside home).
    Checked on the names, not resolved: a user may keep applications/ behind a link."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        return None
    return home / rel


def _make_dirs(folder: Path, home: Path, created: list[str]) -> None:
    """mkdir -p, noting each folder below home that did not exist before."""
    missing = []
    for parent in [folder, *folder.parents]:
        if parent == home or parent.exists() or home not in parent.parents:
            break
        missing.append(parent)
    folder.mkdir(parents=True, exist_ok=True)
    for path in missing:
        rel = path.relative_to(home).as_posix()
        if rel not in created:
            created.append(rel)


def _write_atomic(path: Path, data: bytes) -> None:
    # A desktop watching the folder must never read a half-written entry.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _refresh_caches(home: Path) -> None:
    """Update the desktop's caches where it keeps them (never create one: that would be a
    file uninstall_desktop does not remove)."""
    apps = home / "applications"
    hicolor = home / "icons" / "hicolor"
    jobs = []
    if (apps / "mimeinfo.cache").is_file() and shutil.which("update-desktop-database"):
        jobs.append(["update-desktop-database", "-q", str(apps)])
    if (hicolor / "icon-theme.cache").is_file() and shutil.which("gtk-update-icon-cache"):
        jobs.append(["gtk-update-icon-cache", "-q", "-t", "-f", str(hicolor)])
    for job in jobs:
        try:
            subprocess.run(job, check=False, timeout=60, capture_output=True)
        except (OSError, subprocess.SubprocessError):
            pass  # a stale cache only delays the menu; the files are in place
    if hicolor.is_dir():
        os.utime(hicolor)  # icon theme loaders notice new icons by the theme folder's mtime
