"""Models for the tests, as factory files (`--model PATH:build`): a small seeded CNN, and
torchvision's detection and segmentation models with random weights (weights=None,
weights_backbone=None: nothing downloaded), seeded."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


def small_cnn_factory(classes=("circle", "square", "star"), resize_size=None,
                      inplace: bool = False) -> str:
    """A seeded two-conv classifier on 32 x 32 crops (of `resize_size` when given: then
    the crop leaves a border); `inplace`: its first ReLU works in place."""
    return f'''
import torch
from torch import nn

CLASSES = {list(classes)!r}
PREPROCESS = {{"crop_size": (32, 32), "resize_size": {resize_size!r},
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}}


def build():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace={inplace!r}),
        nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3),
    )
'''


# A factory file (`--model PATH:build`): the catalog's detection model with a box predictor
# bias towards class 1, so that random weights still detect something above torchvision's
# 0.05 score threshold (with 91 near-equal classes every score is ~1/91).
def detection_factory(most: int | None = None) -> str:
    """The factory's source; `most`: torchvision's detections_per_img (fewer boxes make a
    quicker window test), None its default of 100."""
    limit = "" if most is None else f"\n    model.roi_heads.detections_per_img = {most}"
    return f'''
import torch
import torchvision

CLASSES = [f"thing {{i}}" for i in range(91)]


def build():
    torch.manual_seed(0)
    model = torchvision.models.get_model(
        "fasterrcnn_mobilenet_v3_large_320_fpn", weights=None, weights_backbone=None,
        num_classes=91)
    with torch.no_grad():
        model.roi_heads.box_predictor.cls_score.bias[1] += 6.0{limit}
    return model
'''


DETECTION_FACTORY = detection_factory()

SEGMENTATION_FACTORY = '''
import torch
import torchvision

CLASSES = ["background", "cat", "dog"] + [f"class {i}" for i in range(3, 21)]
PREPROCESS = {"crop_size": (160, 160), "resize_size": None,
              "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


def build():
    torch.manual_seed(0)
    return torchvision.models.get_model(
        "deeplabv3_mobilenet_v3_large", weights=None, weights_backbone=None, num_classes=21)
'''


def picture(width: int = 160, height: int = 120, seed: int = 0) -> Image.Image:
    """A smooth random picture (blobs rather than noise: features vary across it)."""
    rng = np.random.default_rng(seed)
    small = torch.from_numpy(rng.random((1, 3, 6, 8), dtype=np.float32))
    big = F.interpolate(small, size=(height, width), mode="bilinear", align_corners=False)[0]
    return Image.fromarray((big.permute(1, 2, 0).numpy() * 255).astype(np.uint8))


def gradcam_by_hand(model, layer: str, call, x: torch.Tensor, score_of) -> torch.Tensor:
    """Grad-CAM at `layer` computed independently of the app: a forward hook keeps the
    layer's output, autograd gives its gradient w.r.t. score_of(output). Returns the map
    upsampled to x's size (unscaled: correlations do not need the scaling)."""
    kept = {}
    module = dict(model.named_modules())[layer]
    handle = module.register_forward_hook(lambda m, a, out: kept.__setitem__("a", out))
    try:
        with torch.enable_grad():
            score = score_of(call(model, x))
            (g,) = torch.autograd.grad(score, kept["a"])
    finally:
        handle.remove()
    a = kept["a"].detach()
    cam = F.relu((g.mean(dim=(2, 3), keepdim=True) * a).sum(1))
    return F.interpolate(cam[:, None], size=tuple(x.shape[-2:]), mode="bilinear",
                         align_corners=False)[0, 0]


def correlation(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(np.corrcoef(a, b)[0, 1])
