"""What a model does, where it is not classification: detection and segmentation.

    detection.py     boxes, labels and scores: a list of images in, a list of dicts out
    segmentation.py  a class per pixel: an OrderedDict with "out" (and "aux")

(torchvision's detection and segmentation models are loaded by core.models.task_models.)

The Session asks this package how to call the model (`forward`), what its output means for
the predictions view and which score the gradients start from (`read_output`). The layer a
CAM reads by default is core.explain.cam.layer's (task_cam_layer), a `det:K` or `seg:CLASS`
target from text core.explain.cam.targets' (parse_target). A classifier goes through none
of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from inspector.core.records.frames import Prediction
from inspector.core.records.targets import DetectionTarget, SegmentationTarget
from inspector.core.tasks import detection, segmentation
from inspector.core.tasks.detection import Detection

CLASSIFICATION = "classification"
DETECTION = "detection"
SEGMENTATION = "segmentation"


def task_of(model: nn.Module) -> str:
    """The task of a module, from its type (torchvision's detection and segmentation
    classes); anything else is a classifier."""
    if "torchvision" not in type(model).__module__:
        return CLASSIFICATION
    if detection.is_detection_model(model):
        return DETECTION
    if segmentation.is_segmentation_model(model):
        return SEGMENTATION
    return CLASSIFICATION


def forward(task: str, model: nn.Module, x: torch.Tensor):
    """The model's output for a (B, 3, H, W) batch, called the way the model takes it."""
    return detection.forward(model, x) if task == DETECTION else model(x)


def example_input(task: str, x: torch.Tensor):
    """The probe forward's argument (core.models.tree.build_tree): a list of images for detection."""
    return list(x) if task == DETECTION else x


@dataclass
class TaskOutput:
    """A detection or segmentation run's output, read for the views and the backward."""

    preds: tuple[Prediction, ...]
    target: int  # the detection (by score rank) or the class explained
    score: torch.Tensor | None  # the scalar the gradients start from, on the autograd graph
    logits: torch.Tensor  # RunOutcome.logits: (1, N) detection scores, (1, C, H, W) scores
    detections: tuple[Detection, ...] = ()  # boxes in model-input pixels
    mask: np.ndarray | None = None  # (H, W) int64 class per model-input pixel
    legend: tuple[tuple[int, str], ...] = ()  # (class, label) of the classes in the mask


def read_output(task: str, output, target, categories: Sequence[str], topk: int,
                want_score: bool = True) -> TaskOutput:
    """The predictions, the target and its score. `target`: a DetectionTarget (or a plain
    rank) for a detection model, a SegmentationTarget (or a plain class index) for a
    segmentation model, or None.
    Without `want_score` (no backward) the score is None, and a target with nothing to
    explain in this image (no such detection, no pixel of that class) is no error; nor is
    an image where nothing is detected when no detection is named (the score is None)."""
    if task == DETECTION:
        # A plain int is a detection's rank too: the predictions view's rows are detections.
        if isinstance(target, SegmentationTarget):
            raise ValueError(f"a detection model explains a detection (det:K), not {target}")
        found = detection.detections(output, categories)
        k = 0 if target is None else int(getattr(target, "index", target))
        if getattr(target, "box", None) is not None:
            k = detection.matching(found, target.box, target.class_index, target.index)
        scores = torch.tensor([[d.score for d in found]], dtype=torch.float32)
        # Nothing detected and no detection named: nothing to explain, no error (the run
        # still shows the activations); a detection named that is not there is an error.
        explain = want_score and (bool(found) or target is not None)
        return TaskOutput(detection.predictions(found, topk), k,
                          detection.score(output, k) if explain else None, scores, found)
    if task == SEGMENTATION:
        if isinstance(target, DetectionTarget):
            raise ValueError(f"a segmentation model explains a class (seg:CLASS), not {target}")
        out = segmentation.logits(output)
        predicted = segmentation.mask(out)
        c = (segmentation.default_class(predicted) if target is None
             else getattr(target, "index", target))
        return TaskOutput(segmentation.predictions(out, predicted, categories, topk), int(c),
                          segmentation.score(out, predicted, int(c), categories)
                          if want_score else None,
                          out.detach().float().to("cpu", copy=True),
                          mask=predicted.cpu().numpy(),
                          legend=segmentation.legend(predicted, categories))
    raise ValueError(f"no task output for a {task} model")


__all__ = [
    "CLASSIFICATION",
    "DETECTION",
    "SEGMENTATION",
    "TaskOutput",
    "example_input",
    "forward",
    "read_output",
    "task_of",
]
