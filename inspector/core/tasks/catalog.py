"""torchvision's detection and segmentation models, loaded offline.

Pretrained weights are used when their file is in torch hub's cache; otherwise the model is
built with weights=None and weights_backbone=None (nothing is downloaded) and says so. The
classes are the weights' categories (COCO's 91 for detection, Keypoint R-CNN's background
and person, VOC's 21 for segmentation). A checkpoint for one of these architectures is
loaded by checkpoints.py.
"""

from __future__ import annotations

from pathlib import Path

import torch

from inspector.core.models import IMAGENET_MEAN, IMAGENET_STD, LoadedModel, cached_weights_path
from inspector.core.preprocess import Preprocess
from inspector.core.tasks import DETECTION, SEGMENTATION, detection

SEGMENTATION_SIDE = 520  # torchvision's segmentation presets resize to 520


def task_models() -> dict[str, str]:
    """Model name -> task, for torchvision's detection and segmentation catalogs."""
    import torchvision
    from torchvision.models import detection as det
    from torchvision.models import segmentation as seg

    # Keypoint R-CNN is a Faster R-CNN with a keypoint head: its boxes are detections, and
    # each detection carries its keypoints (detection.Detection.keypoints).
    names = {n: DETECTION for n in torchvision.models.list_models(module=det)}
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
    pre = preprocess_for(model, task, weights.transforms())
    return LoadedModel(model=model, name=name, description=desc, pretrained=cached is not None,
                       categories=categories, preprocess=pre, device=device,
                       source=str(cached or ""), notes=notes, task=task)


def preprocess_for(model, task: str, preset=None) -> Preprocess:
    """The app's preprocessing for a detection or segmentation model: the image resized to
    a square (nothing cropped, so every box and pixel maps back onto the picture).
    Detection: values in 0..1 at the model's own input side (it normalises and resizes
    itself). Segmentation: the preset's side (520) and normalisation, ImageNet's without one."""
    if task == DETECTION:
        side = detection.input_side(model)
        return Preprocess(crop_size=(side, side), resize_size=None, mean=(0.0, 0.0, 0.0),
                          std=(1.0, 1.0, 1.0))
    resize = getattr(preset, "resize_size", None)
    side = int(resize[0]) if resize else SEGMENTATION_SIDE
    return Preprocess(crop_size=(side, side), resize_size=None,
                      mean=tuple(getattr(preset, "mean", IMAGENET_MEAN)),
                      std=tuple(getattr(preset, "std", IMAGENET_STD)))
