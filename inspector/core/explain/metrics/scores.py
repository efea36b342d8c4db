"""The score the metrics follow as they perturb the input: what "the model still sees the
class" means for each kind of model.

- A classifier: the softmax probability of the explained class (RISE's, torch-cam's).
- A detection model: the score of the detection that matches the one explained (the same
  class and an IoU of at least 0.5 with its box), 0 when none does.
- A segmentation model: the explained class's softmax probability, averaged over the pixels
  the unperturbed run predicted as that class. (A CAM explains the class's logit summed
  over those pixels; the metrics need a number in [0, 1] that means the same on every image.)

A Scorer is called with a batch of perturbed model inputs and returns one score per input,
float32 on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from inspector.core.explain.cam.targets import logits_of
from inspector.core.explain.metrics.names import CLASS_PROBABILITY

IOU_MATCH = 0.5
DETECTION_SCORE = (f"the highest score of a detection of the explained one's class whose box "
                   f"overlaps its box with an IoU of {IOU_MATCH} or more (0 when none does)")
SEGMENTATION_SCORE = ("the explained class's softmax probability averaged over the pixels "
                      "the run predicted as that class")


@dataclass
class Scorer:
    model: nn.Module
    call: Callable[[nn.Module, torch.Tensor], Any]  # how the model takes a batch
    read: Callable[[Any], torch.Tensor]  # its output -> (n,) scores
    text: str  # what the score is, for the protocol ("the softmax probability of ...")

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return self.read(self.call(self.model, batch)).detach().float().cpu()


def score_text(task: str) -> str:
    """What the metrics' score is for a model of `task` (core.tasks' names), in words."""
    return {"detection": DETECTION_SCORE, "segmentation": SEGMENTATION_SCORE}.get(
        task, CLASS_PROBABILITY)


def class_scores(output: Any) -> torch.Tensor:
    """The (B, K) class scores of a classifier's output; ValueError, one sentence, for an
    output that is not class scores (the metrics need a class probability)."""
    logits = logits_of(output)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"the model's output is {tuple(logits.shape)}, not class scores: "
                         f"the metrics need a class probability")
    return logits


def class_probability(model: nn.Module, index: int) -> Scorer:
    """The softmax probability of class `index`."""

    def read(output: Any) -> torch.Tensor:
        logits = class_scores(output)
        if not 0 <= index < logits.shape[1]:
            raise ValueError(f"class {index} is out of range 0..{logits.shape[1] - 1}")
        return logits.float().softmax(dim=-1)[:, index]

    return Scorer(model, lambda m, b: m(b), read, CLASS_PROBABILITY)


def detection_score(model: nn.Module, box, class_index: int) -> Scorer:
    """The score of the detection of `class_index` whose box overlaps `box` (model-input
    pixels) with an IoU of at least IOU_MATCH; 0 where there is none."""
    from inspector.core.tasks.detection import forward

    target = torch.tensor(box, dtype=torch.float32)

    def read(output: Any) -> torch.Tensor:
        scores = []
        for found in output:
            boxes = found["boxes"].detach().float().cpu()
            same = found["labels"].detach().cpu() == class_index
            best = 0.0
            if boxes.numel() and bool(same.any()):
                iou = box_iou(boxes[same], target)
                hits = found["scores"].detach().float().cpu()[same][iou >= IOU_MATCH]
                best = float(hits.max()) if hits.numel() else 0.0
            scores.append(best)
        return torch.tensor(scores, dtype=torch.float32)

    return Scorer(model, forward, read, DETECTION_SCORE)


def box_iou(boxes: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
    """IoU of each (N, 4) x0 y0 x1 y1 box with one box."""
    lo = torch.maximum(boxes[:, :2], box[:2])
    hi = torch.minimum(boxes[:, 2:], box[2:])
    inter = (hi - lo).clamp_min(0).prod(dim=1)
    area = (boxes[:, 2:] - boxes[:, :2]).clamp_min(0).prod(dim=1)
    union = area + (box[2:] - box[:2]).clamp_min(0).prod() - inter
    return inter / union.clamp_min(1e-12)


def segmentation_probability(model: nn.Module, index: int, where: np.ndarray) -> Scorer:
    """Class `index`'s softmax probability averaged over the pixels of `where` (the mask
    of the unperturbed run's prediction of that class, at the model input's size)."""
    from inspector.core.tasks.segmentation import logits

    pixels = torch.from_numpy(np.asarray(where, dtype=bool))
    if not bool(pixels.any()):
        raise ValueError(f"no pixel of this image is predicted as class {index}: the "
                         f"metrics follow that class's pixels")

    def read(output: Any) -> torch.Tensor:
        probs = logits(output).float().softmax(dim=1)[:, index]  # (n, H, W)
        mask = pixels.to(probs.device)
        return (probs * mask).sum(dim=(1, 2)) / mask.sum()

    return Scorer(model, lambda m, b: m(b), read, SEGMENTATION_SCORE)
