"""Detection models (torchvision Faster R-CNN, Mask R-CNN, Keypoint R-CNN, RetinaNet, FCOS,
SSD, SSDlite).

They take a list of (3, H, W) images with values in 0..1 (their own GeneralizedRCNNTransform
normalises and resizes, and maps the boxes back to the size it was given) and, in eval mode,
return one dict per image: "boxes" (N, 4) x0 y0 x1 y1, "labels" (N,), "scores" (N,), sorted
by score; Keypoint R-CNN adds "keypoints" (N, K, 3) x y visibility and "keypoints_scores"
(N, K). The scores stay on the autograd graph through the box head and the backbone (the
proposals are detached), so the score of detection K is a target for Grad-CAM like a logit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from inspector.core.records.frames import Prediction


@dataclass(frozen=True)
class Detection:
    index: int  # rank by score, 0 first: what `det:K` names
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in model-input pixels
    label: str
    class_index: int
    score: float
    # Keypoint R-CNN: (x, y, score) of each keypoint in model-input pixels, the score
    # torchvision's (the keypoint heatmap's peak logit); () for other models.
    keypoints: tuple[tuple[float, float, float], ...] = ()


def is_detection_model(model: nn.Module) -> bool:
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    return isinstance(getattr(model, "transform", None), GeneralizedRCNNTransform)


def input_side(model: nn.Module) -> int:
    """The side the model's own transform resizes the shorter side to in eval mode (320,
    800, 300): the last of its sizes (Keypoint R-CNN trains at 640..800, and tests at 800)."""
    return int(model.transform.min_size[-1])


def max_detections(model: nn.Module) -> int:
    """At most this many detections per image (Faster R-CNN keeps them in roi_heads)."""
    for owner in (getattr(model, "roi_heads", None), model):
        n = getattr(owner, "detections_per_img", None)
        if n is not None:
            return int(n)
    return 100


def score_threshold(model: nn.Module) -> float | None:
    """The score under which the model itself drops detections (torchvision: 0.05 for the
    R-CNNs and RetinaNet, 0.2 for FCOS, 0.01 for SSD); None when it has none to tell."""
    for owner in (getattr(model, "roi_heads", None), model):
        value = getattr(owner, "score_thresh", None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def forward(model: nn.Module, x: torch.Tensor):
    """The model's output for a (B, 3, H, W) batch: it takes a list of images."""
    return model(list(x))


def sorted_order(output: dict) -> torch.Tensor:
    """Indices of the first image's detections by descending score (torchvision's NMS
    already sorts them; sorted again so that det:K means the K-th by score for any model)."""
    return torch.argsort(output["scores"].detach(), descending=True, stable=True)


def detections(output: Sequence[dict], categories: Sequence[str]) -> tuple[Detection, ...]:
    """The first image's detections, by descending score."""
    first = output[0]
    order = sorted_order(first).cpu()  # indexes CPU copies (the model may be on a GPU)
    boxes = first["boxes"].detach().float().cpu()[order].tolist()
    labels = first["labels"].detach().cpu()[order].tolist()
    scores = first["scores"].detach().float().cpu()[order].tolist()
    points = _keypoints(first, order) or [()] * len(boxes)
    return tuple(
        Detection(k, tuple(float(v) for v in box), _label(categories, int(c)), int(c), float(s),
                  kp)
        for k, (box, c, s, kp) in enumerate(zip(boxes, labels, scores, points, strict=True))
    )


def _keypoints(first: dict, order: torch.Tensor) -> list[tuple] | None:
    """Each detection's keypoints as ((x, y, score), ...), in `order`; None for a model
    without keypoints."""
    if "keypoints" not in first:
        return None
    xy = first["keypoints"].detach().float().cpu()[order][..., :2]
    kps = first.get("keypoints_scores")
    score = (kps.detach().float().cpu()[order] if kps is not None
             else first["keypoints"].detach().float().cpu()[order][..., 2])
    rows = torch.cat([xy, score[..., None]], dim=-1).tolist()
    return [tuple(tuple(float(v) for v in point) for point in row) for row in rows]


def score(output: Sequence[dict], index: int) -> torch.Tensor:
    """Detection `index`'s class score, on the autograd graph."""
    first = output[0]
    n = int(first["scores"].shape[0])
    if not 0 <= index < n:
        found = "no detection" if n == 0 else f"{n} detection{'s' if n > 1 else ''} (0..{n - 1})"
        raise ValueError(f"det:{index}: the model found {found} in this image")
    return first["scores"][sorted_order(first)[index]]


def matching(found: Sequence[Detection], box, class_index: int | None, rank: int) -> int:
    """The rank of the detection of `class_index` that overlaps `box` most (IoU); ValueError
    with one line when none of that class overlaps it."""
    best, best_iou = None, 0.0
    for d in found:
        if class_index is not None and d.class_index != class_index:
            continue
        overlap = iou(d.box, box)
        if overlap > best_iou:
            best, best_iou = d.index, overlap
    if best is None:
        raise ValueError(f"det:{rank}: no detection of that class overlaps the box chosen "
                         f"in this image")
    return best


def iou(a, b) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def predictions(found: Sequence[Detection], topk: int) -> tuple[Prediction, ...]:
    """The predictions view's rows: the top detections as "label score" (index: K)."""
    return tuple(Prediction(d.index, d.label, d.score, d.score) for d in found[:topk])


def to_original(box, pre, original_size: tuple[int, int]) -> list[float]:
    """A box in model-input pixels as pixels of the original (width, height) image: the app's
    preprocessing undone (the model's own resize torchvision has undone already)."""
    x0, y0 = point_to_original((box[0], box[1]), pre, original_size)
    x1, y1 = point_to_original((box[2], box[3]), pre, original_size)
    return [x0, y0, x1, y1]


def point_to_original(point, pre, original_size: tuple[int, int]) -> list[float]:
    """An (x, y) in model-input pixels (a box's corner, a keypoint) as pixels of the original
    (width, height) image."""
    rw, rh = pre.resized_size(original_size)
    left, top = pre.crop_offset(original_size)
    w, h = original_size
    x, y = (point[0] + left) * w / rw, (point[1] + top) * h / rh
    # torchvision clips boxes to the model input; the picture's part of it is all of it
    # unless the crop padded, where a box can reach the padding: clipped to the picture.
    return [min(max(x, 0.0), float(w)), min(max(y, 0.0), float(h))]


def _label(categories: Sequence[str], index: int) -> str:
    return categories[index] if 0 <= index < len(categories) else f"class {index}"
