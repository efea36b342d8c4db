"""torchvision's classification models: its catalog, their checkpoints, and the way back as
code (Copy as Python).

Nothing here downloads: pretrained weights are used when their file is already in torch
hub's cache, and otherwise the model runs with random weights and says so
(`LoadedModel.pretrained` is False). `download_weights` fetches them when a user asks.
A checkpoint (`--model ARCH --weights FILE`) is built with the class count its head has.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import Family, LoadedModel, ModelSpec
from inspector.core.models.files import apply_state_dict, read_state_dict
from inspector.core.models.script_code import ModelCode, ScriptExportError, absolute, labels_literal


def classifiers() -> list[str]:
    """torchvision's classification models, by name."""
    import torchvision

    return torchvision.models.list_models(module=torchvision.models)


def cached_weights_path(name: str) -> Path | None:
    """Where torch hub keeps this model's default weights, if the file is there."""
    import torchvision

    try:
        weights = torchvision.models.get_model_weights(name).DEFAULT
    except (ValueError, KeyError, AttributeError):
        return None
    path = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)
    return path if path.is_file() else None


def download_weights(name: str) -> Path:
    """Fetch the default pretrained weights into torch hub's cache (needs a network)."""
    import torchvision

    weights = torchvision.models.get_model_weights(name).DEFAULT
    weights.get_state_dict(progress=True)
    path = cached_weights_path(name)
    if path is None:
        raise OSError(f"the download ended, but {os.path.basename(weights.url)} is not in "
                      f"{Path(torch.hub.get_dir()) / 'checkpoints'}")
    return path


def load(spec: ModelSpec, device: torch.device) -> LoadedModel:
    if spec.checkpoint:
        return _checkpoint(spec.name, spec.checkpoint, device)
    import torchvision

    name = spec.name
    weights = torchvision.models.get_model_weights(name).DEFAULT
    categories = list(weights.meta.get("categories") or [])
    pre = Preprocess.from_transforms(weights.transforms())
    cached = cached_weights_path(name)
    notes = []
    if cached is not None:
        # torchvision finds the file in the hub cache and does not download.
        model = torchvision.models.get_model(name, weights=weights)
        desc = f"{name} (pretrained {weights.name}, {cached.name})"
    else:
        model = torchvision.models.get_model(name, weights=None)
        _reinit_zero_heads(model, notes)
        desc = f"{name} (RANDOM weights: no pretrained file in {Path(torch.hub.get_dir())})"
    return LoadedModel(
        model=model,
        name=name,
        description=desc,
        pretrained=cached is not None,
        categories=categories,
        preprocess=pre,
        device=device,
        source=str(cached or ""),
        notes=notes,
    )


def _reinit_zero_heads(model: nn.Module, notes: list[str]) -> None:
    """torchvision's vit_* initialise the head to zeros: with random weights every logit and
    every gradient would be 0. Give such heads small random weights instead."""
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear) and not m.weight.any():
            nn.init.normal_(m.weight, std=0.01)
            notes.append(f"{name}: zero-initialised head given small random weights")


def _checkpoint(arch: str, path: str, device: torch.device) -> LoadedModel:
    import torchvision

    state = read_state_dict(path)
    num_classes = _head_classes(arch, state)
    model = torchvision.models.get_model(arch, weights=None, num_classes=num_classes)
    weights = torchvision.models.get_model_weights(arch).DEFAULT
    meta_cats = list(weights.meta.get("categories") or [])
    categories = (meta_cats if len(meta_cats) == num_classes
                  else [f"class {i}" for i in range(num_classes)])
    apply_state_dict(model, state, path, arch)
    return LoadedModel(
        model=model,
        name=arch,
        description=f"{arch} ({Path(path).name})",
        pretrained=True,
        categories=categories,
        preprocess=Preprocess.from_transforms(weights.transforms()),
        device=device,
        source=str(path),
    )


def _head_classes(arch: str, state: dict[str, torch.Tensor]) -> int:
    """Classes of a fine-tuned checkpoint: the rows of the last 2-D weight (the head)."""
    import torchvision

    default = len(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories", []))
    heads = [v for k, v in state.items() if k.endswith("weight") and v.ndim == 2]
    return int(heads[-1].shape[0]) if heads else (default or 1000)


# -- Copy as Python ------------------------------------------------------------------------------


def script(loaded: LoadedModel) -> ModelCode:
    spec = loaded.spec
    if spec is not None and spec.checkpoint:
        return _checkpoint_code(loaded, loaded.name, absolute(spec.checkpoint))
    import torchvision

    name = loaded.name
    if not loaded.pretrained:
        return _random_weights_code(loaded)
    weights = torchvision.models.get_model_weights(name).DEFAULT
    enum = type(weights).__name__
    expr = (f"torchvision.models.{enum}.{weights.name}"
            if getattr(torchvision.models, enum, None) is type(weights)
            else f"torchvision.models.get_model_weights({name!r}).{weights.name}")
    code = (
        f"# -- The model: torchvision's {name} with its pretrained weights --\n\n"
        f"WEIGHTS = {expr}\n"
        f'LABELS = WEIGHTS.meta["categories"]\n\n\n'
        f"def load_model():\n"
        f"    # torchvision reads the weights from torch hub's cache (Network Inspector used\n"
        f"    # {loaded.source}) and downloads them there only where they are missing.\n"
        f"    return torchvision.models.get_model({name!r}, weights=WEIGHTS)\n"
    )
    return ModelCode(code, loaded.source, imports={"import torchvision"})


def _checkpoint_code(loaded: LoadedModel, arch: str, weights: str) -> ModelCode:
    import torchvision

    meta = list(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories") or [])
    labels = (f'torchvision.models.get_model_weights({arch!r}).DEFAULT.meta["categories"]'
              if meta and meta == loaded.categories else labels_literal(loaded.categories))
    classes = len(loaded.categories)  # the rows of the checkpoint's head (_head_classes)
    code = (
        f"# -- The model: torchvision's {arch} architecture with a checkpoint's weights --\n\n"
        f"LABELS = {labels}\n"
        f"WEIGHTS = {weights!r}\n\n\n"
        f"def load_model():\n"
        f"    model = torchvision.models.get_model({arch!r}, weights=None, "
        f"num_classes={classes})\n"
        f"    model.load_state_dict(read_state_dict(WEIGHTS), strict=True)\n"
        f"    return model\n"
    )
    return ModelCode(code, weights, {"import torchvision"}, safetensors=True, checkpoint=True)


FAMILY = Family(
    name="torchvision",
    claims=lambda spec: bool(spec.name) and spec.name in classifiers(),
    load=load,
    names=lambda: sorted(classifiers()),
    script=script,
)


def _random_weights_code(loaded: LoadedModel) -> ModelCode:
    """Random weights drawn again: load_model seeds torch's generator right before it builds
    the model, so the same seed, torch and torchvision give the same weights."""
    name = loaded.name
    if loaded.seed is None:
        raise ScriptExportError(
            f"{name} has random weights drawn without a recorded seed, which a script cannot "
            f"draw again: open it with a seed, or save them with "
            f"torch.save(model.state_dict(), PATH) and open that file as its checkpoint")
    heads = ""
    if any("zero-initialised head" in note for note in loaded.notes):
        heads = ("    # As in the window: a head initialised to zeros would make every logit\n"
                 "    # and gradient 0, so it gets small random weights.\n"
                 "    for module in model.modules():\n"
                 "        if isinstance(module, torch.nn.Linear) and not module.weight.any():\n"
                 "            torch.nn.init.normal_(module.weight, std=0.01)\n")
    code = (
        f"# -- The model: torchvision's {name} with the random weights of seed {loaded.seed} --\n"
        f"# (no pretrained file was on the machine; the same torch and torchvision versions\n"
        f"# draw the same weights from the same seed)\n\n"
        f"SEED = {loaded.seed}\n"
        f"LABELS = torchvision.models.get_model_weights({name!r}).DEFAULT.meta[\"categories\"]\n"
        f"\n\n"
        f"def load_model():\n"
        f"    torch.manual_seed(SEED)\n"
        f"    model = torchvision.models.get_model({name!r}, weights=None)\n"
        f"{heads}"
        f"    return model\n"
    )
    return ModelCode(code, f"random weights, seed {loaded.seed}",
                     imports={"import torch", "import torchvision"})
