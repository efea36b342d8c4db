"""Linux desktop integration: the .desktop entry is valid, names a command that runs, and
uninstall removes exactly what install wrote. Everything happens in a temporary
XDG_DATA_HOME; the user's real menu is never touched."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from inspector import desktop
from inspector.desktop import (
    MIME_TYPES,
    DesktopIntegrationError,
    desktop_command,
    exec_value,
    install_desktop,
    uninstall_desktop,
)
from inspector.resources import ICON_NAME, ICON_SIZES

pytestmark = pytest.mark.skipif(sys.platform in ("win32", "darwin"),
                                reason="freedesktop entries are for Linux desktops")


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (None) under root."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def entry_fields(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A data home with someone else's entry and icon in it already, as a real one has."""
    data = tmp_path / "share"
    (data / "applications").mkdir(parents=True)
    (data / "applications" / "other.desktop").write_text("[Desktop Entry]\nName=Other\n")
    other_icon = data / "icons" / "hicolor" / "48x48" / "apps" / "other.png"
    other_icon.parent.mkdir(parents=True)
    other_icon.write_bytes(b"not ours")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    return data


def test_install_writes_the_entry_icons_and_a_manifest_of_them(home):
    written = install_desktop()  # from $XDG_DATA_HOME
    entry = home / "applications" / "network-inspector.desktop"
    assert entry in written
    for size in ICON_SIZES:
        png = home / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{ICON_NAME}.png"
        assert png in written
        with Image.open(png) as image:
            assert image.size == (size, size)
    assert home / "icons" / "hicolor" / "scalable" / "apps" / f"{ICON_NAME}.svg" in written
    manifest = json.loads((home / "network-inspector" / "desktop-install.json").read_text())
    assert sorted(home / rel for rel in manifest["files"]) == sorted(
        p for p in written if p.name != "desktop-install.json")

    fields = entry_fields(entry)
    assert fields["Type"] == "Application"
    assert fields["Icon"] == ICON_NAME
    assert fields["Exec"].endswith(" %F")
    assert fields["MimeType"].split(";")[:-1] == list(MIME_TYPES)
    assert {"image/png", "image/jpeg"} <= set(MIME_TYPES)


def test_the_entry_passes_desktop_file_validate(home):
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate not installed (Debian package desktop-file-utils)")
    install_desktop(home)
    entry = home / "applications" / "network-inspector.desktop"
    result = subprocess.run([tool, str(entry)], capture_output=True, text=True, timeout=60)
    # It prints errors and warnings (and returns 1 on errors); hints are advice only.
    problems = [line for line in result.stdout.splitlines() if "hint:" not in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr


def test_the_exec_line_starts_this_installation(home):
    install_desktop(home)
    exec_line = entry_fields(home / "applications" / "network-inspector.desktop")["Exec"]
    argv = shlex.split(exec_line.removesuffix(" %F"))
    program = Path(argv[0])
    assert program.is_absolute() and program.is_file() and os.access(program, os.X_OK)
    # The command answers --help without opening a window: it is a working launcher.
    result = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 0, result.stderr
    assert "network-inspector" in result.stdout


def test_uninstall_removes_exactly_what_install_wrote(home):
    before = snapshot(home)
    written = install_desktop(home)
    assert all(p.exists() for p in written)
    removed = uninstall_desktop(home)
    assert snapshot(home) == before  # the other app's entry and icon, and their folders, stay
    assert set(written) <= set(removed)


def test_reinstall_then_one_uninstall_leaves_nothing(home):
    before = snapshot(home)
    install_desktop(home)
    install_desktop(home)
    uninstall_desktop(home)
    assert snapshot(home) == before


def test_uninstall_without_an_install_touches_nothing(home):
    before = snapshot(home)
    assert uninstall_desktop(home) == []
    assert snapshot(home) == before


def test_a_folder_that_gained_other_files_is_kept(home):
    install_desktop(home)
    theirs = home / "icons" / "hicolor" / "256x256" / "apps" / "theirs.png"
    theirs.write_bytes(b"installed after us")
    uninstall_desktop(home)
    assert theirs.read_bytes() == b"installed after us"
    assert not (theirs.parent / f"{ICON_NAME}.png").exists()


def test_a_tampered_manifest_cannot_reach_outside_the_data_home(home, tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    install_desktop(home)
    manifest_path = home / "network-inspector" / "desktop-install.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"] += [str(outside), "../precious.txt"]
    manifest_path.write_text(json.dumps(manifest))
    uninstall_desktop(home)
    assert outside.read_text() == "keep me"


def test_a_foreign_manifest_is_refused(home):
    manifest = home / "network-inspector" / "desktop-install.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"app": "something-else", "files": ["applications"]}))
    with pytest.raises(DesktopIntegrationError, match="not a Network Inspector"):
        uninstall_desktop(home)
    assert (home / "applications" / "other.desktop").exists()


def test_missing_icons_are_reported_before_anything_is_written(home, monkeypatch, tmp_path):
    before = snapshot(home)
    monkeypatch.setenv("INSPECTOR_RESOURCES", str(tmp_path / "no-such-folder"))
    with pytest.raises(DesktopIntegrationError, match="render_icons"):
        install_desktop(home)
    assert snapshot(home) == before
    assert desktop_command(data_home_path=home) == 1  # the CLI says so and fails


def test_exec_arguments_are_quoted_as_the_specification_says():
    assert exec_value(["/usr/bin/ni"]) == "/usr/bin/ni %F"
    assert exec_value(["/opt/My Apps/ni"]) == '"/opt/My Apps/ni" %F'
    assert exec_value(["/opt/100%/ni"]) == "/opt/100%%/ni %F"
    # A $ is escaped inside the quotes, and that backslash is escaped again for the file.
    assert exec_value(["/opt/a$b/ni"]) == '"/opt/a\\\\$b/ni" %F'


def test_a_frozen_app_launches_its_own_executable(monkeypatch, tmp_path):
    exe = tmp_path / "network-inspector"
    exe.write_text("")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(exe))
    assert desktop.launch_command() == [str(exe)]
    gui = tmp_path / "network-inspector-gui"  # a Windows-style pair: prefer the windowed one
    gui.write_text("")
    assert desktop.launch_command() == [str(gui)]


def test_without_the_gui_script_it_runs_python_m_inspector(monkeypatch, tmp_path):
    monkeypatch.setattr(desktop.sysconfig, "get_path", lambda _name: str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    assert desktop.launch_command() == [str(tmp_path / "python3"), "-m", "inspector"]


def test_a_relative_xdg_data_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", "relative/share")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert desktop.data_home() == tmp_path / ".local" / "share"


def test_the_packaging_template_is_the_generated_entry():
    template = Path(__file__).resolve().parents[2] / "packaging" / "network-inspector.desktop"
    lines = [line for line in template.read_text().splitlines(keepends=True)
             if not line.startswith("#")]
    assert "".join(lines) == desktop.desktop_entry(["network-inspector-gui"])


def test_the_command_line_flags_install_and_uninstall(home, capsys):
    from inspector.cli import main

    before = snapshot(home)
    assert main(["--install-desktop"]) == 0
    assert (home / "applications" / "network-inspector.desktop").is_file()
    assert "wrote" in capsys.readouterr().out
    assert main(["--uninstall-desktop"]) == 0
    assert snapshot(home) == before

