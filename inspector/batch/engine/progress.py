"""A batch job's progress, one object for every command: tqdm's bar on stderr at a terminal,
`on_progress(stage, done, total)` for the window (called on the job's thread), and the
cancel check after each update, so that a cancelled job stops at its next step with its
finished shards kept for --resume."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


class JobCancelled(Exception):
    """The job's cancel event was set: it stops at the next progress update."""


class Progress:
    """`stage(name, total)` begins a stage (its own bar), `update(n)` counts n more done.

    show: draw tqdm's bar (off: --quiet, or the window). check_cancel: raise JobCancelled
    from update once `cancel` is set; off where the work looks at `cancel` itself (a
    feature visualisation finishes the step it is in, and a last step makes whole
    pictures)."""

    def __init__(self, show: bool, on_progress: Callable[[str, int, int], None] | None = None,
                 cancel: threading.Event | None = None, check_cancel: bool = True) -> None:
        self.show, self.on_progress, self.cancel = show, on_progress, cancel
        self.check_cancel = check_cancel
        self.name, self.done, self.total, self.bar = "", 0, 0, None

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def stage(self, name: str, total: int, done: int = 0, unit: str = "img",
              announce: bool = True) -> Progress:
        """Begin stage `name` of `total` steps, `done` of them already (a resumed run's);
        `announce`: tell on_progress (and look at the cancel) before the first step."""
        self.close()
        self.name, self.done, self.total = name, done, total
        if self.show and total:  # even a disabled tqdm starts its monitor thread, which stays
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit=unit, desc=name, file=sys.stderr,
                            dynamic_ncols=True)
        if announce:
            self.update(0)
        return self

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        if self.on_progress is not None:
            self.on_progress(self.name, self.done, self.total)
        if self.check_cancel and self.cancelled:
            raise JobCancelled

    def write(self, message: str, file=None) -> None:
        """A line above the bar (tqdm's way, so that the bar is drawn again below it)."""
        if self.bar is not None:
            self.bar.write(message, file=file)
        else:
            print(message, file=file)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
