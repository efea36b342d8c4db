"""A model load can be cancelled, whatever the model file does, and the Session goes on.

The files here never return: a factory in an endless Python loop (interrupted in its own
code, core.run.interrupt), one stuck in C (time.sleep: not interruptible, so its thread is left
behind and a new worker takes over), and a model whose forward calls sys.exit() while the
tree is probed. After each, the demo model is still the one loaded and the next run works.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from inspector.core.models.base import ModelSpec
from inspector.core.records.frames import ErrorFrame, ModelLoaded
from inspector.core.run.interrupt import LoadCancelled
from inspector.core.run.session import Session


@pytest.fixture
def session():
    session = Session()
    session.load_model("demo_shapes").result(60)
    session.channel.drain()  # the demo's own ModelLoaded
    yield session
    session.close()


def _factory(tmp_path: Path, body: str) -> ModelSpec:
    path = tmp_path / "net.py"
    path.write_text("import sys\nimport time\n\nimport torch\n\n\ndef build():\n" + body)
    return ModelSpec(name=None, factory=f"{path}:build", device="cpu")


def _wait_running(session: Session, timeout: float = 10.0) -> None:
    """Until the worker runs the load (not merely has it queued)."""
    deadline = time.monotonic() + timeout
    while not session._loads or session._loads[0].region._thread is None:
        assert time.monotonic() < deadline, "the load never started"
        time.sleep(0.01)


def _frames(session: Session) -> list:
    return session.channel.drain()


def test_an_endless_factory_is_interrupted_and_the_model_stays(session, tmp_path, demo_samples):
    spec = _factory(tmp_path, "    while True:\n        pass\n")
    future = session.load_model(spec)
    _wait_running(session)
    worker = session.worker
    assert session.cancel_load()
    with pytest.raises(LoadCancelled) as cancelled:
        future.result(5)
    # Interrupted in its own loop, not waited out and left behind: the same thread goes on.
    assert "left to finish" not in str(cancelled.value)
    assert session.worker is worker
    assert session.loaded.name == "demo_shapes"
    outcome = session.run(demo_samples[0], timeout=60)
    assert outcome.status == "ok" and outcome.logits is not None
    assert not [f for f in _frames(session) if isinstance(f, ErrorFrame)]


def test_a_factory_stuck_in_c_is_left_behind_and_a_new_worker_runs(session, tmp_path,
                                                                   demo_samples):
    asleep = tmp_path / "asleep"
    spec = _factory(tmp_path, f"    open({str(asleep)!r}, 'w').close()\n    time.sleep(30)\n")
    future = session.load_model(spec)
    _wait_running(session)
    # In time.sleep itself: an interrupt sent while the factory's module still runs Python
    # would stop it there, and this test is of the load stuck in C.
    deadline = time.monotonic() + 30
    while not asleep.exists():
        assert time.monotonic() < deadline, "the factory never ran"
        time.sleep(0.01)
    old = session.worker
    # Queued behind the stuck load: it runs on the worker that takes over, not never.
    queued = session.submit_request(session_request(demo_samples[0]))[1]
    assert session.cancel_load(wait=0.3)
    with pytest.raises(LoadCancelled, match="left to finish on its own"):
        future.result(1)
    assert session.worker is not old and session.worker.is_alive()
    assert queued.result(60).status == "ok"
    assert session.loaded.name == "demo_shapes"
    assert session.run(demo_samples[0], timeout=60).status == "ok"
    assert old.is_alive()  # still asleep in C; a daemon, stopped after its job
    assert not any(isinstance(f, ModelLoaded) for f in _frames(session))


def test_a_queued_load_is_withdrawn(session, tmp_path):
    release = threading.Event()
    blocker = session.worker.submit(lambda cancel: release.wait(10))
    future = session.load_model("demo_shapes")
    assert session.cancel_load()
    release.set()
    blocker.result(10)
    with pytest.raises(LoadCancelled):
        future.result(5)
    assert not any(isinstance(f, ModelLoaded) for f in _frames(session))


def test_a_model_that_calls_sys_exit_in_its_forward_is_an_error_not_a_hang(session,
                                                                           tmp_path):
    path = tmp_path / "quits.py"
    path.write_text(
        "import sys\nimport torch\n\n\nclass Quits(torch.nn.Module):\n"
        "    def forward(self, x):\n        sys.exit(2)\n\n\n"
        "def build():\n    return Quits()\n")
    future = session.load_model(ModelSpec(name=None, factory=f"{path}:build", device="cpu"))
    with pytest.raises(SystemExit):
        future.result(30)
    errors = [f for f in _frames(session) if isinstance(f, ErrorFrame)]
    assert errors and "Could not load" in errors[-1].message
    assert "SystemExit" in errors[-1].message
    assert session.loaded.name == "demo_shapes"


def session_request(image):
    from inspector.core.run.request import RunRequest

    return RunRequest(image=image)
