"""What the runs shown so far produced: the latest frame per key, the run ids, the forward
order. The UI's frame router puts frames here; the module tree and the views subscribe to
the keys they show and read what they show from here (napari's split of model and view), so
that no view keeps its own cache of frames or works out on its own which run is current.

A key says what a frame is about: ("tensor", module, kind, call, path) for activations and
gradients, ("cam", method, layer), ("predictions",), ("divergence",), ("attention",),
("lens",) and ("metrics", method, layer). The last `keep_runs`
runs are kept, and, whatever comes after them, the pinned run (run A, for comparisons), the
baseline (the unedited run of the edited ones), and, while a stream plays (`streaming`), an
older run while it holds the newest frame of a tensor key that no newer run has: each frame
is then a live run of the selected module alone, and the last full run (the frame before
play, or the paused one) stays, so that the module tree keeps every other module's
statistics from it (shown as older: its frames' run is not the newest) until a full run has
them again. Between still images that is not done: a gradient of an image long gone is not
the one to show when the gradients were turned off since. The
baseline is never the current run nor the run a view shows: views read it, and run A, as
`reference_run`, the run the current one is compared with (before/after, A/B). A view
shows, for the kinds it shows, the newest run that produced such frames or failed
(`shown_run`): it keeps the previous run's picture until the new run's first frame of its
kinds arrives, and shows nothing (but says so) when a newer run failed before producing
any. Once the newest run is cancelled (Esc), the views go back to the last run before it
that was not (`shown`), with the unedited run that one was compared with: a cancelled run's
parts (its predictions without its CAM, a new baseline's numbers) never mix with it.

Questions about runs are answered here once: a frame of a run older than the newest one is
late (from a cancelled run) and is dropped, unless it belongs to the baseline or run A; a
new model empties the store, but for run A when the new model has the same modules (other
weights: A/B across weights files). Subscribers are told about the frames they want, each
RunStarted and RunFinished (so every view learns of a failed run exactly once) and each
clearing (core.run.subscriptions: how they are queued and delivered).

No Qt and no torch: the store is plain Python, tested on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspector.core.records.frames import (
    AttentionFrame,
    CamFrame,
    DivergenceFrame,
    LensFrame,
    MetricsFrame,
    ModelLoaded,
    PredictionFrame,
    RunFinished,
    RunStarted,
    TensorFrame,
)
from inspector.core.run.subscriptions import Key, Subscribers, what_of

PartKey = tuple[str, int, str]  # (kind, call, path) of one module's tensor


def key_of(frame: Any) -> Key | None:
    """The key a data frame is stored under; None for control frames."""
    if isinstance(frame, TensorFrame):
        return ("tensor", frame.module, frame.kind, frame.call, frame.path)
    if isinstance(frame, CamFrame):
        return ("cam", frame.method, frame.layer)
    if isinstance(frame, PredictionFrame):
        return ("predictions",)
    if isinstance(frame, DivergenceFrame):
        return ("divergence",)
    if isinstance(frame, AttentionFrame):
        return ("attention",)
    if isinstance(frame, LensFrame):
        return ("lens",)
    if isinstance(frame, MetricsFrame):
        return ("metrics", frame.method, frame.layer)
    return None


def _architecture(tree: Any) -> tuple | None:
    """(name, type) of each module of a loaded model's tree (core.models.tree.ModuleTree); None
    when there is no tree to tell."""
    modules = getattr(tree, "modules", None)
    if not isinstance(modules, dict):
        return None
    return tuple((name, getattr(info, "type_name", "")) for name, info in modules.items())


@dataclass
class _Run:
    frames: dict[Key, Any] = field(default_factory=dict)
    modules: dict[str, dict[PartKey, TensorFrame]] = field(default_factory=dict)
    whats: Counter = field(default_factory=Counter)  # what_of(key) -> frames of it
    order: dict[str, int] = field(default_factory=dict)  # module -> first forward position
    started: RunStarted | None = None
    status: str | None = None  # RunFinished.status once finished
    baseline: int | None = None  # an edited run's unedited run (the baseline when it started)


class RunStore(Subscribers):
    """The runs, and (as Subscribers) the views told about them: see the module docstring."""

    def __init__(self, keep_runs: int = 4) -> None:
        super().__init__()
        self.keep_runs = keep_runs  # besides the pinned run
        self._runs: dict[int, _Run] = {}
        self.current_run: int | None = None  # the newest run seen
        self.pinned_run: int | None = None  # run A, kept for comparisons
        self.baseline_run: int | None = None  # the unedited run of the edited ones
        # A video or the camera plays: keep older runs for their keys (see the docstring).
        self.streaming = False
        # Run A kept over the load of the same architecture (other weights): a reference
        # only, never shown as a run of the model now loaded. The architecture is the
        # loaded tree's (name, type) per module.
        self._carried: int | None = None
        self._architecture: tuple | None = None

    # -- writing (the frame router) -----------------------------------------------------------
    def put(self, frame: Any) -> None:
        if isinstance(frame, ModelLoaded):
            # Other weights for the same modules (A/B across weights files): run A stays.
            architecture = _architecture(frame.tree)
            same = architecture is not None and architecture == self._architecture
            self._architecture = architecture
            self.clear(keep_pinned=same)
            return
        run_id = getattr(frame, "run_id", None)
        key = key_of(frame)
        control = isinstance(frame, (RunStarted, RunFinished))
        if run_id is None or not (control or key is not None):
            return  # errors and progress are for the status bar, not the views
        if run_id in (self.baseline_run, self._carried):
            pass  # the unedited run, or A of other weights: kept, never made current
        elif key is not None and self.current_run is not None and run_id < self.current_run:
            if run_id != self.pinned_run:
                return  # late data of a run that a newer one replaced
            # Run A's last frames after B started: kept, since A is what B is compared with.
        else:
            self.current_run = max(run_id, self.current_run or 0)
        run = self._run(run_id)
        if control:
            if isinstance(frame, RunStarted):
                run.started = frame
                if frame.edits and run_id != self.baseline_run:
                    run.baseline = self.baseline_run  # before/after again if it is shown later
            else:
                run.status = frame.status
                self._prune()  # its keys may be all an older run was kept for
            self._queue(lambda sub: sub.listens("run"), "run", (frame,))
        else:
            self._keep(run, key, frame)
            self._queue(lambda sub: sub.wants(key), "frame", (frame,))
        if not self.deferred:
            self.notify()

    def clear(self, keep_pinned: bool = False) -> None:
        """A new model: every key named the old one's modules. With `keep_pinned` (the new
        model has the same modules), run A stays, as a reference only."""
        pinned = self.pinned_run if keep_pinned and self.pinned_run in self._runs else None
        self._runs = {pinned: self._runs[pinned]} if pinned is not None else {}
        self.current_run = self.baseline_run = None
        self.pinned_run = self._carried = pinned
        self._queue(lambda sub: sub.listens("clear"), "clear", ())
        if not self.deferred:
            self.notify()

    def pin(self, run_id: int | None) -> None:
        """Keep `run_id` (run A) whatever runs come after it; None lets it go."""
        self.pinned_run = run_id
        if self._carried is not None and self._carried != run_id:
            self._runs.pop(self._carried, None)  # of another model's weights: nothing shows it
            self._carried = None

    def set_baseline(self, run_id: int | None) -> None:
        """`run_id` is the unedited run that edited runs are compared with (before/after):
        kept whatever comes after it, and its frames never make it the current run, so it
        may run before or after the edited run it belongs to. None lets it go."""
        self.baseline_run = run_id

    def edited(self, run_id: int | None = None) -> bool:
        """Whether `run_id` (default: the run shown, `shown`) ran with edits."""
        started = self.started(self.shown if run_id is None else run_id)
        return bool(started is not None and started.edits)

    @property
    def cancelled(self) -> bool:
        """The newest run was cancelled: the views show the last run before it (`shown`)."""
        return self.status(self.current_run) == "cancelled"

    @property
    def shown(self) -> int | None:
        """The run the views show as the run: the current run, or once it was cancelled,
        the newest run before it that was not (the last complete or failed run; None when
        there is none). A cancelled run has only part of its frames: showing them would
        mix its numbers with those of the run before it."""
        if not self.cancelled:
            return self.current_run
        hidden = (self.baseline_run, self._carried)
        return next((r for r in sorted(self._runs, reverse=True)
                     if r not in hidden and self._runs[r].status != "cancelled"), None)

    @property
    def shown_baseline(self) -> int | None:
        """The unedited run that the run shown was compared with: the baseline, or after a
        cancel (a new baseline was cancelled too) the one the shown run had."""
        shown = self.shown
        if shown == self.current_run or shown not in self._runs:
            return self.baseline_run
        return self._runs[shown].baseline

    @property
    def reference_run(self) -> int | None:
        """What the run shown is compared with: run A when one is pinned (and the run shown
        is not A itself), else the unedited run when the run shown is edited; None when
        there is nothing to compare."""
        shown = self.shown
        pinned = self.pinned_run
        if self._usable(pinned) and pinned != shown:
            return pinned
        baseline = self.shown_baseline
        if self._usable(baseline) and baseline != shown and self.edited():
            return baseline
        return None

    def _usable(self, run_id: int | None) -> bool:
        """Kept, and finished well or still arriving: a cancelled or failed run has only
        part of its frames, and nothing is compared with it."""
        run = self._runs.get(run_id) if run_id is not None else None
        return run is not None and run.status in (None, "ok")

    def reference_names(self) -> tuple[str, str] | None:
        """What the views call the reference and the current run: ("before", "after") for
        the unedited and the edited run, ("A", "B") for a pinned run and a later one; None
        when there is nothing to compare."""
        reference = self.reference_run
        if reference is None:
            return None
        return ("A", "B") if reference == self.pinned_run else ("before", "after")

    # -- reading (the views) ------------------------------------------------------------------
    def runs(self) -> list[int]:
        return sorted(self._runs)

    def status(self, run_id: int | None) -> str | None:
        """"ok", "error" or "cancelled" once `run_id` finished; None before."""
        run = self._runs.get(run_id) if run_id is not None else None
        return run.status if run is not None else None

    def started(self, run_id: int | None) -> RunStarted | None:
        """The RunStarted of `run_id` (what was run, the image it saw)."""
        run = self._runs.get(run_id) if run_id is not None else None
        return run.started if run is not None else None

    @property
    def running(self) -> bool:
        """The newest run has started and not finished."""
        return self.started(self.current_run) is not None and self.status(self.current_run) is None

    def last_finished(self) -> int | None:
        """The newest run that finished, whatever its status (not the unedited run kept
        beside the current one: see `_newest_first`)."""
        return next((r for r in self._newest_first() if self._runs[r].status), None)

    def latest_run(self, kinds: Iterable[str]) -> int | None:
        """The newest run with a frame of one of `kinds` (tensor kinds, "cam", ...)."""
        kinds = frozenset(kinds)
        for run_id in self._newest_first():
            if any(self._runs[run_id].whats[k] for k in kinds):
                return run_id
        return None

    def shown_run(self, kinds: Iterable[str]) -> int | None:
        """The run a view of `kinds` shows: the newest with such frames, or that failed
        (then the view shows none of an earlier run's: it may have been another image)."""
        kinds = frozenset(kinds)
        for run_id in self._newest_first():
            run = self._runs[run_id]
            if run.status == "error" or any(run.whats[k] for k in kinds):
                return run_id
        return None

    def failed(self, kinds: Iterable[str]) -> bool:
        """The run a view of `kinds` shows failed."""
        return self.status(self.shown_run(kinds)) == "error"

    def get(self, key: Key, run_id: int | None = None) -> Any:
        """The frame stored under `key` in `run_id` (default: the current run)."""
        run = self._runs.get(self.current_run if run_id is None else run_id)
        return run.frames.get(key) if run is not None else None

    def tensors(self, module: str, kinds: Iterable[str], run_id: int | None) -> dict:
        """(kind, call, path) -> TensorFrame of `module` in `run_id`, in arrival order."""
        run = self._runs.get(run_id) if run_id is not None else None
        if run is None:
            return {}
        kinds = frozenset(kinds)
        return {part: f for part, f in run.modules.get(module, {}).items() if part[0] in kinds}

    def latest_tensor(self, module: str, kind: str, call: int = 0) -> TensorFrame | None:
        """The newest frame of `module`'s `kind` at `call`, of any run kept; of a tuple
        output, its first tensor."""
        for run_id in self._newest_first():
            for (k, c, _path), frame in self._runs[run_id].modules.get(module, {}).items():
                if k == kind and c == call:
                    return frame
        return None

    def of_kind(self, kinds: Iterable[str], run_id: int | None) -> dict[Key, Any]:
        """Every frame of `run_id` of these kinds, in arrival order."""
        run = self._runs.get(run_id) if run_id is not None else None
        if run is None:
            return {}
        kinds = frozenset(kinds)
        return {key: f for key, f in run.frames.items() if what_of(key) in kinds}

    def forward_order(self, run_id: int | None = None) -> dict[str, int]:
        """Module -> its first position in the forward pass of `run_id` (default: current)."""
        run = self._runs.get(self.current_run if run_id is None else run_id)
        return dict(run.order) if run is not None else {}

    # -- internals ------------------------------------------------------------------------------
    def _newest_first(self) -> list[int]:
        """The runs a view may show, newest first: not the unedited run while another run is
        current (it may be newer than the edited run it belongs to, yet views show the
        edited run and read the unedited one only as the reference), nor run A of the
        weights loaded before these."""
        baseline = self.baseline_run if self.baseline_run != self.current_run else None
        hidden = (baseline, self._carried)
        runs = [r for r in sorted(self._runs, reverse=True) if r not in hidden]
        if not self.cancelled:
            return runs
        # The newest run was cancelled: none of the cancelled runs' parts, and not the
        # unedited run of the run now shown (its reference).
        hidden = (self.shown_baseline,)
        return [r for r in runs if r not in hidden and self._runs[r].status != "cancelled"]

    def _run(self, run_id: int) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            self._prune()
        return run

    def _prune(self) -> None:
        """Drop the runs before the last `keep_runs` (run A and the baseline aside); while a
        stream plays, only those that hold no tensor key of their own: every key they have,
        a newer run shown has too. One that does is the newest word on those tensors
        (latest_tensor), and stays."""
        fixed = (self.pinned_run, self.baseline_run)
        kept = [r for r in sorted(self._runs) if r not in fixed]
        old = set(kept[:-self.keep_runs])
        if not old:
            return
        if not self.streaming:
            for run_id in old:
                del self._runs[run_id]
            return
        shown = set(self._newest_first())
        covered: set[Key] = set()  # the tensor keys of the newer runs shown
        for run_id in sorted(self._runs, reverse=True):
            run = self._runs[run_id]
            keys = {key for key in run.frames if key[0] == "tensor"}
            if run_id in old and keys <= covered:
                del self._runs[run_id]
            elif run_id in shown:
                covered |= keys

    @staticmethod
    def _keep(run: _Run, key: Key, frame: Any) -> None:
        if key not in run.frames:
            run.whats[what_of(key)] += 1
        run.frames[key] = frame
        if key[0] == "tensor":
            run.modules.setdefault(frame.module, {})[key[2:]] = frame
            if frame.kind in ("input", "output"):
                run.order.setdefault(frame.module, len(run.order))
