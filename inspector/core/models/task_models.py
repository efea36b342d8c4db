"""torchvision's detection and segmentation models, loaded offline, and their checkpoints.

Pretrained weights are used when their file is in torch hub's cache; otherwise the model is
built with weights=None and weights_backbone=None (nothing is downloaded) and says so. The
classes are the weights' categories (COCO's 91 for detection, Keypoint R-CNN's background
and person, VOC's 21 for segmentation).

A checkpoint (`--model ARCH --weights FILE`: a model fine-tuned on its own classes, 3 classes
and the background, say) is built with the head sizes the checkpoint's own tensors give,
then loaded strictly. Which tensor holds the class count differs by architecture
(Faster/Mask/Keypoint R-CNN's `cls_score` rows, RetinaNet's and SSD's classification convs
with one row per class per anchor, DeepLabV3's and FCN's `classifier.4`, LR-ASPP's
`low_classifier`...): rather than a table of names and anchor counts, the architecture is
built for 1 and for 2 classes on the meta device (no memory, no initialisation), and the
tensor that grows between the two says where the count is and by how much per class.
Keypoint R-CNN's keypoint count is read the same way.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import IMAGENET_MEAN, IMAGENET_STD, Family, LoadedModel, ModelSpec
from inspector.core.models.files import apply_state_dict, read_state_dict
from inspector.core.models.torchvision_models import cached_weights_path
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


def load(spec: ModelSpec, device: torch.device) -> LoadedModel:
    if spec.checkpoint:
        return load_checkpoint(spec.name, read_state_dict(spec.checkpoint), spec.checkpoint,
                               device)
    import torchvision

    name = spec.name
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


# -- checkpoints ---------------------------------------------------------------------------------

State = dict[str, torch.Tensor]


def load_checkpoint(arch: str, state: State, path, device: torch.device) -> LoadedModel:
    """`arch` (a name of task_models()) with the weights in `state`, read from
    `path`. Raises ModelLoadError; a checkpoint made for another architecture names the
    mismatched keys (model_files.CheckpointMismatch)."""
    import torchvision

    task = task_models()[arch]
    options = build_options(arch, state)
    model = torchvision.models.get_model(arch, **options)
    apply_state_dict(model, with_norm_counters(model, state), path, arch)
    weights = torchvision.models.get_model_weights(arch).DEFAULT
    n = options["num_classes"]
    made_for = f"{n} classes"
    if "num_keypoints" in options:
        made_for += f", {options['num_keypoints']} keypoints"
    return LoadedModel(
        model=model,
        name=arch,
        description=f"{arch} ({Path(path).name}, {made_for})",
        pretrained=True,
        categories=class_names(arch, n),
        preprocess=preprocess_for(model, task, weights.transforms()),
        device=device,
        source=str(path),
        task=task,
    )


def build_options(arch: str, state: State) -> dict:
    """The keyword arguments that build `arch` to fit `state`: no downloaded weights, the
    checkpoint's class count (and keypoint count), and the auxiliary head when the
    checkpoint has one (FCN, DeepLabV3). A count the checkpoint does not give (no such
    tensor: another architecture's file) is the default weights' one: the strict load
    then names what does not fit."""
    import torchvision

    options: dict = {"weights": None, "weights_backbone": None}
    builder = torchvision.models.get_model_builder(arch)
    if "aux_loss" in inspect.signature(builder).parameters:
        options["aux_loss"] = any(k.startswith("aux_classifier.") for k in state)
    meta = torchvision.models.get_model_weights(arch).DEFAULT.meta
    options["num_classes"] = (head_count(arch, state, "num_classes", options)
                              or len(meta.get("categories") or []) or 1)
    if "keypoint_names" in meta:  # Keypoint R-CNN
        options["num_keypoints"] = (head_count(arch, state, "num_keypoints", options)
                                    or len(meta["keypoint_names"]))
    return options


def head_count(arch: str, state: State, option: str, options: dict) -> int | None:
    """How many classes (`option` "num_classes") or keypoints ("num_keypoints") the
    checkpoint's head tensors are made for; None when it has no such tensor, or one of a
    size no count fits."""
    one, two = (_meta_shapes(arch, {**options, option: n}) for n in (1, 2))
    for key, small in one.items():
        big = two[key]
        if big == small:
            continue
        # A tensor that grows with the count: `per` more along `dim` for each one more.
        dim = next(d for d, (a, b) in enumerate(zip(small, big, strict=True)) if a != b)
        per, fixed = big[dim] - small[dim], 2 * small[dim] - big[dim]
        found = state.get(key)
        if found is None or found.ndim != len(small):
            return None
        count, rest = divmod(int(found.shape[dim]) - fixed, per)
        return count if rest == 0 and count > 0 else None
    return None


def _meta_shapes(arch: str, options: dict) -> dict[str, tuple[int, ...]]:
    """The state_dict's shapes of `arch` built with `options`, on the meta device."""
    import torchvision

    with torch.device("meta"):
        model = torchvision.models.get_model(arch, **options)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def with_norm_counters(model: torch.nn.Module, state: State) -> State:
    """`state` with the model's own `num_batches_tracked` where it has none. torchvision
    builds a detection backbone with FrozenBatchNorm2d when it starts from pretrained
    weights (how people fine-tune), which keeps no such counter, and with BatchNorm2d when
    built without weights, as here. The counter only steers training's running averages:
    the statistics themselves are in the file."""
    own = model.state_dict()
    missing = {k: v for k, v in own.items()
               if k.endswith(".num_batches_tracked") and k not in state}
    return {**state, **missing} if missing else state


def class_names(arch: str, n: int) -> list[str]:
    """The default weights' categories (COCO's, VOC's) when the head has as many classes,
    else "class 0".."class N-1", as for a classifier's checkpoint."""
    import torchvision

    names = list(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories")
                 or [])
    return names if len(names) == n else [f"class {i}" for i in range(n)]



FAMILY = Family(
    name="torchvision-tasks",
    claims=lambda spec: bool(spec.name) and spec.name in task_models(),
    load=load,
    names=lambda: sorted(task_models()),
)
