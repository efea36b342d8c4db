"""The crash log (inspector/crashlog.py, no Qt): a process that dies of a fatal signal
leaves a report that the next start of the same program finds once; a normal exit and a
killed process leave nothing to report. Each case runs in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inspector import cli, crashlog

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def run_child(state_dir, body: str, program: str = "gui") -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import os, signal, faulthandler
        from inspector import crashlog
        log, crashes = crashlog.start({program!r})
        print(log.path, flush=True)
    """) + textwrap.dedent(body)
    env = {**os.environ, crashlog.STATE_DIR_ENV: str(state_dir)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_segfault_is_reported_once_at_the_next_start(tmp_path):
    child = run_child(tmp_path, "faulthandler._sigsegv()")
    assert child.returncode == -signal.SIGSEGV, child.stderr
    running = Path(child.stdout.strip())
    assert list(tmp_path.iterdir()) == [running]  # left behind by the crash
    assert running.name.startswith("gui-") and running.name.endswith(crashlog.RUNNING_SUFFIX)

    assert crashlog.previous_crashes("cli", tmp_path) == []  # another program's crash
    reports = crashlog.previous_crashes("gui", tmp_path)
    assert len(reports) == 1
    report = reports[0]
    assert report.path.is_file() and report.path.parent == tmp_path
    assert report.path.name.startswith("gui-crash-")
    assert "Segmentation fault" in report.summary()
    assert "Current thread" in report.text or "Thread" in report.text  # the stacks
    assert report.text.startswith("network-inspector gui pid")
    assert crashlog.previous_crashes("gui", tmp_path) == []  # reported once


def test_a_normal_exit_and_a_kill_leave_nothing_to_report(tmp_path):
    clean = run_child(tmp_path, "")
    assert clean.returncode == 0, clean.stderr
    assert list(tmp_path.iterdir()) == []  # removed at exit

    killed = run_child(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.returncode == -signal.SIGKILL
    assert len(list(tmp_path.iterdir())) == 1  # the header only: no report in it
    assert crashlog.previous_crashes("gui", tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_running_process_log_is_not_a_crash(tmp_path):
    with crashlog.CrashLog("gui", tmp_path) as log:
        assert log.path.is_file()
        assert crashlog.previous_crashes("gui", tmp_path) == []  # this very process
        assert log.path.is_file()
    assert not log.path.exists()


def test_only_the_newest_reports_are_kept(tmp_path):
    for i in range(crashlog.KEEP_REPORTS + 2):
        path = tmp_path / f"gui-crash-2026010{i}-000000-{i}.log"
        path.write_text("old report")
        os.utime(path, (1000 + i, 1000 + i))
    crashlog.previous_crashes("gui", tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert len(kept) == crashlog.KEEP_REPORTS and kept[0].endswith("-2.log")


def test_the_cli_prints_where_the_last_crash_log_is(tmp_path, monkeypatch, capsys):
    child = run_child(tmp_path, "faulthandler._sigsegv()", program="cli")
    assert child.returncode == -signal.SIGSEGV
    monkeypatch.setenv(crashlog.STATE_DIR_ENV, str(tmp_path))
    with pytest.raises(SystemExit):
        cli.main(["models", "--no-such-option"])  # stops at its arguments, after the check
    err = capsys.readouterr().err
    report = next(tmp_path.glob("cli-crash-*.log"))
    assert f"its crash log is {report}" in err
    assert "Segmentation fault" in err
    assert not list(tmp_path.glob("*.running.log"))  # the CLI's own log is gone at exit


def test_an_uncaught_exception_recorded_at_exit_is_reported_like_a_crash(tmp_path):
    child = run_child(tmp_path, """
        try:
            raise RuntimeError("the event loop died")
        except RuntimeError as e:
            log.record(e)
            log.close()  # what app.main's finally does next: must keep the log
    """)
    assert child.returncode == 0, child.stderr
    reports = crashlog.previous_crashes("gui", tmp_path)
    assert len(reports) == 1
    assert "RuntimeError: the event loop died" in reports[0].text
    assert reports[0].summary().startswith("Uncaught exception")
