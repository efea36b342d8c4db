"""An atlas made from the window: `network-inspector atlas` (inspector.batch.atlas.run_atlas,
the same function and options, local engine) on a thread of its own.

The window never waits for it: the thread loads its own copy of the model (the window's
model stays with the inference worker, whose hooks must not see the atlas's batches), and
its progress and its end reach the GUI thread through queued signals (`progress`,
`finished`), never through widgets touched from the thread. `cancel` sets the event that
run_atlas looks at after each batch: the run stops at the next batch, with its finished
shards kept, so that the same atlas with "resume" continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

STAGES = {"atlas": "statistics", "boxes": "receptive-field boxes"}


@dataclass(frozen=True)
class AtlasRequest:
    """What `network-inspector atlas` is given, as the dialog fills it in."""

    spec: object  # core.models.base.ModelSpec: the window's model (its device: the dialog's)
    inputs: tuple[str, ...]  # folders, image files and videos
    layers: tuple[str, ...]
    out: Path
    top: int = 9
    every: int = 1
    batch_size: int = 32
    workers: int = 0  # decoding processes; 0: on the atlas's thread (no fork of the window)
    shard_size: int = 256
    resume: bool = False
    seed: int | None = None  # the seed that made the window's random weights, if any


@dataclass(frozen=True)
class AtlasResult:
    status: str  # "ok" (atlas.json written), "failed" or "cancelled"
    out: Path
    code: int  # run_atlas's exit status
    messages: tuple[str, ...]  # what the command would have printed on stderr

    @property
    def message(self) -> str:
        """The one sentence the window says: the last thing the command said, in the
        window's words (Resume is a box of the dialog here, not the --resume flag)."""
        said = self.messages[-1] if self.messages else ""
        return said.replace("run again with --resume to continue",
                            "tick Resume in File ▸ New atlas… and run it again to continue")


def atlas_options(request: AtlasRequest, warn, on_progress, cancel):
    """The command's AtlasOptions for `request`: the seed chosen as `atlas` chooses it (the
    model's own seed, else the stored run's when resuming, else a new one)."""
    from inspector.batch.atlas import AtlasOptions
    from inspector.batch.engine.shards import stored_seed

    spec, drawn = request.spec, False
    seed = request.seed if request.seed is not None else spec.seed
    if seed is None:
        stored = stored_seed(request.out)[0] if request.resume else None
        seed, drawn = (random.randrange(2**31) if stored is None else stored), True
    return AtlasOptions(
        spec=dataclasses.replace(spec, seed=seed), layers=list(request.layers),
        out=Path(request.out), top=request.top, batch_size=request.batch_size,
        workers=request.workers, resume=request.resume, shard_size=request.shard_size,
        every=request.every, progress=False, seed_drawn=drawn, warn=warn,
        on_progress=on_progress, cancel=cancel)


class AtlasRunner(QObject):
    """One atlas at a time, on a thread; its progress and result as GUI-thread signals."""

    progress = Signal(str, int, int)  # stage ("atlas", "boxes"), images done, images to do
    finished = Signal(object)  # AtlasResult
    # Emitted on the atlas's thread; delivered on the GUI thread (queued).
    _progressed = Signal(str, int, int)
    _ended = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._progressed.connect(self.progress, Qt.ConnectionType.QueuedConnection)
        self._ended.connect(self._end, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, request: AtlasRequest) -> bool:
        """Start the atlas; False when one is running already."""
        if self._thread is not None:
            return False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(request, self._cancel),
                                        name="atlas", daemon=True)
        self._thread.start()
        return True

    def cancel(self) -> None:
        """Stop after the batch running (the finished shards stay for a resume)."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread (the window closing); True when it has ended."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _work(self, request: AtlasRequest, cancel: threading.Event) -> None:
        messages: list[str] = []
        result = Path(request.out) / "atlas.json"
        before = _modified(result)  # an earlier run's atlas.json is not this run's
        try:
            from inspector.batch.atlas import run_atlas

            options = atlas_options(request, messages.append, self._progressed.emit, cancel)
            code = run_atlas(options, list(request.inputs))
        except Exception as e:  # noqa: BLE001 - a failure the command did not word: say it
            messages.append(f"the atlas failed: {type(e).__name__}: {e}")
            code = 1
        written = _modified(result) not in (None, before)
        status = "cancelled" if cancel.is_set() and not written \
            else "ok" if written and code in (0, 1) else "failed"
        self._ended.emit(AtlasResult(status, Path(request.out), code, tuple(messages)))

    def _end(self, result: AtlasResult) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()  # it emitted its last signal: it is ending
        self.finished.emit(result)


def _modified(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
