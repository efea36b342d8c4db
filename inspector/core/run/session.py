"""The Session: the one object the GUI and the CLI drive.

It owns the model (through the worker thread, which alone touches it), the worker and the
frame channel, and runs the values it is given (core.run.request.RunRequest: the capture, target,
CAM methods, edits of one run); nothing about a run stays here between runs but the outputs
of the last runs that asked to keep them, for comparisons (core.compare.kept_outputs). Calls return at
once; results arrive as frames on `session.channel` (and as futures for model loads).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import numpy as np
import torch
from PIL import Image

from inspector.core import tasks
from inspector.core.compare.kept_outputs import KeptRuns
from inspector.core.edits.interventions import Intervention
from inspector.core.edits.spec import EditSpecError, check_edits
from inspector.core.explain.cam import logits_of
from inspector.core.explain.catalog import ATTRIBUTION_LAYER, FORWARD_CAMS, cam_method
from inspector.core.inputs.images import ImageLoadError, as_rgb, load_image
from inspector.core.inputs.preprocess import PreparedImage
from inspector.core.models.base import LoadedModel, ModelSpec
from inspector.core.models.files import ModelLoadError
from inspector.core.models.load import load_model, probe_tree
from inspector.core.models.tree import ModuleTree
from inspector.core.run.capture import Capture, HookError, RunCancelled
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.channel import FrameChannel
from inspector.core.run.frames import (
    CamFrame,
    DivergenceFrame,
    ErrorFrame,
    ModelLoaded,
    PredictionFrame,
    RunFinished,
    RunStarted,
)
from inspector.core.run.hookset import HookSet
from inspector.core.run.interrupt import Interruptible, LoadCancelled
from inspector.core.run.kinds import DEFAULT_KINDS
from inspector.core.run.parts import (
    edits_on,
    error_frame,
    find_cam_layer,
    gradient_cam_layers,
    label_of,
    model_notes,
    progress_reporter,
    refused_for_task,
    top_predictions,
)
from inspector.core.run.request import RunRequest
from inspector.core.run.runtime import apply_thread_setting, intra_op_threads, release_freed_memory
from inspector.core.run.worker import InferenceWorker

# How long cancel_load waits for an interrupted load to stop before leaving its thread.
LOAD_CANCEL_WAIT_S = 1.0


class _Load:
    """One model load: its spec, the region of the worker it may be interrupted in, its
    worker job, and the future the caller holds. The caller's future is settled once, by
    whichever comes first: the load's end, or a cancel that gave up on its thread."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.region = Interruptible(LoadCancelled)
        self.job: Future | None = None
        self.future: Future = Future()
        self.future.set_running_or_notify_cancel()
        self.abandoned = False
        self._lock = threading.Lock()

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """Give the caller the result or the error; False when it already had one."""
        with self._lock:
            if self.future.done():
                return False
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)
            return True


def _wait_done(future: Future, timeout: float) -> bool:
    try:
        future.exception(timeout)
    except FutureTimeout:
        return False
    except BaseException:  # noqa: BLE001 - the future holds the load's failure: it is done
        return True
    return True


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
    # Detection models: core.tasks.Detection per box (model-input pixels), by score.
    detections: tuple = ()
    mask: np.ndarray | None = None  # segmentation models: (H, W) class per model-input pixel
    # method -> signed (C, H, W) float32 attribution at the model input, as core.explain.attributions gives
    attributions: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    # The comparison with RunRequest.compare_with's run (also sent on the channel).
    divergence: DivergenceFrame | None = None
    # What the caller should know about a run that went fine: a comparison that could not
    # be made. One line each.
    notes: list[str] = field(default_factory=list)


class Session:
    def __init__(self, channel: FrameChannel | None = None, capacity: int = 4096) -> None:
        apply_thread_setting()  # INSPECTOR_THREADS, before the worker thread first runs torch
        self.channel = channel or FrameChannel(capacity)
        self.worker = InferenceWorker()
        self.loaded: LoadedModel | None = None
        self.tree: ModuleTree | None = None
        self._run_ids = count(1)
        self._open_runs: set[int] = set()  # submitted, not finished
        self._run_channels: dict[int, FrameChannel] = {}  # runs whose frames go elsewhere
        self._cam_layer: tuple[ModuleTree, str] | None = None  # (tree it was found for, layer)
        # Outputs of the last `keep_runs` runs that asked to keep them (core.compare.kept_outputs).
        self._kept = KeptRuns()
        self._loads: list[_Load] = []  # model loads queued or running (cancel_load)
        self._lock = threading.Lock()

    # -- model -----------------------------------------------------------------------------

    def load_model(self, spec: ModelSpec | str) -> Future:
        """Load on the worker; the previous model stays when this fails or is cancelled
        (cancel_load). The future's exception is the failure (a ModelLoadError for the
        file's fault, LoadCancelled for a cancel), also sent as an ErrorFrame."""
        if isinstance(spec, str):
            spec = ModelSpec(name=spec)
        load = _Load(spec)

        def job(cancel: threading.Event) -> LoadedModel | None:
            try:
                with load.region:
                    loaded = load_model(spec)
                    tree = probe_tree(loaded)
            except LoadCancelled:
                load.settle(error=LoadCancelled(f"Loading {spec.what()} was cancelled"))
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
                load.settle(error=LoadCancelled(f"Loading {load.spec.what()} was cancelled"))
            else:
                load.region.interrupt()
        stuck = [load for load in loads if not _wait_done(load.future, wait)]
        if stuck:
            with self._lock:
                for load in stuck:
                    load.abandoned = True
                old, self.worker = self.worker, InferenceWorker()
            # The runs queued behind the stuck load run on the new thread, in their order.
            self.worker.adopt(old.abandon())
            for load in stuck:
                load.settle(error=LoadCancelled(
                    f"Loading {load.spec.what()} was cancelled (its code had not returned; "
                    f"it is left to finish on its own)"))
        return bool(loads)

    def _forget_load(self, load: _Load) -> None:
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
        with self._lock:
            self._open_runs.add(run_id)
            if channel is not None:
                self._run_channels[run_id] = channel
            worker = self.worker  # not the one a cancelled load left behind (cancel_load)
        future = worker.submit(lambda cancel: self._run(run_id, request, cancel), tag=run_id)
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
        """How many runs' outputs are kept at once (core.compare.divergence.KEPT_RUNS unless set)."""
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
        not modify them), or None when that run's are not kept."""
        return self._kept.outputs(run_id)

    def forget_outputs(self, run_id: int | None = None) -> None:
        """Drop a run's kept outputs (None: every run's)."""
        self._kept.forget(run_id)

    def close(self, timeout: float = 2.0) -> bool:
        stopped = self.worker.close(timeout)
        self.channel.close()
        return stopped

    def _channel_of(self, run_id: int) -> FrameChannel:
        """Where the frames of `run_id` go (see submit_request)."""
        with self._lock:
            return self._run_channels.get(run_id, self.channel)

    # -- on the worker thread ----------------------------------------------------------------

    def _run(self, run_id: int, req: RunRequest, cancel: threading.Event) -> RunOutcome:
        with intra_op_threads(req.threads):
            return self._run_request(run_id, req, cancel)

    def _run_request(self, run_id: int, req: RunRequest, cancel: threading.Event) -> RunOutcome:
        put = self._channel_of(run_id).put
        timings: dict[str, float] = {}
        outcome = RunOutcome(run_id, "ok")
        loaded = self.loaded
        label = req.label or label_of(req.image)
        described = tuple(i.describe() for i in req.interventions)
        never_called: tuple[str, ...] = ()
        if cancel.is_set():
            return self._finish(run_id, "cancelled", outcome, timings, described, never_called)
        if loaded is None:
            put(RunStarted(run_id, label, "", "", time=time.time()))
            put(ErrorFrame(run_id, "No model is loaded yet.", exception="ModelLoadError"))
            return self._finish(run_id, "error", outcome, timings, described, never_called)
        model, device = loaded.model, loaded.device
        spec = req.capture if req.capture is not None else CaptureSpec.leaves(model, DEFAULT_KINDS)
        t0 = time.perf_counter()
        try:
            x, size, display = self._prepare(req.image, loaded, req.stretch)
        except (ImageLoadError, ValueError, OSError) as e:
            put(RunStarted(run_id, label, loaded.name, str(device), time=time.time()))
            put(ErrorFrame(run_id, str(e), details=str(e), exception=type(e).__name__))
            outcome.error = str(e)
            return self._finish(run_id, "error", outcome, timings, described, never_called)
        timings["preprocess"] = time.perf_counter() - t0
        put(RunStarted(run_id, label, loaded.name, str(device), size, display, time.time(),
                       described))

        if loaded.task != tasks.CLASSIFICATION:
            refused = refused_for_task(req, loaded.task)
            if refused:
                put(ErrorFrame(run_id, refused, exception="ValueError"))
                outcome.error = refused
                return self._finish(run_id, "error", outcome, timings, described, never_called)
        cams, spec = self._cam_plan(req.cams, spec)
        # A backward down to the input when gradients are asked for (or an edit changes
        # them: it may sit anywhere on the way); else only as far as the layers of the
        # gradient CAMs, whose outputs start the graph (Capture's graph_from): a video's
        # live run keeps Grad-CAM for about the price of a forward.
        full_backward = (req.backward or spec.captures_gradients
                         or any(i.edits_gradient for i in req.interventions))
        graph_from = frozenset() if full_backward else gradient_cam_layers(cams)
        need_grad = full_backward or bool(graph_from)
        recorder = self._kept.recorder(req.keep_outputs, req.compare_with, spec, self.tree,
                                        outcome.notes)
        cap = Capture(model, spec, put, run_id, req.interventions, cancel, graph_from)
        try:
            with cap, HookSet() as extra, torch.set_grad_enabled(full_backward):
                if recorder is not None:  # after the Capture's hooks: sees the edited output
                    recorder.install(model, extra)
                cap.eval()
                t = time.perf_counter()
                x = x.to(device)
                if full_backward:
                    x.requires_grad_(True)
                if loaded.task == tasks.CLASSIFICATION:
                    logits = logits_of(model(x))
                    timings["forward"] = time.perf_counter() - t
                    preds, target = top_predictions(logits, loaded, req)
                    score = logits[0, target] if need_grad else None
                    explained = need_grad or bool(cams)
                    put(PredictionFrame(run_id, preds, target if explained else None))
                    outcome.logits = logits.detach().to("cpu", copy=True)
                else:
                    # Detection and segmentation: core.tasks calls the model and reads
                    # its output (a list of dicts, an OrderedDict of maps).
                    read = tasks.read_output(loaded.task, tasks.forward(loaded.task, model, x),
                                             req.target, loaded.categories, req.topk,
                                             want_score=need_grad)
                    timings["forward"] = time.perf_counter() - t
                    target, score = read.target, read.score
                    if need_grad and score is None:
                        # Nothing detected and no detection asked for: the run shows the
                        # activations, without a gradient or a CAM (not an error).
                        need_grad = full_backward = False
                        target, cams = None, ()
                        outcome.notes.append("nothing detected: no gradient and no CAM")
                    threshold = (tasks.detection.score_threshold(model)
                                 if loaded.task == tasks.DETECTION else None)
                    put(PredictionFrame(run_id, read.preds,
                                        target if need_grad or cams else None,
                                        loaded.task, read.detections, read.mask,
                                        read.legend, threshold))
                    outcome.logits, outcome.detections = read.logits, read.detections
                    outcome.mask = read.mask
                outcome.target = target
                if recorder is not None and recorder.reference is not None:
                    modules, rel, cos = recorder.divergence()
                    outcome.divergence = DivergenceFrame(
                        run_id, req.compare_with, modules,
                        np.asarray(rel, np.float64), np.asarray(cos, np.float64))
                    put(outcome.divergence)
                if full_backward:
                    t = time.perf_counter()
                    # Gradients w.r.t. the input only: every hooked activation lies on the way,
                    # so its tensor hooks fire, and autograd skips the parameter gradients.
                    torch.autograd.grad(score, x)
                    timings["backward"] = time.perf_counter() - t
                elif need_grad and cap.graph_roots and score.requires_grad:
                    # Down to the CAM layers only. Without a root (the layer did not run) or
                    # a score that depends on one, the CAM says why below.
                    t = time.perf_counter()
                    torch.autograd.grad(score, cap.graph_roots, allow_unused=True)
                    timings["backward"] = time.perf_counter() - t
            never_called = tuple(cap.never_called())
            # Score-CAM's masked forwards and the input attributions run the model again:
            # with this run's edits on, so that they explain the model the run showed.
            # (Only then: a Capture walks the model, and a gradient CAM reads what this
            # run's own hooks kept.)
            reruns = bool(req.attributions) or any(
                cam_method(method) in FORWARD_CAMS for method, _ in cams)
            with edits_on(model, run_id, req.interventions if reruns else (), cancel):
                if cams:
                    t = time.perf_counter()
                    self._cams(run_id, cams, cap, target, x.detach(), cancel, outcome)
                    timings["cam"] = time.perf_counter() - t
                if req.attributions:
                    t = time.perf_counter()
                    self._attributions(run_id, req, model, target, x.detach(), cancel, outcome)
                    timings["attributions"] = time.perf_counter() - t
        except RunCancelled:
            self._channel_of(run_id).cancel_run(run_id)
            return self._finish(
                run_id, "cancelled", outcome, timings, described, never_called, cap
            )
        except Exception as e:
            module = e.module if isinstance(e, HookError) else cap.error_module
            put(error_frame(run_id, e, module))
            outcome.error = str(e)
            if isinstance(e, torch.OutOfMemoryError) and torch.cuda.is_available():
                torch.cuda.empty_cache()
            return self._finish(run_id, "error", outcome, timings, described, never_called, cap)
        finally:
            cap.kept.clear()  # nothing of this run's tensors outlives it
        if recorder is not None and recorder.keep:
            self._kept.keep(recorder.kept(run_id))
        timings["total"] = time.perf_counter() - t0
        return self._finish(run_id, "ok", outcome, timings, described, never_called, cap)

    def _finish(
        self, run_id, status, outcome, timings, described, never_called, cap=None
    ) -> RunOutcome:
        with self._lock:
            self._open_runs.discard(run_id)
            channel = self._run_channels.pop(run_id, self.channel)
        # Frames whose statistics an in-place op invalidated (core.stats.deferred) count as
        # dropped, like those the channel drops; the channel adds its own.
        dropped = cap.stats_dropped if cap is not None else 0
        channel.put(
            RunFinished(run_id, status, dict(timings), described, tuple(never_called), dropped)
        )
        outcome.status = status
        return outcome

    def _prepare(self, image, loaded: LoadedModel, stretch: bool = False):
        if isinstance(image, torch.Tensor):
            x = image if image.ndim == 4 else image[None]
            # A copy: the run sets requires_grad and edits may replace it; the caller's
            # tensor stays as it was.
            x = x.detach().to(torch.float32, copy=True)
            return x, None, loaded.preprocess.to_display(x[0].cpu())
        if isinstance(image, PreparedImage):
            if image.preprocess == loaded.preprocess:
                # A copy, as for a tensor: a paused video frame runs again in full.
                return image.x[None].clone(), image.size, image.display
            image = image.image  # made for another model's input
        if isinstance(image, Image.Image):
            img = image if image.mode == "RGB" else as_rgb(image, stretch=stretch)
        else:
            img = load_image(image, stretch=stretch)
        prepared = loaded.preprocess.prepare(img)
        return prepared.x[None], img.size, prepared.display

    def default_cam_layer(self) -> str | None:
        """The CAM layer when none is named (see core.explain.cam): worked out once per model tree,
        not on every run (it walks the whole tree)."""
        tree, loaded = self.tree, self.loaded
        if loaded is None or tree is None:
            return None
        cached = self._cam_layer
        if cached is None or cached[0] is not tree:  # a tree set from outside (tests)
            cached = (tree, find_cam_layer(loaded, tree))
            self._cam_layer = cached
        return cached[1]

    def _cam_plan(self, wanted, spec: CaptureSpec) -> tuple[tuple, CaptureSpec]:
        """The CAMs to compute, with the default layer filled in, and the capture that keeps
        their layers' activations and gradients."""
        default_layer = self.default_cam_layer() if wanted else None
        cams = tuple((method, layer or default_layer) for method, layer in wanted)
        cam_layers = {layer for _, layer in cams} - {None}
        if cam_layers:
            spec = spec.with_(keep=spec.keep | cam_layers)
        return cams, spec

    def _cams(self, run_id, cams, cap: Capture, target, x, cancel, outcome: RunOutcome) -> None:
        from inspector.core.explain.cam import cam_from_capture
        from inspector.core.explain.catalog import CAM_METHODS

        for method, layer in cams:
            if layer is None:
                raise ValueError("No layer of this model has an output a CAM can be computed "
                                 "from: choose a CAM layer")
            # Only Score-CAM calls it (once per batch of masked forwards): the one CAM step
            # that can take long enough to be worth reporting.
            progress = progress_reporter(self._channel_of(run_id).put, run_id,
                                          CAM_METHODS[cam_method(method)].title, cancel)
            cam = cam_from_capture(
                method, cap, layer, tuple(x.shape[-2:]), model_input=x, target=target,
                progress=progress,
            )
            outcome.cams[(method, layer)] = cam
            self._channel_of(run_id).put(CamFrame(run_id, method, layer, target, cam))

    def _attributions(self, run_id, req: RunRequest, model, target, x, cancel, outcome) -> None:
        """Input attributions, after the capture's hooks are gone: the signed arrays go to the
        outcome, and a [0, 1] map of each (as saliency.display_map shows that method) to the
        views as a CamFrame at the layer ATTRIBUTION_LAYER."""
        from inspector.core.explain.attributions import attribute, display_map
        from inspector.core.explain.catalog import ATTRIBUTION_METHODS, attribution_method

        for method in req.attributions:
            name = attribution_method(method)
            progress = progress_reporter(self._channel_of(run_id).put, run_id,
                                          ATTRIBUTION_METHODS[name].title, cancel)
            signed = attribute(model, x, target, name, req.attribution_options,
                               progress=progress)[0]  # x is a batch of one
            outcome.attributions[name] = signed
            shown = display_map(name, torch.from_numpy(signed)[None])[0]
            self._channel_of(run_id).put(CamFrame(run_id, name, ATTRIBUTION_LAYER, target, shown))
