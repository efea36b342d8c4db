"""A long run's progress in the status bar: the step, done/total, and the time left.

Most runs take a fraction of a second and say only "running x.png…". Once a run has taken
longer than SHOW_AFTER_S, its last progress report (core's ProgressFrame: Score-CAM's masked
forwards, for one) is shown as "running x.png: Score-CAM 96/512, about 4 s left", and the
busy bar shows the fraction done. A timer refreshes the text while the run goes on, so the
estimate counts down between reports and a run that became slow is shown without waiting
for its next report.

While edits are on, the unedited run (before) may run first, then the edited run (after):
Score-CAM's masked forwards twice over. Both passes are followed as one run: the text names
the pass ("Score-CAM before 96/512", "Score-CAM after 32/512"), the bar spans both, and the
time left is for the whole: the before pass counts the after pass as just as long (the same
request but for its edits), and the after pass goes on at the pace of both passes together,
so that the estimate does not jump when the second pass starts (its first reports alone,
with few forwards done, overstated its pace).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from inspector.core.records.frames import ProgressFrame
from inspector.ui.shell.status_panel import StatusPanel

SHOW_AFTER_S = 1.0
REFRESH_MS = 500
BEFORE, AFTER = "before", "after"  # the unedited run's pass and the edited run's


def time_left(frame: ProgressFrame, since_frame: float) -> float | None:
    """Seconds left in the frame's step, `since_frame` seconds after the frame was received:
    the step's own estimate where it has one (the faithfulness metrics' phases, whose units
    cost unlike each other), else at the pace so far; None before anything was done."""
    if frame.left is not None:
        return max(0.0, frame.left - since_frame)
    if frame.done <= 0 or frame.elapsed <= 0:
        return None
    per_item = frame.elapsed / frame.done
    return max(0.0, per_item * (frame.total - frame.done) - since_frame)


def format_time_left(seconds: float | None) -> str:
    if seconds is None:
        return "estimating the time left"
    if seconds < 1.0:
        return "less than a second left"
    if seconds < 90:
        return f"about {seconds:.0f} s left"
    return f"about {seconds / 60:.0f} min left"


def progress_text(frame: ProgressFrame, since_frame: float, pass_name: str | None = None,
                  before: ProgressFrame | None = None) -> str:
    """"Score-CAM 10/30, about 4 s left"; with `pass_name` ("before" or "after", see the
    module docstring), "Score-CAM before 10/30, about 12 s left in all". `before`: the last
    report of the before pass, whose pace the after pass's estimate goes on with."""
    left = time_left(frame, since_frame)
    step = f"{frame.step}: {frame.detail}" if frame.detail else frame.step
    if pass_name is None:
        return f"{step} {frame.done}/{frame.total}, {format_time_left(left)}"
    if pass_name == BEFORE and left is not None:
        left += frame.elapsed / frame.done * frame.total  # the after pass, as long again
    elif pass_name == AFTER and before is not None and before.done > 0 and before.elapsed > 0:
        done, elapsed = before.done + frame.done, before.elapsed + frame.elapsed
        left = max(0.0, elapsed / done * (frame.total - frame.done) - since_frame)
    return f"{step} {pass_name} {frame.done}/{frame.total}, " \
           f"{format_time_left(left)} in all"


def progress_bar(frame: ProgressFrame, pass_name: str | None = None) -> tuple[int, int]:
    """(done, total) of the busy bar: over both passes when there are two."""
    if pass_name is None:
        return frame.done, frame.total
    return frame.done + (frame.total if pass_name == AFTER else 0), 2 * frame.total


class RunProgress(QObject):
    """Follows the window's current run: `begin` when it is submitted (with the unedited
    run it waits for, when that one still runs), `started` when either starts (its label),
    `update` with their progress frames, `end` when the current run finished."""

    def __init__(self, status: StatusPanel, parent: QObject | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.status = status
        self.clock = clock
        self.run_id: int | None = None
        self.before_run: int | None = None  # the unedited run, running before run_id
        self.label = ""
        self.frame: ProgressFrame | None = None
        self._begun = 0.0
        self._received = 0.0  # when `frame` arrived
        self._control = None  # the SessionControl followed (see follow)
        self._before_frame: ProgressFrame | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)

    @property
    def text(self) -> str | None:
        """What the status bar says about the current run's progress; None: nothing yet."""
        if self.frame is None or self.clock() - self._begun < SHOW_AFTER_S:
            return None
        return progress_text(self.frame, self.clock() - self._received, self.pass_name,
                             self._before_frame)

    @property
    def pass_name(self) -> str | None:
        """BEFORE or AFTER while an unedited run goes first (see the module docstring)."""
        if self.before_run is None or self.frame is None:
            return None
        return BEFORE if self.frame.run_id == self.before_run else AFTER

    def follow(self, control) -> None:
        """Begin with each run the SessionControl submits, and the unedited run before it."""
        self._control = control
        control.runSubmitted.connect(self._submitted)

    def _submitted(self, run_id: int) -> None:
        control = self._control
        self.begin(run_id, control.baseline_run if control.baseline_running else None)

    def begin(self, run_id: int, before_run: int | None = None) -> None:
        self.stop()  # a bar left by the run this one replaces must not stay on screen
        self.run_id, self.before_run, self.label, self.frame = run_id, before_run, "", None
        self._before_frame: ProgressFrame | None = None  # the before pass's last report
        self._begun = self.clock()
        self._timer.start()

    def started(self, run_id: int, label: str) -> None:
        if run_id is not None and run_id in (self.run_id, self.before_run):
            self.label = label
            self.refresh()

    def update(self, frame: ProgressFrame) -> None:
        if frame.run_id is None or frame.run_id not in (self.run_id, self.before_run):
            return
        if frame.run_id == self.before_run and frame.run_id != self.run_id:
            self._before_frame = frame
        self.frame, self._received = frame, self.clock()
        self.refresh()

    def end(self, run_id: int) -> None:
        if run_id == self.run_id:
            self.stop()

    def stop(self) -> None:
        self._timer.stop()
        if self.frame is not None:
            self.status.show_progress(None)
        self.run_id, self.before_run, self.frame = None, None, None

    def refresh(self) -> None:
        text = self.text
        if text is None:
            return
        self.status.show_running(self.label or "the image", text)
        self.status.show_progress(progress_bar(self.frame, self.pass_name))
