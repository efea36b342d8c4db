"""INSPECTOR_THREADS takes effect where the model runs: in a script's Session, in the CLI, and
it leaves a program's own torch.set_num_threads alone. Each case runs in a process of its own,
since torch's thread count is process state set once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]

# A model that writes down the thread count its forward runs with.
FACTORY = """
import json, os, torch
from torch import nn

class Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        with open(os.environ["THREADS_LOG"], "a") as f:
            f.write(json.dumps(torch.get_num_threads()) + "\\n")
        return self.head(x.mean((2, 3)))

def build():
    return Recorder()
"""


def python(code: str, tmp_path: Path, threads: str | None, *args: str):
    env = {k: v for k, v in os.environ.items() if k != "INSPECTOR_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["THREADS_LOG"] = str(tmp_path / "threads.log")
    if threads is not None:
        env["INSPECTOR_THREADS"] = threads
    command = [sys.executable, "-c", textwrap.dedent(code)] if code else [sys.executable, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done


def seen_in_forward(tmp_path: Path) -> set[int]:
    lines = (tmp_path / "threads.log").read_text().split()
    return {json.loads(line) for line in lines}


@pytest.fixture(scope="module")
def default(tmp_path_factory) -> int:
    """torch's own thread count in a fresh process with this environment."""
    done = python("import torch; print(torch.get_num_threads())", tmp_path_factory.mktemp("d"),
                  None)
    return int(done.stdout)


@pytest.fixture
def wanted(default) -> int:
    return default + 1  # differs from torch's default on any machine


@pytest.fixture
def factory(tmp_path: Path) -> str:
    (tmp_path / "recorder.py").write_text(FACTORY)
    return f"{tmp_path / 'recorder.py'}:build"


SCRIPT = """
import torch
from inspector.core.models.load import ModelSpec
from inspector.core.run.session import Session
{before}
session = Session()
session.load_model(ModelSpec(name=None, factory={factory!r}, device="cpu")).result()
{after}
session.run(torch.zeros(1, 3, 8, 8))
session.close()
print(torch.get_num_threads())
"""


def test_a_script_session_runs_with_inspector_threads(tmp_path, factory, wanted):
    done = python(SCRIPT.format(before="", after="", factory=factory), tmp_path, str(wanted))
    assert seen_in_forward(tmp_path) == {wanted}  # the worker's forward, and the tree probe
    assert int(done.stdout) == wanted  # the thread that made the Session too


def test_without_it_torch_keeps_its_default(tmp_path, factory, default):
    python(SCRIPT.format(before="", after="", factory=factory), tmp_path, None)
    assert seen_in_forward(tmp_path) == {default}


def test_a_programs_own_choice_is_kept(tmp_path, factory, wanted):
    before = f"torch.set_num_threads({wanted + 1})"
    python(SCRIPT.format(before=before, after="", factory=factory), tmp_path, str(wanted))
    assert seen_in_forward(tmp_path) == {wanted + 1}
    # Set after the first Session: a second Session does not set it back.
    after = f"torch.set_num_threads({wanted + 1}); Session().close()"
    done = python(SCRIPT.format(before="", after=after, factory=factory), tmp_path, str(wanted))
    assert int(done.stdout) == wanted + 1


def test_an_invalid_value_is_a_warning_not_a_crash(tmp_path, factory, default):
    done = python(SCRIPT.format(before="", after="", factory=factory), tmp_path, "lots")
    assert "INSPECTOR_THREADS='lots' is not a positive whole number" in done.stderr
    assert seen_in_forward(tmp_path) == {default}


def test_the_cli_runs_with_inspector_threads(tmp_path, factory, wanted):
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(tmp_path / "black.png")
    python("", tmp_path, str(wanted), "-m", "inspector.cli", "analyse", "--model", factory,
           "--cam", "none", "--quiet", "--no-tensorboard", "--out", str(tmp_path / "out"),
           str(tmp_path / "black.png"))
    assert seen_in_forward(tmp_path) == {wanted}
    (tmp_path / "threads.log").unlink()
    python("", tmp_path, str(wanted), "-m", "inspector.cli", "tree", "--model", factory)
    assert seen_in_forward(tmp_path) == {wanted}


def test_a_run_can_ask_for_its_own_thread_count_and_the_worker_gets_its_own_back(
    tmp_path, factory, default
):
    # One thread fewer, as a window playing a video asks (core.run.runtime.stream_threads);
    # the run after it, asking nothing, runs with the worker's count again.
    code = SCRIPT.format(before="from inspector.core.run.runtime import stream_threads",
                         factory=factory,
                         after=f"session.run(torch.zeros(1, 3, 8, 8), threads={default + 2})")
    python(code, tmp_path, None)
    lines = [json.loads(line) for line in (tmp_path / "threads.log").read_text().split()]
    assert lines[-2:] == [default + 2, default]  # (before them: the load's probe forward)


def test_stream_threads_leaves_a_core_and_the_count_is_put_back():
    import torch

    from inspector.core.run.runtime import intra_op_threads, stream_threads

    before = torch.get_num_threads()
    assert stream_threads() == (before - 1 if before > 1 else None)
    with intra_op_threads(before + 3):
        assert torch.get_num_threads() == before + 3
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), intra_op_threads(before + 1):
        raise RuntimeError("a failed run")
    assert torch.get_num_threads() == before
