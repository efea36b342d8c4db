"""What the runs shown so far produced: the latest frame per key, the run ids, the forward
order. The UI's frame router puts frames here; the module tree and the views read what they
show and subscribe to the keys they show (napari's split of model and view), so that no view
keeps its own cache of frames or works out on its own which run is the current one.

A key says what a frame is about: ("tensor", module, kind, call, path) for activations and
gradients, ("cam", method, layer), ("predictions",). Frames of the current run and of the
pinned run (run A, for comparisons) are kept, and of the run before the current one until
the current run has a frame for the same view (so that a view keeps its picture between
runs instead of blanking). Control frames (RunStarted, RunFinished) update the run ids.

No Qt and no torch: the store is plain Python, tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .frames import CamFrame, ModelLoaded, PredictionFrame, RunFinished, RunStarted, TensorFrame

Key = tuple
Listener = Callable[[Any], None]


def key_of(frame: Any) -> Key | None:
    """The key a data frame is stored under; None for control frames."""
    if isinstance(frame, TensorFrame):
        return ("tensor", frame.module, frame.kind, frame.call, frame.path)
    if isinstance(frame, CamFrame):
        return ("cam", frame.method, frame.layer)
    if isinstance(frame, PredictionFrame):
        return ("predictions",)
    return None


@dataclass
class Subscription:
    """Calls `listener(frame)` for each stored frame whose key `wants`; `modules` narrows
    tensor frames to those modules (None: every module), and can be changed at any time."""

    listener: Listener
    kinds: frozenset[str] | None = None  # tensor kinds, "cam", "predictions"; None: all
    modules: set[str] | None = None
    active: bool = True

    def wants(self, key: Key) -> bool:
        what = key[2] if key[0] == "tensor" else key[0]
        if self.kinds is not None and what not in self.kinds:
            return False
        return key[0] != "tensor" or self.modules is None or key[1] in self.modules

    def cancel(self) -> None:
        self.active = False


@dataclass
class _Run:
    frames: dict[Key, Any] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)  # module -> first forward position
    status: str | None = None  # RunFinished.status once finished


class RunStore:
    def __init__(self, keep_runs: int = 4) -> None:
        self.keep_runs = keep_runs  # besides the pinned run
        self._runs: dict[int, _Run] = {}
        self.current_run: int | None = None  # the newest run started
        self.pinned_run: int | None = None  # run A, kept for comparisons
        self._subs: list[Subscription] = []

    # -- writing (the frame router) -----------------------------------------------------------
    def put(self, frame: Any) -> None:
        if isinstance(frame, ModelLoaded):
            self.clear()
            return
        run_id = getattr(frame, "run_id", None)
        if run_id is None:
            return
        if isinstance(frame, RunStarted):
            self.current_run = max(run_id, self.current_run or 0)
        run = self._run(run_id)
        if isinstance(frame, RunFinished):
            run.status = frame.status
            return
        key = key_of(frame)
        if key is None:
            return
        if key[0] == "tensor" and frame.kind in ("input", "output"):
            run.order.setdefault(frame.module, len(run.order))
        run.frames[key] = frame
        for sub in list(self._subs):
            if sub.active and sub.wants(key):
                sub.listener(frame)

    def clear(self) -> None:
        """A new model: every key named the old one's modules."""
        self._runs.clear()
        self.current_run = self.pinned_run = None

    def pin(self, run_id: int | None) -> None:
        """Keep `run_id` (run A) whatever runs come after it; None lets it go."""
        self.pinned_run = run_id

    # -- reading (the views) ------------------------------------------------------------------
    def subscribe(self, listener: Listener, kinds: Iterable[str] | None = None,
                  modules: Iterable[str] | None = None) -> Subscription:
        sub = Subscription(listener, None if kinds is None else frozenset(kinds),
                           None if modules is None else set(modules))
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.cancel()
        self._subs = [s for s in self._subs if s is not sub]

    def runs(self) -> list[int]:
        return sorted(self._runs)

    def status(self, run_id: int) -> str | None:
        run = self._runs.get(run_id)
        return run.status if run is not None else None

    def latest_run(self, kinds: Iterable[str]) -> int | None:
        """The newest run with a frame of one of `kinds` (tensor kinds, "cam", ...)."""
        wanted = Subscription(lambda _f: None, frozenset(kinds))
        for run_id in sorted(self._runs, reverse=True):
            if any(wanted.wants(key) for key in self._runs[run_id].frames):
                return run_id
        return None

    def get(self, key: Key, run_id: int | None = None) -> Any:
        """The frame stored under `key` in `run_id` (default: the current run)."""
        run = self._runs.get(self.current_run if run_id is None else run_id)
        return run.frames.get(key) if run is not None else None

    def tensors(self, module: str, kinds: Iterable[str], run_id: int | None) -> dict:
        """(kind, call, path) -> TensorFrame of `module` in `run_id`."""
        run = self._runs.get(run_id) if run_id is not None else None
        if run is None:
            return {}
        kinds = frozenset(kinds)
        return {key[2:]: f for key, f in run.frames.items()
                if key[0] == "tensor" and key[1] == module and key[2] in kinds}

    def of_kind(self, kinds: Iterable[str], run_id: int | None) -> dict[Key, Any]:
        """Every frame of `run_id` of these kinds, in arrival order."""
        run = self._runs.get(run_id) if run_id is not None else None
        if run is None:
            return {}
        wanted = Subscription(lambda _f: None, frozenset(kinds))
        return {key: f for key, f in run.frames.items() if wanted.wants(key)}

    def forward_order(self, run_id: int | None = None) -> dict[str, int]:
        """Module -> its first position in the forward pass of `run_id` (default: current)."""
        run = self._runs.get(self.current_run if run_id is None else run_id)
        return dict(run.order) if run is not None else {}

    # -- internals ------------------------------------------------------------------------------
    def _run(self, run_id: int) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            kept = [r for r in sorted(self._runs) if r != self.pinned_run]
            for old in kept[:-self.keep_runs]:
                del self._runs[old]
        return run
