"""One image of `analyse`: its runs on the Session and its entries in summary.json and
compare.json. What it writes to disk is writers'.

With edits and `compare`, the image is first run without the edits (the Session keeps those
outputs), then with them, compared with that run. Every CAM is computed in the run itself
(Score-CAM's masked forwards too: the Session's path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.batch.analyse.metrics import metrics_entry
from inspector.batch.analyse.sweep import sweep_entries
from inspector.batch.analyse.writers import write_image_files
from inspector.batch.engine.out_dir import write_failure
from inspector.batch.inputs import Source, VideoFrames
from inspector.batch.metric_boxes import boxes_for, mask_for
from inspector.core.export.arrays import full_arrays
from inspector.core.records.frames import CamFrame, ErrorFrame, PredictionFrame


@dataclass
class ImageJob:
    """What every image's run is asked for: fixed once the model is loaded and checked."""

    capture: Any  # core.run.capture_spec.CaptureSpec: the layers' whole output and output gradient
    baseline_capture: Any  # the unedited twin's (compare): the outputs only
    target: Any
    methods: list[str]
    cam_layer: str | None
    attributions: list[str]
    attribution_options: Any
    edits: tuple
    compare: bool
    topk: int
    stretch: bool
    attention: Any = None  # RunRequest.attention (core.explain.attention.options)
    legrad_from: str | None = None  # LeGrad's first block; None: its last 4
    patch_sweep: str | None = None  # --patch-sweep: the image patched from
    sweep_depth: int | None = None
    dff: int = 0  # analyse --dff K: concepts of dff_layer into the NPZ (analyse/dff.py)
    dff_layer: str | None = None
    metrics: Any = None  # core.explain.metrics.names.MetricOptions, or None
    boxes: dict = field(default_factory=dict)  # --boxes (batch.metric_boxes), for pointing


def entry_of(source: Source, error: str | None = None) -> dict[str, Any]:
    """An image's entry in summary.json."""
    entry = {"path": str(source.path), "top": [], "files": {}, "error": error}
    if source.frame is not None:
        entry["frame"] = source.frame  # a video's frame (its index, from 0)
    return entry


def compared_of(source: Source, error: str | None = None) -> dict[str, Any]:
    """An image's entry in compare.json."""
    entry = {"path": str(source.path), "modules": {}, "top_before": [], "top_after": [],
             "notes": [], "error": error}
    if source.frame is not None:
        entry["frame"] = source.frame
    return entry


def analyse_image(session, loaded, job: ImageJob, source: Source, name: str, out: Path,
                  step: int, tb, videos: VideoFrames
                  ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run one input and write its files into out/<name>/: its summary.json entry and (with
    compare) its compare.json entry. A failure is the entries' "error", never an exception
    from the image itself."""
    entry = entry_of(source)
    compared = compared_of(source) if job.compare else None
    try:
        _run(session, loaded, job, source, name, out, step, tb, videos, entry, compared)
    except Exception as e:  # one image's failure must not lose the others
        if write_failure(e, out) is not None:
            raise  # a full or read-only disk is no image's fault: the run stops (analyse)
        entry["error"] = f"{source}: {type(e).__name__}: {e}"
    if compared is not None:
        compared["error"] = compared["error"] or entry["error"]
    return entry, compared


def _run(session, loaded, job: ImageJob, source: Source, name: str, out: Path, step: int, tb,
         videos: VideoFrames, entry: dict[str, Any], compared: dict[str, Any] | None) -> None:
    from inspector.core.inputs.images import ImageLoadError, load_image

    try:
        image = (load_image(source.path, stretch=job.stretch) if source.frame is None
                 else videos.read(source))
        x = loaded.preprocess(image)
    except ImageLoadError as e:  # core.inputs.video_reader.VideoLoadError too
        entry["error"] = str(e)
        return
    except Exception as e:  # an image Pillow reads but the preprocessing cannot use
        entry["error"] = f"{source}: cannot preprocess ({type(e).__name__}: {e})"
        return
    path, frame = source.path, source.frame
    if image.info.get("size_note"):  # a picture too big to need every pixel: said once
        entry["note"] = f"{path.name} was {image.info['size_note']}"
    label = path.name if frame is None else f"{path.name} frame {frame}"
    reference = None
    if compared is not None:
        # The same image without the edits first; the Session keeps its outputs.
        before = session.run(x, capture=job.baseline_capture, gradients=False,
                             topk=job.topk, label=label, keep_outputs=True)
        frames = session.channel.drain()
        if before.status != "ok":
            entry["error"] = f"{source} (without the edits): {failure(before, frames)}"
            return
        compared["top_before"] = top_of(frames)
        reference = before.run_id
    from inspector.core.explain.catalog import ATTENTION_CAMS

    wanted = tuple((m, job.legrad_from if m in ATTENTION_CAMS else job.cam_layer)
                   for m in job.methods)
    outcome = session.run(
        x, capture=job.capture, target=job.target, cams=wanted, topk=job.topk,
        label=label, attributions=tuple(job.attributions),
        attribution_options=job.attribution_options, interventions=job.edits,
        compare_with=reference, attention=job.attention, metrics=job.metrics,
        metric_boxes=boxes_for(job.boxes, path), metric_mask=mask_for(job.boxes, path),
        # A backward to the input only for captured gradients (attention maps start their
        # own graph at the first block).
        gradients=bool(job.capture.modules) or not wanted,
    )
    frames = session.channel.drain()
    if reference is not None:
        session.forget_outputs(reference)  # one image's twin is not needed by the next
    if outcome.status != "ok":
        entry["error"] = f"{source}: {failure(outcome, frames)}"
        return
    # A detection model that found nothing (and was asked for no detection) has none.
    cams = {m: outcome.cams[(m, layer)] for m, layer in wanted if (m, layer) in outcome.cams}
    entry["target"] = outcome.target
    if outcome.notes:
        entry["notes"] = list(outcome.notes)
    entry["top"] = top_of(frames)
    if job.attention is not None and job.attention.lens:
        entry["logit_lens"] = outcome.logit_lens
    if job.metrics is not None:
        entry["metrics"] = metrics_entry(outcome, job.metrics.metrics)
    if loaded.task == "detection":
        entry["detections"] = _detections(outcome, loaded.preprocess, image.size)
    if compared is not None:
        compared["top_after"] = entry["top"]
        compared["modules"] = _divergence(outcome)
        compared["notes"] = outcome.notes
    if job.patch_sweep is not None:  # --patch-sweep: the entry's "patch_sweep"
        entry.update(sweep_entries(session, job, x, outcome.target))
    arrays = full_arrays(frames)
    arrays.update({("attr", m): a for m, a in outcome.attributions.items()})
    arrays.update({("grid", m): g for m, g in outcome.grids.items()})
    arrays.update({("attention", n): a for n, a in outcome.attention.items()})
    where = {f.method: f.layer for f in frames if isinstance(f, CamFrame)}
    if job.dff:
        from inspector.batch.analyse.dff import dff_arrays

        arrays.update(dff_arrays(job.dff, job.dff_layer, arrays, loaded.preprocess.crop_size))
    entry["files"] = write_image_files(out, name, loaded, source, image, x, arrays, cams,
                                       job.cam_layer, outcome, step, tb, where)


def failure(outcome, frames) -> str:
    """Why a run failed, in one sentence: the error frame's names the module that failed;
    the bare exception does not."""
    errors = [f.message for f in frames if isinstance(f, ErrorFrame)]
    return errors[0] if errors else outcome.error or outcome.status


def top_of(frames) -> list[dict[str, Any]]:
    for f in frames:
        if isinstance(f, PredictionFrame):
            return [{"index": p.index, "label": p.label, "prob": round(p.prob, 6)} for p in f.top]
    return []


def _divergence(outcome) -> dict[str, dict[str, float | None]]:
    """module -> {rel_l2, cosine}, in forward order; non-finite values as null (JSON has
    no infinity)."""
    d = outcome.divergence
    if d is None:
        return {}

    def finite(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    return {m: {"rel_l2": finite(r), "cosine": finite(c)}
            for m, r, c in zip(d.modules, d.rel_l2.tolist(), d.cosine.tolist(), strict=True)}


def _detections(outcome, pre, size: tuple[int, int]) -> list[dict[str, Any]]:
    """The run's detections for summary.json: boxes in the input image's pixels, and
    Keypoint R-CNN's keypoints as [x, y, score] there too."""
    from inspector.core.tasks.detection import point_to_original, to_original

    out = []
    for d in outcome.detections:
        entry = {"box": [round(v, 2) for v in to_original(d.box, pre, size)], "label": d.label,
                 "index": d.class_index, "score": round(d.score, 6)}
        if d.keypoints:
            entry["keypoints"] = [[*(round(v, 2) for v in point_to_original(p, pre, size)),
                                   round(s, 4)] for *p, s in d.keypoints]
        out.append(entry)
    return out
