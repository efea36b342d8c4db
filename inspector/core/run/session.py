"""The Session: the one object the GUI and the CLI drive.

It owns the model (through the worker thread, which alone touches it), the worker and the
frame channel, and runs the values it is given (core.run.request.RunRequest: the capture, target,
CAM methods, edits of one run); nothing about a run stays here between runs but the outputs
of the last runs that asked to keep them, for comparisons (core.run.kept_outputs). Calls return at
once; results arrive as frames on `session.channel` (and as futures for model loads).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import numpy as np
import torch

from inspector.core import tasks
from inspector.core.edits.interventions import Intervention
from inspector.core.edits.patching import has_patches, resolve_patches
from inspector.core.edits.spec import EditSpecError, check_edits
from inspector.core.explain.attention.find import attention_refusal
from inspector.core.explain.attention.stage import AttentionRun
from inspector.core.explain.cam.layer import find_cam_layer
from inspector.core.hookset import HookError, HookSet, RunCancelled
from inspector.core.inputs.images import ImageLoadError
from inspector.core.models.base import LoadedModel, ModelSpec
from inspector.core.models.files import ModelLoadError
from inspector.core.models.load import load_model, probe_tree
from inspector.core.models.tree import ModuleTree
from inspector.core.records.frames import (
    DivergenceFrame,
    ErrorFrame,
    ModelLoaded,
    RunFinished,
    RunStarted,
)
from inspector.core.run import stages
from inspector.core.run.capture import Capture
from inspector.core.run.channel import FrameChannel
from inspector.core.run.interrupt import LoadCancelled
from inspector.core.run.kept_outputs import KeptRuns
from inspector.core.run.loading import LOAD_CANCEL_WAIT_S, Load, model_notes, wait_done
from inspector.core.run.request import RunRequest
from inspector.core.run.runtime import apply_thread_setting, intra_op_threads, release_freed_memory
from inspector.core.run.worker import InferenceWorker


@dataclass
class RunOutcome:
    """What a run returns through its future, for scripts and the CLI (the UI reads frames)."""

    run_id: int
    status: str
    # (1, classes), on the CPU; detection models: (1, N) the detections' scores, by score;
    # segmentation models: (1, classes, H, W)
    logits: torch.Tensor | None = None
    target: int | None = None  # the class, detection (rank by score) or segmentation class
    cams: dict[tuple[str, str], Any] = field(default_factory=dict)
    # Detection models: core.tasks.detection.Detection per box (model-input pixels), by score.
    detections: tuple = ()
    mask: np.ndarray | None = None  # segmentation models: (H, W) class per model-input pixel
    # method -> signed (C, H, W) float32 attribution at the model input, as core.explain.attributions gives
    attributions: dict[str, Any] = field(default_factory=dict)
    # (method, layer) -> core.explain.metrics.results.MapScores, when the run asked for metrics
    metrics: dict[tuple[str, str], Any] = field(default_factory=dict)
    error: str | None = None
    # The comparison with RunRequest.compare_with's run (also sent on the channel).
    divergence: DivergenceFrame | None = None
    # What the caller should know about a run that went fine: a comparison that could not
    # be made. One line each.
    notes: list[str] = field(default_factory=list)
    # Attention maps on the patch grid (rows, columns) before upsampling or scaling, float32,
    # by method (NPZ grid/METHOD); attention (heads, tokens, tokens) of the first image by
    # attention module (RunRequest.attention.keep; NPZ attention/NAME); the logit lens, one
    # entry per block (RunRequest.attention.lens; summary.json's "logit_lens").
    grids: dict[str, Any] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)
    logit_lens: list[dict] | None = None


class Session:
    """A model on a worker thread, and the runs of it that the caller submits.

    The scripting API, what a script calls (the window and the CLI call the same): load_model
    and cancel_load; submit (frames on `channel`) or run (wait for the RunOutcome), cancel,
    stop_scoring and check_edits; kept_runs, kept_outputs, forget_outputs and the keep_runs bound of the runs
    kept for comparisons; close."""

    def __init__(self, channel: FrameChannel | None = None, capacity: int = 4096) -> None:
        apply_thread_setting()  # INSPECTOR_THREADS, before the worker thread first runs torch
        self.channel = channel or FrameChannel(capacity)
        self.worker = InferenceWorker()
        self.loaded: LoadedModel | None = None
        self.tree: ModuleTree | None = None
        self._run_ids = count(1)
        self._open_runs: set[int] = set()  # submitted, not finished
        self._run_channels: dict[int, FrameChannel] = {}  # runs whose frames go elsewhere
        self._stops: dict[int, threading.Event] = {}  # open runs' stop_scoring requests
        self._cam_layer: tuple[ModuleTree, str] | None = None  # (tree it was found for, layer)
        # Outputs of the last `keep_runs` runs that asked to keep them (core.run.kept_outputs).
        self._kept = KeptRuns()
        self._loads: list[Load] = []  # model loads queued or running (cancel_load)
        self._lock = threading.Lock()

    # -- model -----------------------------------------------------------------------------

    def load_model(self, spec: ModelSpec | str) -> Future:
        """Load on the worker; the previous model stays when this fails or is cancelled
        (cancel_load). The future's exception is the failure (a ModelLoadError for the
        file's fault, LoadCancelled for a cancel), also sent as an ErrorFrame."""
        if isinstance(spec, str):
            spec = ModelSpec(name=spec)
        load = Load(spec)

        def job(cancel: threading.Event) -> LoadedModel | None:
            try:
                with load.region:
                    loaded = load_model(spec)
                    tree = probe_tree(loaded)
            except LoadCancelled:
                load.settle(error=load.cancelled())
                return None
            # SystemExit and KeyboardInterrupt too: a model's forward (the probe) may end
            # with sys.exit(), and this thread never receives a Ctrl+C.
            except (Exception, SystemExit, KeyboardInterrupt) as e:
                if isinstance(e, ModelLoadError):  # the file's fault: no traceback to show
                    message, details = str(e), e.details
                else:
                    message, details = f"{type(e).__name__}: {e}", traceback.format_exc()
                if load.settle(error=e):
                    self.channel.put(ErrorFrame(run_id=None,
                                                message=f"Could not load {spec.what()}: {message}",
                                                details=details, exception=type(e).__name__))
                return None
            cam_layer = find_cam_layer(loaded, tree)
            attention = attention_refusal(loaded, tree)
            with self._lock:
                if load.abandoned:  # cancelled while stuck: the user moved on without it
                    return None
                replaced = self.loaded is not None
                self.loaded, self.tree = loaded, tree
                self._cam_layer = (tree, cam_layer)
            if replaced:  # the old model's memory goes back to the OS, not only to malloc
                release_freed_memory()
            load.settle(result=loaded)
            self.channel.put(
                ModelLoaded(
                    name=loaded.name,
                    description=loaded.description,
                    pretrained=loaded.pretrained,
                    device=str(loaded.device),
                    tree=tree,
                    notes=model_notes(loaded),
                    cam_layer=cam_layer,
                    source=loaded.source,
                    attention=attention,
                )
            )
            return loaded

        with self._lock:
            self._loads.append(load)
        load.job = self.worker.submit(job, tag="load")
        load.future.add_done_callback(lambda _f: self._forget_load(load))
        return load.future

    def cancel_load(self, wait: float = LOAD_CANCEL_WAIT_S) -> bool:
        """Stop the model loads queued or running (the loaded model stays): a queued one is
        withdrawn, a running one is interrupted (core.run.interrupt: a factory's endless loop).
        One stuck in C code that does not return within `wait` seconds is left to finish
        alone: its thread is abandoned (its result is thrown away) and the Session goes on
        with a new worker thread. True when a load was cancelled."""
        with self._lock:
            loads = list(self._loads)
        for load in loads:
            if load.job is not None and load.job.cancel():  # not started yet
                load.settle(error=load.cancelled())
            else:
                load.region.interrupt()
        stuck = [load for load in loads if not wait_done(load.future, wait)]
        if stuck:
            with self._lock:
                for load in stuck:
                    load.abandoned = True
                old, self.worker = self.worker, InferenceWorker()
            # The runs queued behind the stuck load run on the new thread, in their order.
            self.worker.adopt(old.abandon())
            for load in stuck:
                load.settle(error=load.cancelled(
                    " (its code had not returned; it is left to finish on its own)"))
        return bool(loads)

    def _forget_load(self, load: Load) -> None:
        with self._lock:
            if load in self._loads:
                self._loads.remove(load)

    # -- runs --------------------------------------------------------------------------------

    def submit(self, image: Any, **options: Any) -> int:
        """Queue a run of `image` (see RunRequest for the options); returns its run id."""
        run_id, _ = self.submit_request(RunRequest(image=image, **options))
        return run_id

    def submit_request(self, request: RunRequest,
                       channel: FrameChannel | None = None) -> tuple[int, Future]:
        """Queue a run; its frames go to `channel` instead of the session's own when given
        (a run nobody watches: the window saving a run's whole tensors)."""
        run_id = next(self._run_ids)
        stop = threading.Event()
        with self._lock:
            self._open_runs.add(run_id)
            self._stops[run_id] = stop
            if channel is not None:
                self._run_channels[run_id] = channel
            worker = self.worker  # not the one a cancelled load left behind (cancel_load)
        future = worker.submit(lambda cancel: self._run(run_id, request, cancel, stop),
                               tag=run_id)
        return run_id, future

    def run(self, image: Any, timeout: float | None = None, **options: Any) -> RunOutcome:
        """Run and wait (scripts, the CLI). Frames still go to the channel."""
        _, future = self.submit_request(RunRequest(image=image, **options))
        return future.result(timeout)

    def cancel(self, run_id: int | None = None) -> None:
        """Cancel a run (or all): its pending frames are discarded, RunFinished still comes."""
        with self._lock:
            runs = list(self._open_runs) if run_id is None else [run_id]
        for run in runs:
            # At once, so that a consumer draining right now sees none of its frames.
            self._channel_of(run).cancel_run(run)
        self.worker.cancel(run_id)

    def stop_scoring(self, run_id: int) -> bool:
        """Stop a run's faithfulness metrics but not the run (core.run.metrics_stage): the
        maps scored so far keep their scores and the run finishes "ok", its RunFinished
        saying how many maps were scored. False when the run is not open (finished)."""
        with self._lock:
            stop = self._stops.get(run_id)
        if stop is None:
            return False
        stop.set()
        return True

    def check_edits(self, edits: Iterable[Intervention]) -> tuple[Intervention, ...]:
        """The edits checked against the loaded model and completed (core.edits.spec
        .check_edits: the channel dim of channels-last outputs); EditSpecError, one line
        naming the edit, for one that cannot work. Checked before a run, not in it."""
        loaded, tree = self.loaded, self.tree
        if loaded is None or tree is None:
            raise EditSpecError("no model is loaded yet: edits are checked against one")
        return check_edits(edits, tree, loaded.preprocess.crop_size)

    @property
    def keep_runs(self) -> int:
        """How many runs' outputs are kept at once (core.compare.divergence.KEPT_RUNS unless
        set); the window keeps the default, a script comparing more runs raises it."""
        return self._kept.limit

    @keep_runs.setter
    def keep_runs(self, value: int) -> None:
        self._kept.limit = value

    def kept_runs(self) -> tuple[int, ...]:
        """The runs whose outputs are kept (compare_with can name them), least recently
        used first: the first goes when another run keeps its outputs."""
        return self._kept.runs()

    def kept_outputs(self, run_id: int) -> dict[str, torch.Tensor] | None:
        """A kept run's outputs (module -> float32 CPU tensor, forward order; read them, do
        not modify them), or None when that run's are not kept. For scripts: the window
        reads comparisons as DivergenceFrames."""
        return self._kept.outputs(run_id)

    def forget_outputs(self, run_id: int | None = None) -> None:
        """Drop a run's kept outputs (None: every run's)."""
        self._kept.forget(run_id)

    def close(self, timeout: float = 2.0) -> bool:
        """Cancel every run, stop the worker (waiting up to `timeout` seconds) and close the
        channel; False when the worker had not stopped in time."""
        stopped = self.worker.close(timeout)
        self.channel.close()
        return stopped

    def _channel_of(self, run_id: int) -> FrameChannel:
        """Where the frames of `run_id` go (see submit_request)."""
        with self._lock:
            return self._run_channels.get(run_id, self.channel)

    # -- on the worker thread ----------------------------------------------------------------

    def _run(self, run_id: int, req: RunRequest, cancel: threading.Event,
             stop: threading.Event | None = None) -> RunOutcome:
        with intra_op_threads(req.threads):
            return self._run_request(run_id, req, cancel, stop)

    def _run_request(self, run_id: int, req: RunRequest, cancel: threading.Event,
                     stop: threading.Event | None = None) -> RunOutcome:
        """The run's stages (core.run.stages) in turn; a failure is one error frame, and
        RunFinished comes whatever happened."""
        put = self._channel_of(run_id).put
        outcome = RunOutcome(run_id, "ok")
        loaded = self.loaded
        run = stages.InFlight(run_id, req, loaded, put, cancel, outcome, tree=self.tree,
                              stop_scoring=stop)
        if cancel.is_set():
            return self._finish(run, "cancelled")
        if loaded is None:
            put(RunStarted(run_id, run.label, "", "", time=time.time()))
            put(ErrorFrame(run_id, "No model is loaded yet.", exception="ModelLoadError"))
            return self._finish(run, "error")
        began = time.perf_counter()
        try:
            stages.prepare_input(run)
            if has_patches(req.interventions):  # the source image's outputs, before the run
                req = run.request = req.with_(interventions=resolve_patches(
                    loaded, req.interventions, req.stretch, run_id))
        except (ImageLoadError, ValueError, OSError) as e:
            put(RunStarted(run_id, run.label, loaded.name, str(loaded.device), time=time.time()))
            put(ErrorFrame(run_id, str(e), details=str(e), exception=type(e).__name__))
            outcome.error = str(e)
            return self._finish(run, "error")
        put(RunStarted(run_id, run.label, loaded.name, str(loaded.device), run.size,
                       run.display, time.time(), _described(req)))
        refused = (stages.refused_for_task(req, loaded.task)
                   if loaded.task != tasks.CLASSIFICATION else None)
        if refused:
            put(ErrorFrame(run_id, refused, exception="ValueError"))
            outcome.error = refused
            return self._finish(run, "error")
        plan = stages.plan(run, self.default_cam_layer() if req.cams else None)
        recorder = self._kept.recorder(req.keep_outputs, req.compare_with, plan.capture,
                                        self.tree, outcome.notes)
        cap = Capture(loaded.model, plan.capture, put, run_id, req.interventions, cancel,
                      plan.graph_from)
        # Attention on the non-fused path only when the run asks for it; hooked after the
        # Capture's (and so the edits'), to see what flows on.
        attention = AttentionRun(run, plan.attention)
        try:
            with cap, HookSet() as extra, torch.set_grad_enabled(plan.full_backward), attention:
                if recorder is not None:  # after the Capture's hooks: sees the edited output
                    recorder.install(loaded.model, extra)
                cap.eval()
                plan = stages.forward(run, plan)
                if recorder is not None and recorder.reference is not None:
                    modules, rel, cos = recorder.divergence()
                    outcome.divergence = DivergenceFrame(
                        run_id, req.compare_with, modules,
                        np.asarray(rel, np.float64), np.asarray(cos, np.float64))
                    put(outcome.divergence)
                stages.backward(run, plan, cap, attention)
            run.never_called = tuple(cap.never_called())
            stages.explain(run, plan, cap, attention)
        except RunCancelled:
            self._channel_of(run_id).cancel_run(run_id)
            return self._finish(run, "cancelled", cap)
        except Exception as e:
            module = e.module if isinstance(e, HookError) else cap.error_module
            put(stages.error_frame(run_id, e, module))
            outcome.error = str(e)
            if isinstance(e, torch.OutOfMemoryError) and torch.cuda.is_available():
                torch.cuda.empty_cache()
            return self._finish(run, "error", cap)
        finally:
            cap.kept.clear()  # nothing of this run's tensors outlives it
            attention.release()
        if recorder is not None and recorder.keep:
            self._kept.keep(recorder.kept(run_id))
        run.timings["total"] = time.perf_counter() - began
        return self._finish(run, "ok", cap)

    def _finish(self, run: stages.InFlight, status: str, cap: Capture | None = None) -> RunOutcome:
        with self._lock:
            self._open_runs.discard(run.run_id)
            self._stops.pop(run.run_id, None)
            channel = self._run_channels.pop(run.run_id, self.channel)
        # Frames whose statistics an in-place op invalidated (core.stats.deferred) count as
        # dropped, like those the channel drops; the channel adds its own.
        dropped = cap.stats_dropped if cap is not None else 0
        channel.put(RunFinished(run.run_id, status, dict(run.timings), _described(run.request),
                                tuple(run.never_called), dropped,
                                run.scoring_stopped if status == "ok" else None))
        run.outcome.status = status
        return run.outcome

    def default_cam_layer(self) -> str | None:
        """The CAM layer when none is named (see core.explain.cam): worked out once per model
        tree, not on every run (it walks the whole tree)."""
        tree, loaded = self.tree, self.loaded
        if loaded is None or tree is None:
            return None
        cached = self._cam_layer
        if cached is None or cached[0] is not tree:  # a tree set from outside (tests)
            cached = (tree, find_cam_layer(loaded, tree))
            self._cam_layer = cached
        return cached[1]


def _described(req: RunRequest) -> tuple[str, ...]:
    return tuple(i.describe() for i in req.interventions)
