"""A run in stages: what the Session does with a RunRequest on the worker thread, in order.

    prepare_input   the image (a path, a picture, a video frame, a tensor) as the model input
    plan            what the run computes: its CAMs and their layers, the capture that keeps
                    what they read, and how far back the gradients go
    forward         the model called under the capture's hooks; its output read as
                    predictions (a PredictionFrame) and the score the gradients start from
    backward        the gradients the plan asks for, from that score
    explain         the CAMs and input attributions, with the run's edits on where they run
                    the model again

Each stage is a function of the run in flight (`InFlight`: the request, the model, where its
frames go, what it has made so far) and can be called on its own (tests/core/test_stages.py).
The Session (core.run.session) calls them in turn inside the capture's context, turns a
failure into one error frame, and sends RunFinished whatever happened.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from inspector.core import tasks
from inspector.core.edits.hooks import EditHooks
from inspector.core.explain.attention.stage import ask_of, is_attention_map
from inspector.core.explain.cam.compute import cam_from_capture
from inspector.core.explain.cam.targets import logits_of
from inspector.core.explain.catalog import (
    ATTRIBUTION_LAYER,
    ATTRIBUTION_METHODS,
    CAM_METHODS,
    FORWARD_CAMS,
    attribution_method,
    cam_method,
)
from inspector.core.explain.metrics.forwards import StopScoring
from inspector.core.hookset import HookError, RunCancelled
from inspector.core.inputs.images import as_rgb, load_image
from inspector.core.inputs.preprocess import PreparedImage
from inspector.core.models.base import LoadedModel
from inspector.core.records.frames import (
    CamFrame,
    ErrorFrame,
    Prediction,
    PredictionFrame,
    ProgressFrame,
)
from inspector.core.records.kinds import DEFAULT_KINDS
from inspector.core.run import metrics_stage
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.request import RunRequest

PROGRESS_INTERVAL_S = 0.1  # progress frames of a step: at most this often, and the last one


@dataclass
class InFlight:
    """One run on the worker: what it was asked, what it runs on, and what it has made."""

    run_id: int
    request: RunRequest
    loaded: LoadedModel
    put: Any  # the frames' sink: the run's channel's put
    cancel: threading.Event
    outcome: Any  # core.run.session.RunOutcome, filled in stage by stage
    timings: dict[str, float] = field(default_factory=dict)
    x: torch.Tensor | None = None  # the model input, (1, 3, H, W) on the model's device
    size: tuple[int, int] | None = None  # the picture's own size, when there was one
    display: Any = None  # the picture the model input shows, for the views
    target: Any = None  # what is explained (a class, a detection, a segmentation class)
    score: torch.Tensor | None = None  # the target's score, where gradients start
    never_called: tuple[str, ...] = ()  # captured modules the forward never called
    tree: Any = None  # the model's core.models.tree.ModuleTree (the metrics' sanity check)
    # Set to stop the metrics but not the run (Session.stop_scoring); None: no such request.
    stop_scoring: threading.Event | None = None
    # (maps scored, maps to score) once the metrics were stopped that way (RunFinished's).
    scoring_stopped: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        return self.request.label or label_of(self.request.image)

    def timed(self, name: str):
        return _Timer(self.timings, name)


@dataclass(frozen=True)
class Plan:
    """What a run computes, decided before it starts."""

    capture: CaptureSpec
    cams: tuple[tuple[str, str | None], ...]  # (method, layer), the default layer filled in
    # A backward down to the model input: the captured gradients, and edits of gradients.
    full_backward: bool
    # Else the layers a gradient CAM reads, at whose outputs the graph starts (Capture's
    # graph_from): the backward stops there, and the forward before them records nothing.
    graph_from: frozenset[str]
    # What the run asks of attention (core.explain.attention.stage.AttentionAsk), or None.
    attention: Any = None

    @property
    def needs_grad(self) -> bool:
        return (self.full_backward or bool(self.graph_from)
                or (self.attention is not None and self.attention.needs_grad))

    @property
    def explains(self) -> bool:
        """Whether the run explains a target (the predictions view then names it)."""
        return self.needs_grad or bool(self.cams)


# -- prepare_input --------------------------------------------------------------------------------


def prepare_input(run: InFlight) -> None:
    """The model input (with its picture's size and the picture to show): ImageLoadError,
    ValueError or OSError for an image that cannot be read, said in one line."""
    t = time.perf_counter()
    image, loaded, stretch = run.request.image, run.loaded, run.request.stretch
    if isinstance(image, torch.Tensor):
        x = image if image.ndim == 4 else image[None]
        # A copy: the run sets requires_grad and edits may replace it; the caller's
        # tensor stays as it was.
        x = x.detach().to(torch.float32, copy=True)
        run.x, run.display = x, loaded.preprocess.to_display(x[0].cpu())
    elif isinstance(image, PreparedImage) and image.preprocess == loaded.preprocess:
        # A copy, as for a tensor: a paused video frame runs again in full.
        run.x, run.size, run.display = image.x[None].clone(), image.size, image.display
    else:
        if isinstance(image, PreparedImage):
            image = image.image  # made for another model's input
        if isinstance(image, Image.Image):
            img = image if image.mode == "RGB" else as_rgb(image, stretch=stretch)
        else:
            img = load_image(image, stretch=stretch)
        prepared = loaded.preprocess.prepare(img)
        run.x, run.size, run.display = prepared.x[None], img.size, prepared.display
    run.timings["preprocess"] = time.perf_counter() - t


def label_of(image: Any) -> str:
    """What a run of `image` is called: a file's name, else the image's filename or type."""
    if isinstance(image, (str, Path)):
        return Path(image).name
    image = getattr(image, "image", image)  # a PreparedImage: its picture
    return getattr(image, "filename", "") or type(image).__name__


# -- plan -----------------------------------------------------------------------------------------


def refused_for_task(req: RunRequest, task: str) -> str | None:
    """What a detection or segmentation run cannot do, in one line: Score-CAM and the input
    attributions run the model as a classifier (masked inputs, a logit per class)."""

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


def plan(run: InFlight, default_cam_layer: str | None) -> Plan:
    """The CAMs with their layers, the capture (gradient kinds only when the request asks
    for gradients; the CAM layers' tensors kept), and how far back the gradients go."""
    req = run.request
    spec = req.capture if req.capture is not None else CaptureSpec.leaves(run.loaded.model,
                                                                           DEFAULT_KINDS)
    if not req.gradients:
        spec = spec.without_gradients()
    # Attention maps read no layer (LeGrad's names its first block, or None).
    cams = tuple((method, layer if is_attention_map(method) else layer or default_cam_layer)
                 for method, layer in req.cams)
    cam_layers = {layer for m, layer in cams if not is_attention_map(m)} - {None}
    if cam_layers:
        spec = spec.with_(keep=spec.keep | cam_layers)
    # An edit of gradients may sit anywhere on the way: it needs the backward to the input.
    full = req.gradients or any(i.edits_gradient for i in req.interventions)
    return Plan(spec, cams, full, frozenset() if full else gradient_cam_layers(cams), ask_of(req))


def gradient_cam_layers(cams) -> frozenset[str]:
    """The layers of the CAMs that read a gradient (an unknown method counts: its error
    comes where the CAMs are computed)."""

    def needs_grad(method: str) -> bool:
        try:
            return CAM_METHODS[cam_method(method)].needs_grad
        except (ValueError, KeyError):
            return True

    return frozenset(layer for method, layer in cams if layer is not None and needs_grad(method)
                     and not is_attention_map(method))


# -- forward --------------------------------------------------------------------------------------


def forward(run: InFlight, plan: Plan) -> Plan:
    """The model on the input, inside the capture (the caller's context): the predictions
    frame, the target and its score. A detection model that found nothing and was asked for
    no detection has no score: the run goes on without gradients or CAMs (the plan it
    returns says so)."""
    loaded, req, put = run.loaded, run.request, run.put
    x = run.x.to(loaded.device)
    if plan.full_backward:
        x.requires_grad_(True)
    run.x = x
    with run.timed("forward"):
        output = (loaded.model(x) if loaded.task == tasks.CLASSIFICATION
                  else tasks.forward(loaded.task, loaded.model, x))
    if loaded.task == tasks.CLASSIFICATION:
        logits = logits_of(output)
        preds, run.target = top_predictions(logits, loaded, req)
        run.score = logits[0, run.target] if plan.needs_grad else None
        put(PredictionFrame(run.run_id, preds, run.target if plan.explains else None))
        run.outcome.logits = logits.detach().to("cpu", copy=True)
        run.outcome.target = run.target
        return plan
    # Detection and segmentation: core.tasks reads the output (a list of dicts, an
    # OrderedDict of maps).
    read = tasks.read_output(loaded.task, output, req.target, loaded.categories, req.topk,
                             want_score=plan.needs_grad)
    run.target, run.score = read.target, read.score
    if plan.needs_grad and read.score is None:
        # Nothing detected and no detection asked for: the run shows the activations,
        # without a gradient or a CAM (not an error).
        plan = Plan(plan.capture, (), False, frozenset())
        run.target = None
        run.outcome.notes.append("nothing detected: no gradient and no CAM")
    threshold = (tasks.detection.score_threshold(loaded.model)
                 if loaded.task == tasks.DETECTION else None)
    put(PredictionFrame(run.run_id, read.preds, run.target if plan.explains else None,
                        loaded.task, read.detections, read.mask, read.legend, threshold))
    run.outcome.logits, run.outcome.detections = read.logits, read.detections
    run.outcome.mask, run.outcome.target = read.mask, run.target
    return plan


def top_predictions(logits: torch.Tensor, loaded: LoadedModel, req: RunRequest):
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


# -- backward -------------------------------------------------------------------------------------


def backward(run: InFlight, plan: Plan, cap: Capture, attention=None) -> None:
    """Gradients w.r.t. the model input only (every hooked activation lies on the way, so
    its tensor hooks fire, and autograd skips the parameter gradients), or down to the CAM
    layers only (and the leaf at the first attention, for gradient rollout: `attention`, the
    run's core.explain.attention.stage.AttentionRun, whose LeGrad gradients come first).
    Without a root there (the layer did not run) or a score that depends on one, the CAM
    says why when it is computed."""
    roots = list(cap.graph_roots)
    if attention is not None:
        attention.before_backward()
        roots += attention.roots
    if plan.full_backward:
        with run.timed("backward"):
            torch.autograd.grad(run.score, run.x)
    elif plan.needs_grad and roots and run.score.requires_grad:
        with run.timed("backward"):
            torch.autograd.grad(run.score, roots, allow_unused=True)


# -- explain --------------------------------------------------------------------------------------


def explain(run: InFlight, plan: Plan, cap: Capture, attention=None) -> None:
    """After the capture's hooks are gone: the attention maps (`attention`, the run's
    AttentionRun), the CAMs, the attributions, then the metrics that score them all. Those
    that run the model again do so with the run's edits on (only then: hooks walk the model)."""
    req = run.request
    if attention is not None:
        attention.explain()
    reruns = (bool(req.attributions) or req.metrics is not None
              or any(cam_method(m) in FORWARD_CAMS for m, _ in plan.cams))
    x = run.x.detach()
    with EditHooks(run.loaded.model, req.interventions if reruns else (), run.run_id, run.cancel):
        if plan.cams:
            with run.timed("cam"):
                _cams(run, plan.cams, cap, x)
        if req.attributions:
            with run.timed("attributions"):
                _attributions(run, x)
        if req.metrics is not None:  # core.run.metrics_stage
            with run.timed("metrics"):
                scored = metrics_stage.perturbation_scores(run, progress_reporter(
                    run, metrics_stage.STEP, run.stop_scoring))
    if req.metrics is not None:  # the sanity check: a copy made without the run's hooks
        with run.timed("sanity"):
            metrics_stage.finish(run, scored)


def _cams(run: InFlight, cams, cap: Capture, x: torch.Tensor) -> None:
    for method, layer in cams:
        if is_attention_map(method):
            continue  # from the run's attention (core.explain.attention.stage)
        if layer is None:
            raise ValueError("No layer of this model has an output a CAM can be computed "
                             "from: choose a CAM layer")
        # Only Score-CAM calls it (once per batch of masked forwards): the one CAM step
        # that can take long enough to be worth reporting.
        progress = progress_reporter(run, CAM_METHODS[cam_method(method)].title)
        cam = cam_from_capture(method, cap, layer, tuple(x.shape[-2:]), model_input=x,
                               target=run.target, progress=progress)
        run.outcome.cams[(method, layer)] = cam
        run.put(CamFrame(run.run_id, method, layer, run.target, cam))


def _attributions(run: InFlight, x: torch.Tensor) -> None:
    """The signed arrays go to the outcome, and a [0, 1] map of each (as display_map shows
    that method) to the views as a CamFrame at the layer ATTRIBUTION_LAYER."""
    from inspector.core.explain.attributions import attribute, display_map

    req = run.request
    for method in req.attributions:
        name = attribution_method(method)
        progress = progress_reporter(run, ATTRIBUTION_METHODS[name].title)
        signed = attribute(run.loaded.model, x, run.target, name, req.attribution_options,
                           progress=progress)[0]  # x is a batch of one
        run.outcome.attributions[name] = signed
        shown = display_map(name, torch.from_numpy(signed)[None])[0]
        run.put(CamFrame(run.run_id, name, ATTRIBUTION_LAYER, run.target, shown))


def progress_reporter(run: InFlight, step: str, stop: threading.Event | None = None):
    """A progress callback (done, total) for one step of a run: stops the step when the run
    is cancelled (RunCancelled), or with StopScoring once `stop` is set, and puts a
    ProgressFrame on the channel at most every PROGRESS_INTERVAL_S (and for the last call),
    so that a long step cannot flood the channel."""
    began, last = time.perf_counter(), float("-inf")
    put, run_id, cancel = run.put, run.run_id, run.cancel

    def progress(done: int, total: int, detail: str = "", left: float | None = None) -> None:
        nonlocal last
        if cancel.is_set():
            raise RunCancelled()
        if stop is not None and stop.is_set():
            raise StopScoring()
        now = time.perf_counter()
        if done >= total or now - last >= PROGRESS_INTERVAL_S:
            last = now
            put(ProgressFrame(run_id, step, done, total, now - began, detail, left))

    return progress


# -- a failure ------------------------------------------------------------------------------------


def error_frame(run_id: int, e: BaseException, module: str | None) -> ErrorFrame:
    """The one-line error of a failed run (where it failed), the traceback as details."""
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


class _Timer:
    def __init__(self, timings: dict[str, float], name: str) -> None:
        self.timings, self.name = timings, name

    def __enter__(self) -> None:
        self.began = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.timings[self.name] = time.perf_counter() - self.began
