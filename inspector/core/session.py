"""The Session: the one object the GUI and the CLI drive.

It owns the model (through the worker thread, which alone touches it), the worker and the
frame channel, and runs the values it is given (core.run.RunRequest: the capture, target,
CAM methods, edits of one run); nothing about a run stays here between runs but the outputs
of the last runs that asked to keep them, for comparisons (core.compare). Calls return at
once; results arrive as frames on `session.channel` (and as futures for model loads).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from . import fused_stats, tasks
from .cam import logits_of
from .channel import FrameChannel
from .compare import KEPT_RUNS, KeptOutputs, OutputRecorder
from .edit_spec import EditSpecError, check_edits
from .frames import (
    CamFrame,
    DivergenceFrame,
    ErrorFrame,
    ModelLoaded,
    Prediction,
    PredictionFrame,
    ProgressFrame,
    RunFinished,
    RunStarted,
)
from .hooks import Capture, CaptureSpec, HookError, RunCancelled
from .hookset import HookSet
from .images import ImageLoadError, as_rgb, load_image
from .interventions import Intervention
from .methods import ATTRIBUTION_LAYER, DEFAULT_KINDS
from .models import LoadedModel, ModelLoadError, ModelSpec, load_model, probe_tree
from .run import RunRequest
from .runtime import apply_thread_setting
from .tree import OUTPUT_MODIFIED_INPLACE, ModuleTree
from .worker import InferenceWorker

PROGRESS_INTERVAL_S = 0.1  # progress frames of a step: at most this often, and the last one


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
    # method -> signed (C, H, W) float32 attribution at the model input, as core.saliency gives
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
        # Outputs of the last `keep_runs` runs that asked to keep them (keep_outputs), least
        # recently used first: a run compared with counts as used. They outlive a model load
        # (run B may be another weights file), and are float32 CPU tensors: one kept run of
        # resnet18 at 224 x 224, every leaf, is about 26 MB.
        self.keep_runs = KEPT_RUNS
        self._kept: OrderedDict[int, KeptOutputs] = OrderedDict()
        self._lock = threading.Lock()

    # -- model -----------------------------------------------------------------------------

    def load_model(self, spec: ModelSpec | str) -> Future:
        """Load on the worker; the previous model stays when this fails."""
        if isinstance(spec, str):
            spec = ModelSpec(name=spec)

        def job(cancel: threading.Event) -> LoadedModel:
            try:
                loaded = load_model(spec)
                tree = probe_tree(loaded)
            except Exception as e:
                if isinstance(e, ModelLoadError):  # the file's fault: no traceback to show
                    message, details = str(e), e.details
                else:
                    message, details = f"{type(e).__name__}: {e}", traceback.format_exc()
                self.channel.put(
                    ErrorFrame(
                        run_id=None,
                        message=f"Could not load {spec.what()}: {message}",
                        details=details,
                        exception=type(e).__name__,
                    )
                )
                raise
            cam_layer = _default_cam_layer(loaded, tree)
            with self._lock:
                self.loaded, self.tree = loaded, tree
                self._cam_layer = (tree, cam_layer)
            self.channel.put(
                ModelLoaded(
                    name=loaded.name,
                    description=loaded.description,
                    pretrained=loaded.pretrained,
                    device=str(loaded.device),
                    tree=tree,
                    notes=model_notes(loaded),
                    cam_layer=cam_layer,
                )
            )
            return loaded

        return self.worker.submit(job, tag="load")

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
        future = self.worker.submit(lambda cancel: self._run(run_id, request, cancel), tag=run_id)
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
        """The edits checked against the loaded model and completed (core.edit_spec
        .check_edits: the channel dim of channels-last outputs); EditSpecError, one line
        naming the edit, for one that cannot work. Checked before a run, not in it."""
        loaded, tree = self.loaded, self.tree
        if loaded is None or tree is None:
            raise EditSpecError("no model is loaded yet: edits are checked against one")
        return check_edits(edits, tree, loaded.preprocess.crop_size)

    def kept_runs(self) -> tuple[int, ...]:
        """The runs whose outputs are kept (compare_with can name them), least recently
        used first: the first goes when another run keeps its outputs."""
        with self._lock:
            return tuple(self._kept)

    def kept_outputs(self, run_id: int) -> dict[str, torch.Tensor] | None:
        """A kept run's outputs (module -> float32 CPU tensor, forward order; read them, do
        not modify them), or None when that run's are not kept."""
        with self._lock:
            kept = self._kept.get(run_id)
        return None if kept is None else kept.as_dict()

    def forget_outputs(self, run_id: int | None = None) -> None:
        """Drop a run's kept outputs (None: every run's)."""
        with self._lock:
            if run_id is None:
                self._kept.clear()
            else:
                self._kept.pop(run_id, None)

    def _kept_outputs(self, run_id: int) -> KeptOutputs | None:
        with self._lock:
            kept = self._kept.get(run_id)
            if kept is not None:
                self._kept.move_to_end(run_id)
            return kept

    def _keep(self, kept: KeptOutputs) -> None:
        with self._lock:
            self._kept[kept.run_id] = kept
            while len(self._kept) > max(self.keep_runs, 0):
                self._kept.popitem(last=False)

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
        put = self._channel_of(run_id).put
        timings: dict[str, float] = {}
        outcome = RunOutcome(run_id, "ok")
        loaded = self.loaded
        label = req.label or _label_of(req.image)
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
            refused = _refused_for_task(req, loaded.task)
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
        graph_from = frozenset() if full_backward else _gradient_cam_layers(cams)
        need_grad = full_backward or bool(graph_from)
        recorder = self._recorder(req, spec, outcome)
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
                    preds, target = _predictions(logits, loaded, req)
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
                    put(PredictionFrame(run_id, read.preds,
                                        target if need_grad or cams else None,
                                        loaded.task, read.detections, read.mask,
                                        read.legend))
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
            with _edits_on(model, run_id, req.interventions, cancel):
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
            put(_error_frame(run_id, e, module))
            outcome.error = str(e)
            if isinstance(e, torch.OutOfMemoryError) and torch.cuda.is_available():
                torch.cuda.empty_cache()
            return self._finish(run_id, "error", outcome, timings, described, never_called, cap)
        finally:
            cap.kept.clear()  # nothing of this run's tensors outlives it
        if recorder is not None and recorder.keep:
            self._keep(recorder.kept(run_id))
        timings["total"] = time.perf_counter() - t0
        return self._finish(run_id, "ok", outcome, timings, described, never_called, cap)

    def _recorder(self, req: RunRequest, spec: CaptureSpec, outcome: RunOutcome):
        """The hooks that keep this run's outputs and/or compare them with a kept run's
        (core.compare); None when the run asks for neither."""
        reference = None
        if req.compare_with is not None:
            reference = self._kept_outputs(req.compare_with)
            if reference is None:
                # Not an error: the run itself is fine, only the comparison cannot be made.
                outcome.notes.append(
                    f"no comparison with run {req.compare_with}: its outputs are not kept "
                    f"(only the last {self.keep_runs} runs that keep outputs are)")
        if not req.keep_outputs and reference is None:
            return None
        tree = self.tree
        modules = spec.names()
        # Outputs the model modifies in place later in the forward are copied in the hook;
        # the others are kept by reference (see core.compare). Without a tree, copy all.
        copy = modules if tree is None else {
            m for m in modules if m not in tree or OUTPUT_MODIFIED_INPLACE in tree[m].hazards}
        return OutputRecorder(modules, keep=req.keep_outputs, copy=copy, reference=reference)

    def _finish(
        self, run_id, status, outcome, timings, described, never_called, cap=None
    ) -> RunOutcome:
        with self._lock:
            self._open_runs.discard(run_id)
            channel = self._run_channels.pop(run_id, self.channel)
        # Frames whose statistics an in-place op invalidated (core.deferred_stats) count as
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
        if isinstance(image, Image.Image):
            img = image if image.mode == "RGB" else as_rgb(image, stretch=stretch)
        else:
            img = load_image(image, stretch=stretch)
        x = loaded.preprocess(img)[None]
        return x, img.size, loaded.preprocess.to_display(x[0])

    def default_cam_layer(self) -> str | None:
        """The CAM layer when none is named (see core.cam): worked out once per model tree,
        not on every run (it walks the whole tree)."""
        tree, loaded = self.tree, self.loaded
        if loaded is None or tree is None:
            return None
        cached = self._cam_layer
        if cached is None or cached[0] is not tree:  # a tree set from outside (tests)
            cached = (tree, _default_cam_layer(loaded, tree))
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
        from .cam import cam_from_capture
        from .methods import CAM_METHODS, cam_method

        for method, layer in cams:
            if layer is None:
                raise ValueError("No layer of this model has an output a CAM can be computed "
                                 "from: choose a CAM layer")
            # Only Score-CAM calls it (once per batch of masked forwards): the one CAM step
            # that can take long enough to be worth reporting.
            progress = _progress_reporter(self._channel_of(run_id).put, run_id,
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
        from .methods import ATTRIBUTION_METHODS, attribution_method
        from .saliency import attribute, display_map

        for method in req.attributions:
            name = attribution_method(method)
            progress = _progress_reporter(self._channel_of(run_id).put, run_id,
                                          ATTRIBUTION_METHODS[name].title, cancel)
            signed = attribute(model, x, target, name, req.attribution_options,
                               progress=progress)[0]  # x is a batch of one
            outcome.attributions[name] = signed
            shown = display_map(name, torch.from_numpy(signed)[None])[0]
            self._channel_of(run_id).put(CamFrame(run_id, name, ATTRIBUTION_LAYER, target, shown))


def _edits_on(model, run_id: int, interventions, cancel: threading.Event):
    """A context in which `model` runs with `interventions` (and nothing captured): for the
    forwards a run makes after its own (Score-CAM, attributions); no-op without edits."""
    if not interventions:
        return contextlib.nullcontext()
    return Capture(model, CaptureSpec(stats=False), None, run_id, interventions, cancel)


def _progress_reporter(put, run_id: int, step: str, cancel: threading.Event):
    """A progress callback (done, total) for one step of a run: stops the step when the run
    is cancelled, and puts a ProgressFrame on the channel at most every PROGRESS_INTERVAL_S
    (and for the last call), so that a long step cannot flood the channel."""
    began, last = time.perf_counter(), float("-inf")

    def progress(done: int, total: int) -> None:
        nonlocal last
        if cancel.is_set():
            raise RunCancelled()
        now = time.perf_counter()
        if done >= total or now - last >= PROGRESS_INTERVAL_S:
            last = now
            put(ProgressFrame(run_id, step, done, total, now - began))

    return progress


def _default_cam_layer(loaded: LoadedModel, tree: ModuleTree) -> str | None:
    """The CAM layer when none is named (see core.cam), found on the worker when the model
    loads (it walks the model); None when the model has no layer a CAM can use."""
    if loaded.task != tasks.CLASSIFICATION:
        return tasks.default_cam_layer(tree, loaded.task)
    try:
        from .cam import default_target_layer

        return default_target_layer(loaded.model, tree)
    except Exception:  # noqa: BLE001 - no spatial or token layer, or no CAM module
        return None


def _gradient_cam_layers(cams) -> frozenset[str]:
    """The layers of the CAMs that read a gradient (an unknown method counts: its error
    comes where the CAMs are computed)."""
    from .methods import CAM_METHODS, cam_method

    def needs_grad(method: str) -> bool:
        try:
            return CAM_METHODS[cam_method(method)].needs_grad
        except (ValueError, KeyError):
            return True

    return frozenset(layer for method, layer in cams if layer is not None and needs_grad(method))


def _refused_for_task(req: RunRequest, task: str) -> str | None:
    """What a detection or segmentation run cannot do, in one line: Score-CAM and the input
    attributions run the model as a classifier (masked inputs, a logit per class)."""
    from .methods import cam_method

    def is_scorecam(method: str) -> bool:
        try:
            return cam_method(method) == "scorecam"
        except ValueError:  # an unknown method: said where the CAMs are computed
            return False

    if any(is_scorecam(m) for m, _ in req.cams):
        return f"Score-CAM explains classifiers, not a {task} model: choose a gradient CAM"
    if req.attributions:
        return (f"input attributions explain classifiers, not a {task} model: use a CAM "
                f"({', '.join(req.attributions)} asked for)")
    return None


def _label_of(image: Any) -> str:
    if isinstance(image, (str, Path)):
        return Path(image).name
    return getattr(image, "filename", "") or type(image).__name__


def _predictions(logits: torch.Tensor, loaded: LoadedModel, req: RunRequest):
    """The top-k predictions, and the class to explain (the request's, else the top one)."""
    scores = logits.detach().float()[0]
    probs = scores.softmax(-1)
    top_p, top_i = probs.topk(min(req.topk, probs.numel()))
    if req.target is not None and not isinstance(req.target, int):  # det:K, seg:CLASS
        raise ValueError(f"target {req.target} is for a detection or segmentation model; "
                         f"{loaded.name} is a classifier")
    target = req.target if req.target is not None else int(top_i[0])
    if not 0 <= target < logits.shape[-1]:
        raise ValueError(f"target class {target} out of range 0..{logits.shape[-1] - 1}")
    preds = tuple(
        Prediction(int(i), loaded.label(int(i)), float(p), float(scores[i]))
        for p, i in zip(top_p.tolist(), top_i.tolist(), strict=True)
    )
    return preds, target


def model_notes(loaded: LoadedModel) -> tuple[str, ...]:
    """What the user should know about a loaded model: its own notes (random weights, a
    re-initialised head) and, on the CPU, that statistics take the slower torch path."""
    notes = list(loaded.notes)
    if loaded.device.type == "cpu" and fused_stats.fallback_note():
        notes.append(fused_stats.fallback_note())
    return tuple(notes)


def _error_frame(run_id: int, e: BaseException, module: str | None) -> ErrorFrame:
    if isinstance(e, torch.OutOfMemoryError):
        message = "Out of GPU memory: try a smaller image batch, fewer captured layers, or the CPU."
    elif isinstance(e, HookError):
        message = str(e)
    else:
        # "" is the model itself: an op in its own forward, outside every submodule.
        where = {None: "", "": " in the model's own forward"}.get(module, f" in module '{module}'")
        message = f"The run failed{where}: {type(e).__name__}: {e}"
    return ErrorFrame(
        run_id,
        message.splitlines()[0] if message else type(e).__name__,
        details="".join(traceback.format_exception(e)),
        module=module,
        exception=type(e).__name__,
    )

