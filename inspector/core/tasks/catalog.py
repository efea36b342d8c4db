"""torchvision's detection and segmentation models, loaded offline.

Pretrained weights are used when their file is in torch hub's cache; otherwise the model is
built with weights=None and weights_backbone=None (nothing is downloaded) and says so. The
classes are the weights' categories (COCO's 91 for detection, VOC's 21 for segmentation).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel, cached_weights_path
from ..preprocess import Preprocess
from . import DETECTION, SEGMENTATION, detection

SEGMENTATION_SIDE = 520  # torchvision's segmentation presets resize to 520


def task_models() -> dict[str, str]:
    """Model name -> task, for torchvision's detection and segmentation catalogs."""
    import torchvision
    from torchvision.models import detection as det
    from torchvision.models import segmentation as seg

    names = {n: DETECTION for n in torchvision.models.list_models(module=det)
             if not n.startswith("keypointrcnn")}  # keypoints: not a box target
    names.update({n: SEGMENTATION for n in torchvision.models.list_models(module=seg)})
    return names


def load(name: str, device: torch.device) -> LoadedModel:
    import torchvision

    task = task_models()[name]
    weights = torchvision.models.get_model_weights(name).DEFAULT
    categories = list(weights.meta.get("categories") or [])
    cached = cached_weights_path(name)
    notes: list[str] = []
    if cached is not None:  # torchvision finds the file in the hub cache and does not download
        model = torchvision.models.get_model(name, weights=weights)
        desc = f"{name} (pretrained {weights.name}, {cached.name})"
    else:
        model = torchvision.models.get_model(name, weights=None, weights_backbone=None,
                                             num_classes=len(categories))
        desc = f"{name} (RANDOM weights: no pretrained file in {Path(torch.hub.get_dir())})"
        notes.append(f"No pretrained weights for {name} on this machine; using random weights.")
    if task == DETECTION:
        # Images in 0..1, resized to a square of the model's own input side: the model
        # normalises and resizes itself; boxes are mapped back to the picture's pixels.
        side = detection.input_side(model)
        pre = Preprocess(crop_size=(side, side), resize_size=None, mean=(0.0, 0.0, 0.0),
                         std=(1.0, 1.0, 1.0))
    else:
        t = weights.transforms()
        side = int(t.resize_size[0]) if getattr(t, "resize_size", None) else SEGMENTATION_SIDE
        pre = Preprocess(crop_size=(side, side), resize_size=None,
                         mean=tuple(getattr(t, "mean", IMAGENET_MEAN)),
                         std=tuple(getattr(t, "std", IMAGENET_STD)))
    return LoadedModel(model=model, name=name, description=desc, pretrained=cached is not None,
                       categories=categories, preprocess=pre, device=device,
                       source=str(cached or ""), notes=notes, task=task)
