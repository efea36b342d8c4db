"""The output folder of `analyse` and `atlas` (--out) as a resource: checked before any work,
locked while a run writes it, and a write error said as one sentence about the disk.

    claim(out, command)  the folder made if missing and locked; OutDirError (exit status 2)
                         when it is a file, cannot be created or written, or another run holds it
    write_failure(e, out)  an OutDirError naming the folder and its free space when `e` is a
                         failure to write there (a full disk, a read-only one), else None
    remove_partial(out)  the `.part` files a stopped run leaves

The lock is DIR/.network-inspector.lock: an flock(2) held while the run writes, and the
owner's pid, host and start in the file. Two runs of the same job into one folder would
otherwise move each other's `.part` files into place and report failures that did not
happen. The flock is what excludes (the kernel drops it when its process dies, however it
died); the pid is for the sentence, and also refuses when a live process on this machine names
itself in the file without holding the flock (a file system whose locks are not shared). A lock
whose pid no longer runs, or which names another host and whose flock is free, is stale: taken
over, with a note.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

LOCK_NAME = ".network-inspector.lock"
# Errors that only writing can raise: whatever file they came from, the disk is the cause.
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}
PART_SUFFIXES = (".part", ".part.npz")  # shards, JSON, Ray's files; core.export.files.save_npz


class OutDirError(Exception):
    """The output folder cannot be used: one sentence for the user."""


def claim(out: Path, command: str, warn: Callable[[str], None] = lambda m: None) -> OutDirLock:
    """The output folder, created if missing, checked and locked for this run."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutDirError(f"--out {out} is a file, not a folder: choose a folder (it is "
                          f"created when missing)")
    created = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutDirError(f"cannot create the output folder {out}: {_reason(e, out)}") from None
    lock = OutDirLock(out, command, created)
    try:
        lock.acquire(warn)
    except BaseException:
        lock.release()
        raise
    return lock


class OutDirLock:
    def __init__(self, out: Path, command: str, created: list[Path]) -> None:
        self.out, self.command, self.created = out, command, created
        self.path = out / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> OutDirLock:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:  # Ctrl+C, an error: a file cut short is not left behind
            remove_partial(self.out)
        self.release()

    def acquire(self, warn: Callable[[str], None]) -> None:
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise OutDirError(f"cannot write in the output folder {self.out}: "
                                  f"{_reason(e, self.out)}") from None
            if not _try_lock(fd):
                holder = _read(fd)
                os.close(fd)
                raise OutDirError(self._in_use(holder))
            # The holder before us may have removed the file between our open and our
            # flock: then we hold a lock on a name that is gone; open it again.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self.fd = fd
        holder = _read(fd)
        if holder and _alive(holder):
            self.fd = None  # not ours to remove
            os.close(fd)
            raise OutDirError(self._in_use(holder))
        if holder:
            where = "" if holder.get("host") == socket.gethostname() else \
                f" on {holder.get('host')}"
            warn(f"note: {self.out} was locked by a run that no longer runs (pid "
                 f"{holder.get('pid')}{where}); taking it over")
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
              "started": time.strftime("%Y-%m-%d %H:%M:%S"), "pid_start": _start_of(os.getpid())}
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(me) + "\n").encode())
            os.fsync(fd)  # a full disk says so here, before any work
        except OSError as e:
            raise OutDirError(f"cannot write in the output folder {self.out}: "
                              f"{_reason(e, self.out)}") from None

    def release(self) -> None:
        if self.fd is not None:
            # Removed while still held: a run that opens it in between sees a name that
            # is gone and opens it again (acquire), rather than sharing our lock.
            try:
                self.path.unlink(missing_ok=True)
            except PermissionError:  # Windows removes no open file: closed first there
                os.close(self.fd)
                self.fd = None
                self.path.unlink(missing_ok=True)
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
        for folder in self.created:  # a run refused before writing leaves no empty folder
            try:
                folder.rmdir()
            except OSError:
                break

    def _in_use(self, holder: dict) -> str:
        who = f"pid {holder.get('pid', '?')}"
        if holder.get("host") and holder["host"] != socket.gethostname():
            who += f" on {holder['host']}"
        if holder.get("started"):
            who += f", since {holder['started']}"
        run = " ".join(filter(None, ("network-inspector", holder.get("command"), "run")))
        return (f"{self.out} is being written by another {run} ({who}); wait for it to end "
                f"or choose another --out")


def write_failure(e: BaseException, out: Path) -> OutDirError | None:
    """The sentence for an error that is a failure to write into `out`, else None. Such an
    error is never an image's fault."""
    if not isinstance(e, OSError):
        return None
    inside = False
    if e.filename:
        try:
            inside = Path(os.path.abspath(e.filename)).is_relative_to(os.path.abspath(out))
        except (TypeError, ValueError):
            inside = False
    if e.errno not in DISK_ERRNOS and not (inside and e.errno is not None):
        return None
    return OutDirError(f"cannot write to {out}: {_reason(e, out)}; the run stopped (what was "
                       f"finished is kept: run again with --resume once it can be written)")


def remove_partial(out: Path) -> None:
    """Every `.part` file under `out`: written by a run that stopped before moving it into
    place, so never a whole file."""
    for folder, _, files in os.walk(out):
        for name in files:
            if name.endswith(PART_SUFFIXES):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass


def _reason(e: OSError, out: Path) -> str:
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        reason += f" ({_free(out)} free there)"
    return reason


def _free(out: Path) -> str:
    folder = Path(out)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        n = float(shutil.disk_usage(folder).free)
    except OSError:
        return "unknown space"
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _try_lock(fd: int) -> bool:
    """Lock the open lock file without waiting; False when another process holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            pass  # a file system without flock: the pid in the file still refuses
        return True
    # A byte far past the text, so that the text stays readable to a refused run.
    os.lseek(fd, 1 << 30, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(holder: dict) -> bool:
    """Whether the lock's owner still runs: only knowable for a process on this machine."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return False  # this process's own lock, left by a run that ended without releasing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # runs, as another user
    recorded = holder.get("pid_start")
    # The same pid with another start time is a new process that reused the number.
    return recorded is None or _start_of(pid) in (None, recorded)


def _start_of(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None
