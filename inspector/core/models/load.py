"""Loading a model: the table of model families, and the one entry point, `load_model`.

Each family (core.models.base.Family) says whether it loads a ModelSpec, loads it, lists its
catalog names and writes Copy as Python's code for it. The table asks them in order: the
files that name themselves (a trusted pickle, a factory file), the families other packages
register (the bundled demo model, `inspector.demo`, through the entry point group
"network_inspector.model_families" in the package metadata, so that core never imports
it), the prefixed hubs (`timm:`, `hf:`), then torchvision's classifiers and its
detection and segmentation models. A new family is a module with a FAMILY and a row here (or an
entry point of its own package).
"""

from __future__ import annotations

import os
import threading
import traceback
from dataclasses import replace
from importlib import metadata

import torch
from torch import nn

from inspector.core.models import factory, hf_models, task_models, timm_models, torchvision_models
from inspector.core.models.base import (
    CLASSIFICATION,
    DEFAULT_MODEL,
    DEFAULT_PREPROCESS,
    Family,
    LoadedModel,
    ModelSpec,
    require,
)
from inspector.core.models.devices import pick_device
from inspector.core.models.files import ModelLoadError
from inspector.core.models.tree import ModuleTree, build_tree
from inspector.core.tasks import example_input, task_of

ENTRY_POINTS = "network_inspector.model_families"
BUILT_IN = (factory.PICKLE, factory.FACTORY)
HUBS = (timm_models.FAMILY, hf_models.FAMILY, torchvision_models.FAMILY, task_models.FAMILY)

_registered: list[Family] = []
_discovered = False
_lock = threading.Lock()


def register_family(family: Family) -> None:
    """Add a family before the hubs (a program's own models; a name it claims wins over a
    torchvision name). Registering a family of the same name again replaces it."""
    with _lock:
        _registered[:] = [f for f in _registered if f.name != family.name] + [family]


def families() -> tuple[Family, ...]:
    """The table, in the order it is asked: pickle and factory files, registered families
    (entry points found once, on first use), then the hubs and torchvision's classifiers,
    detection and segmentation models."""
    global _discovered
    with _lock:
        if not _discovered:
            _discovered = True
            for point in metadata.entry_points(group=ENTRY_POINTS):
                family = point.load()
                if not any(f.name == family.name for f in _registered):
                    _registered.append(family)
        return (*BUILT_IN, *_registered, *HUBS)


def family_for(spec: ModelSpec) -> Family | None:
    """The first family that claims `spec`; None when none does."""
    if spec.checkpoint and not spec.name:
        spec = replace(spec, name=DEFAULT_MODEL)
    return next((f for f in families() if f.claims(spec)), None)


def family_named(name: str) -> Family | None:
    return next((f for f in families() if f.name == name), None)


def list_models() -> list[str]:
    """Every catalog name, registered families' first, then torchvision's classification,
    detection and segmentation models (the hubs' models are named with their prefix)."""
    names: list[str] = []
    for family in families():
        if family.module is None:  # a hub's catalog is its own library's (timm.list_models)
            names.extend(family.names())
    return names


def load_model(spec: ModelSpec) -> LoadedModel:
    """Load what `spec` names, on its device, in eval mode. Raises ModelLoadError."""
    device = pick_device(spec.device)
    seed = _seed_for_build(spec.seed)
    named = replace(spec, name=DEFAULT_MODEL) if spec.checkpoint and not spec.name else spec
    family = family_for(named)
    if family is None:
        raise ModelLoadError(_unknown(named))
    require(family)
    loaded = family.load(named, device)
    loaded.model.to(device).eval()
    loaded.spec, loaded.family = spec, family.name
    # A seed the user gave is always recorded; a drawn one only where it made the weights.
    loaded.seed = seed if spec.seed is not None or not loaded.pretrained else None
    if not loaded.pretrained:  # said wherever the description is: how to get them again
        loaded.description += f", seed {seed}"
    if loaded.task == CLASSIFICATION:  # a detection or segmentation model from a factory
        loaded.task = task_of(loaded.model)
        if loaded.task != CLASSIFICATION and loaded.preprocess is DEFAULT_PREPROCESS:
            loaded.preprocess = task_models.preprocess_for(loaded.model, loaded.task)
    if not loaded.categories:
        loaded.categories = [f"class {i}" for i in range(_guess_classes(loaded.model))]
    return loaded


def _unknown(spec: ModelSpec) -> str:
    if not spec.name:
        return "no model given"
    own = sorted(n for f in families()[len(BUILT_IN):len(BUILT_IN) + len(_registered)]
                 for n in f.names())
    if spec.checkpoint:
        return (f"unknown architecture '{spec.name}' for checkpoint {spec.checkpoint}: not a "
                f"torchvision classification, detection or segmentation model, nor one of "
                f"{', '.join(own) or 'the registered models'} (see `network-inspector models`)")
    return (f"unknown model '{spec.name}': not a torchvision classification model "
            f"(see `network-inspector models`)")


def _seed_for_build(seed: int | None) -> int:
    """Seed torch's generator for building a model (its random initial weights): with
    `seed`, or else a new one, drawn from the OS, that is returned so it can be recorded."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    torch.manual_seed(seed)
    return seed


def _guess_classes(model: nn.Module) -> int:
    heads = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return heads[-1].out_features if heads else 0


def probe_tree(loaded: LoadedModel) -> ModuleTree:
    """The module tree from one forward of zeros; a model that cannot run its own input size
    is the model's fault, said as such (a ModelLoadError)."""
    h, w = loaded.preprocess.crop_size
    example = torch.zeros(1, 3, h, w, device=loaded.device)
    try:
        return build_tree(loaded.model, example_input(loaded.task, example))
    except Exception as e:
        raise ModelLoadError(
            f"{loaded.name} loaded, but fails on an input of 1 x 3 x {h} x {w}: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            traceback.format_exc(),
        ) from e
