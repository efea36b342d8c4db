"""A crash log that survives the crash, and the news of it at the next start.

Python's `faulthandler` writes the stack of every thread to a file when the process dies of
a fatal signal (a segmentation fault in a compiled extension, an abort in C++ code): what a
user of a frozen app, with no terminal, would otherwise never see. Each process writes to
its own file in the state directory, "<program>-<pid>.running.log", which starts with a
header line and is deleted when the process exits normally. A file left behind by a process
that is no longer alive means that process did not exit normally:

- with more than the header in it, faulthandler wrote a crash report: the next start of the
  same program renames it to "<program>-crash-<time>-<pid>.log" (so it is reported once),
  keeps the newest KEEP_REPORTS of those, and says where it is (the window shows a notice,
  the CLI a line on stderr);
- with only the header, the process was killed (SIGKILL, a power cut): nothing to show, and
  the file is removed.

No Qt here: the CLI uses this module too. The directory is INSPECTOR_STATE_DIR when set,
else the platform's place for an application's state.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

STATE_DIR_ENV = "INSPECTOR_STATE_DIR"
APP_DIR = "network-inspector"
RUNNING_SUFFIX = ".running.log"
KEEP_REPORTS = 5
HEADER = "network-inspector {program} pid {pid} started {time}; python {python}\n"


@dataclass(frozen=True)
class CrashReport:
    """A crash of an earlier process: where its log is now, and what it says."""

    path: Path
    program: str
    pid: int
    text: str

    def summary(self) -> str:
        """The log's first line about the crash ("Fatal Python error: Segmentation fault")."""
        for line in self.text.splitlines()[1:]:
            if line.strip():
                return line.strip()
        return "the process ended without a report"


def state_dir() -> Path:
    """Where the crash logs go (created on demand)."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or home / ".local" / "state")
    return base / APP_DIR


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if sys.platform == "win32":
        return False  # no cheap check there; a concurrent instance's log is renamed, no harm
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    except OSError:
        return False
    return True


def _parse_running(path: Path) -> tuple[str, int] | None:
    """(program, pid) of a "<program>-<pid>.running.log" name."""
    stem = path.name.removesuffix(RUNNING_SUFFIX)
    program, _, pid = stem.rpartition("-")
    if not program or not pid.isdigit():
        return None
    return program, int(pid)


def previous_crashes(program: str, directory: Path | None = None) -> list[CrashReport]:
    """Crash reports that earlier processes of `program` left, oldest first. Each is renamed
    so that it is reported only once; logs of killed processes (header only) are removed;
    logs of processes still running (another window) are left alone."""
    folder = directory or state_dir()
    if not folder.is_dir():
        return []
    reports = []
    for path in sorted(folder.glob(f"{program}-*{RUNNING_SUFFIX}"), key=_mtime):
        parsed = _parse_running(path)
        if parsed is None or parsed[0] != program or _pid_alive(parsed[1]):
            continue
        try:
            text = path.read_text(errors="replace")
            if len(text.splitlines()) <= 1:
                path.unlink()
                continue
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(_mtime(path)))
            kept = path.with_name(f"{program}-crash-{stamp}-{parsed[1]}.log")
            path.replace(kept)
        except OSError:
            continue  # unreadable, or another process took it first
        reports.append(CrashReport(kept, program, parsed[1], text))
    _prune(folder, program)
    return reports


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _prune(folder: Path, program: str) -> None:
    old = sorted(folder.glob(f"{program}-crash-*.log"), key=_mtime)[:-KEEP_REPORTS]
    for path in old:
        try:
            path.unlink()
        except OSError:
            pass


class CrashLog:
    """This process's crash log: `faulthandler` writes to it until `close`."""

    def __init__(self, program: str, directory: Path | None = None) -> None:
        folder = directory or state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{program}-{os.getpid()}{RUNNING_SUFFIX}"
        self._was_enabled = faulthandler.is_enabled()
        self._file: TextIO | None = open(self.path, "w")  # noqa: SIM115 - open until close()
        self._file.write(HEADER.format(program=program, pid=os.getpid(),
                                       time=time.strftime("%Y-%m-%d %H:%M:%S"),
                                       python=sys.version.split()[0]))
        self._file.flush()
        faulthandler.enable(self._file, all_threads=True)
        atexit.register(self.close)

    def record(self, exc: BaseException) -> None:
        """The process ends on an uncaught Python exception: write its traceback after the
        header and keep the log, so that the next start reports it like a crash."""
        if self._file is None:
            return
        atexit.unregister(self.close)
        faulthandler.disable()
        self._file.write("Uncaught exception: " + "".join(traceback.format_exception(exc)))
        self._file.close()
        self._file = None

    def close(self) -> None:
        """A normal exit: stop writing and remove the log."""
        if self._file is None:
            return
        atexit.unregister(self.close)
        faulthandler.disable()
        if self._was_enabled and sys.__stderr__ is not None:
            try:  # as it was before (python -X faulthandler, pytest): on stderr
                faulthandler.enable(sys.__stderr__, all_threads=True)
            except (ValueError, OSError):
                pass
        self._file.close()
        self._file = None
        try:
            self.path.unlink()
        except OSError:
            pass

    def __enter__(self) -> CrashLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start(program: str) -> tuple[CrashLog | None, list[CrashReport]]:
    """At a program's start: the crashes of its earlier runs, and this run's crash log.
    Never fails the program: without a writable state directory there is no crash log."""
    try:
        reports = previous_crashes(program)
    except OSError:
        reports = []
    try:
        log = CrashLog(program)
    except OSError as e:
        print(f"network-inspector: no crash log ({e})", file=sys.stderr)
        log = None
    return log, reports
