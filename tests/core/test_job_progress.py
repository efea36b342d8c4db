"""batch.engine.progress: the one progress object of the batch commands."""

from __future__ import annotations

import sys
import threading

import pytest

from inspector.batch.engine.progress import JobCancelled, Progress


def test_it_reports_each_stage_and_stops_once_cancelled():
    seen, cancel = [], threading.Event()
    progress = Progress(False, lambda *a: seen.append(a), cancel)
    progress.stage("fit", 10, announce=False)
    progress.update(4)
    progress.stage("codes", 6, done=2)  # a resumed run's: two were done before
    progress.update(1)
    assert seen == [("fit", 4, 10), ("codes", 2, 6), ("codes", 3, 6)]
    assert progress.bar is None  # no bar when not shown
    cancel.set()
    with pytest.raises(JobCancelled):
        progress.update(1)
    assert seen[-1] == ("codes", 4, 6)  # counted, then stopped


def test_work_that_looks_at_the_cancel_itself_is_not_stopped_by_it():
    cancel = threading.Event()
    cancel.set()
    progress = Progress(False, None, cancel, check_cancel=False).stage("visualise", 8)
    progress.update(8)  # the last step of a whole picture: no JobCancelled
    assert progress.cancelled and progress.done == 8
    with pytest.raises(JobCancelled):
        Progress(False, None, cancel).stage("atlas", 3)  # announced: stopped before any


def test_the_bar_is_drawn_on_stderr_when_shown(capsys):
    progress = Progress(True).stage("atlas", 3)
    progress.update(3)
    progress.write("skipped x.png: not an image", file=sys.stderr)
    progress.close()
    err = capsys.readouterr().err
    assert "atlas" in err and "3/3" in err and "skipped x.png" in err
