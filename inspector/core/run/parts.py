"""The pieces of a Session run that need none of its state: the top-k predictions, the
error frame of a failed run, progress reporting, the CAM layer when none is named, and what
a detection or segmentation model refuses. Used on the worker thread (core.run.session)."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from inspector.core import tasks
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import ModuleTree
from inspector.core.run.capture import Capture, HookError, RunCancelled
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.frames import ErrorFrame, Prediction, ProgressFrame
from inspector.core.run.request import RunRequest
from inspector.core.stats import fused as fused_stats

PROGRESS_INTERVAL_S = 0.1  # progress frames of a step: at most this often, and the last one


def edits_on(model, run_id: int, interventions, cancel: threading.Event):
    """A context in which `model` runs with `interventions` (and nothing captured): for the
    forwards a run makes after its own (Score-CAM, attributions); no-op without edits."""
    if not interventions:
        return contextlib.nullcontext()
    return Capture(model, CaptureSpec(stats=False), None, run_id, interventions, cancel)


def progress_reporter(put, run_id: int, step: str, cancel: threading.Event):
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


def find_cam_layer(loaded: LoadedModel, tree: ModuleTree) -> str | None:
    """The CAM layer when none is named (see core.explain.cam), found on the worker when the model
    loads (it walks the model); None when the model has no layer a CAM can use."""
    if loaded.task != tasks.CLASSIFICATION:
        return tasks.default_cam_layer(tree, loaded.task)
    try:
        from inspector.core.explain.cam import default_target_layer

        return default_target_layer(loaded.model, tree)
    except Exception:  # noqa: BLE001 - no spatial or token layer, or no CAM module
        return None


def gradient_cam_layers(cams) -> frozenset[str]:
    """The layers of the CAMs that read a gradient (an unknown method counts: its error
    comes where the CAMs are computed)."""
    from inspector.core.explain.catalog import CAM_METHODS, cam_method

    def needs_grad(method: str) -> bool:
        try:
            return CAM_METHODS[cam_method(method)].needs_grad
        except (ValueError, KeyError):
            return True

    return frozenset(layer for method, layer in cams if layer is not None and needs_grad(method))


def refused_for_task(req: RunRequest, task: str) -> str | None:
    """What a detection or segmentation run cannot do, in one line: Score-CAM and the input
    attributions run the model as a classifier (masked inputs, a logit per class)."""
    from inspector.core.explain.catalog import cam_method

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


def label_of(image: Any) -> str:
    """What a run of `image` is called: a file's name, else the image's filename or type."""
    if isinstance(image, (str, Path)):
        return Path(image).name
    image = getattr(image, "image", image)  # a PreparedImage: its picture
    return getattr(image, "filename", "") or type(image).__name__


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


def model_notes(loaded: LoadedModel) -> tuple[str, ...]:
    """What the user should know about a loaded model: its own notes (random weights, a
    re-initialised head) and, on the CPU, that statistics take the slower torch path."""
    notes = list(loaded.notes)
    if loaded.device.type == "cpu" and fused_stats.fallback_note():
        notes.append(fused_stats.fallback_note())
    return tuple(notes)


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
