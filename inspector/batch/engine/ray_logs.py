"""Ray's own log lines kept off the user's terminal during an `--engine ray` run: they go to
DIR/ray.log instead, unless --verbose.

Ray writes two kinds. Its Python loggers ("ray", "ray.data": a note that token authentication
is on, Ray Data's execution plan, a note that its progress bars are off) print to sys.stderr.
Its C++ core prints to file descriptor 2 of this process directly (measured with Ray 2.60: a
WARNING that the machine has no route to 8.8.8.8, an ERROR on every Ray Data run that an
actor's constructor arguments live in the object store), and no option of ray.init reaches
those: RAY_BACKEND_LOG_LEVEL is read after the first of them, and announces itself in one
more line. So for the run, descriptor 2 is the log file, and sys.stderr (this program's own
sentences and its progress bar) a copy of the terminal's descriptor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

RAY_LOGGERS = ("ray", "ray.data")  # Ray Data's does not propagate to "ray"
LOG_NAME = "ray.log"


@contextlib.contextmanager
def ray_logs_to_file(out: Path, verbose: bool) -> Iterator[None]:
    """While it lasts, Ray's log lines go to out/ray.log (with `verbose`: where Ray puts them)."""
    if verbose:
        yield
        return
    try:
        log = open(Path(out) / LOG_NAME, "ab", buffering=0)
    except OSError:
        log = open(os.devnull, "wb")
    handler = logging.StreamHandler(open(log.fileno(), "w", closefd=False,
                                         encoding="utf-8", errors="backslashreplace"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)  # Ray Data's logger passes DEBUG: megabytes of metrics
    muted = []
    for name in RAY_LOGGERS:
        logger = logging.getLogger(name)
        for h in logger.handlers:
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
                muted.append((h, h.level))
                h.setLevel(logging.CRITICAL + 1)
        logger.addHandler(handler)
    terminal, old = None, sys.stderr
    try:
        writes_fd2 = old.fileno() == 2
    except (AttributeError, OSError, ValueError):
        writes_fd2 = False  # a test's captured stderr: it does not write to descriptor 2
    old.flush()
    saved = os.dup(2)
    try:
        if writes_fd2:
            terminal = open(os.dup(saved), "w", buffering=1,
                            encoding=old.encoding, errors=old.errors)
            sys.stderr = terminal
        os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if terminal is not None:
            sys.stderr = old
            terminal.close()
        for name in RAY_LOGGERS:
            logging.getLogger(name).removeHandler(handler)
        for h, level in muted:
            h.setLevel(level)
        handler.stream.close()
        log.close()
