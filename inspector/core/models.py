"""Loading models: torchvision's catalog, checkpoints, pickles, factories; picking a device.

Nothing here downloads: pretrained torchvision weights are used when their file is already
in torch hub's cache, and otherwise the model runs with random weights and says so
(`LoadedModel.pretrained` is False). `download_weights` fetches them when a user asks.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from inspector.core.model_code import run_factory, unpickle_module
from inspector.core.model_files import (
    TRUST_HINT,
    ModelLoadError,
    apply_state_dict,
    read_state_dict,
)
from inspector.core.model_hub import family_of, load_hub_model
from inspector.core.preprocess import Preprocess

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DEFAULT_PREPROCESS = Preprocess(
    crop_size=(224, 224), resize_size=256, mean=IMAGENET_MEAN, std=IMAGENET_STD
)
DEMO_MODEL = "demo_shapes"


@dataclass(frozen=True)
class ModelSpec:
    """What to load. `name` is a catalog name (torchvision or registered) or the architecture
    for `checkpoint`; `factory` is "path/to/file.py:function"; `pickle` a whole saved module,
    loaded only with `trust_pickle` (unpickling runs arbitrary code)."""

    name: str | None = DEMO_MODEL
    checkpoint: str | None = None
    factory: str | None = None
    pickle: str | None = None
    trust_pickle: bool = False
    device: str | None = None
    seed: int | None = None
    trust_remote_code: bool = False

    def what(self) -> str:
        """What is being loaded, for "Could not load ...": the file is named by the reason."""
        if self.pickle:
            return "the pickled model"
        if self.factory:
            return "the model from its factory"
        if self.checkpoint:
            return f"weights for {self.name or DEMO_MODEL}"
        return self.name or "the model"


@dataclass
class LoadedModel:
    model: nn.Module
    name: str
    description: str  # one line for a status bar
    pretrained: bool  # False: random weights, and the UI says so plainly
    categories: list[str]
    preprocess: Preprocess
    device: torch.device
    source: str = ""  # the weights file, when there is one
    notes: list[str] = field(default_factory=list)  # things the user should know
    # What it was loaded from (load_model fills it in): how Copy as Python
    # (core.script_export) writes the same load as code.
    spec: ModelSpec | None = None
    # The seed torch's generator had when the model was built: what reproduces its random
    # weights (ModelSpec.seed). None for weights that all came from files.
    seed: int | None = None
    # "classification", "detection" or "segmentation" (core.tasks): how the model is called,
    # what its output means and which score the gradients start from.
    task: str = "classification"

    def label(self, index: int) -> str:
        return self.categories[index] if 0 <= index < len(self.categories) else f"class {index}"


# -- devices -------------------------------------------------------------------------------


def pick_device(name: str | None = None) -> torch.device:
    """CUDA if available, then MPS, then CPU; or the named device, checked to exist."""
    if name in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise ModelLoadError(f"unknown device '{name}': {e}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device '{name}' asked for, but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device '{name}' asked for, but there are {torch.cuda.device_count()} CUDA devices"
            )
    if dev.type == "mps" and not (torch.backends.mps.is_available()):
        raise ModelLoadError(f"device '{name}' asked for, but MPS is not available here")
    return dev


def available_devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out = [f"cuda:{i}" for i in range(torch.cuda.device_count())] + out
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.insert(0, "mps")
    return out


# -- the catalog -----------------------------------------------------------------------------

Loader = Callable[[torch.device], LoadedModel]
_REGISTRY: dict[str, Loader] = {}


def register_model(name: str, loader: Loader) -> None:
    """Add a model to the catalog (the demo model registers itself this way)."""
    _REGISTRY[name] = loader


def list_models() -> list[str]:
    """Registered models first, then torchvision's classification, detection and
    segmentation models."""
    import torchvision

    from inspector.core.tasks.catalog import task_models

    classifiers = torchvision.models.list_models(module=torchvision.models)
    return sorted(_REGISTRY) + sorted(classifiers) + sorted(task_models())


def _load_demo(device: torch.device) -> LoadedModel:
    from inspector.demo import load_demo_model

    model, meta = load_demo_model(device=str(device))
    p = meta["preprocess"]
    pre = Preprocess(
        crop_size=tuple(p["crop_size"]),
        resize_size=p.get("resize_size"),
        mean=tuple(p["mean"]),
        std=tuple(p["std"]),
        interpolation=p.get("interpolation", "bilinear"),
    )
    return LoadedModel(
        model=model,
        name=DEMO_MODEL,
        description=f"{DEMO_MODEL} (shipped weights, {len(meta['classes'])} shape classes)",
        pretrained=True,
        categories=list(meta["classes"]),
        preprocess=pre,
        device=device,
        source=str(meta.get("weights_path", "")),
    )


register_model(DEMO_MODEL, _load_demo)


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


def _torchvision(name: str, device: torch.device) -> LoadedModel:
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        raise ModelLoadError(
            f"unknown model '{name}': not a torchvision classification model "
            f"(see `network-inspector models`)"
        )
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
        notes.append(f"No pretrained weights for {name} on this machine; using random weights.")
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


# -- checkpoints, pickles, factories ---------------------------------------------------------


def _checkpoint(spec: ModelSpec, device: torch.device) -> LoadedModel:
    import torchvision

    arch = spec.name or DEMO_MODEL
    state = read_state_dict(spec.checkpoint)
    if arch in _task_models():
        # A detection or segmentation model fine-tuned on its own classes.
        from inspector.core.tasks.checkpoints import load_checkpoint

        return load_checkpoint(arch, state, spec.checkpoint, device)
    if arch in _REGISTRY:
        # A registered model's architecture with other weights (a retrained demo model).
        base = _REGISTRY[arch](torch.device("cpu"))
        model, categories, pre = base.model, base.categories, base.preprocess
    elif arch in torchvision.models.list_models(module=torchvision.models):
        num_classes = _head_classes(arch, state)
        model = torchvision.models.get_model(arch, weights=None, num_classes=num_classes)
        weights = torchvision.models.get_model_weights(arch).DEFAULT
        meta_cats = list(weights.meta.get("categories") or [])
        categories = (
            meta_cats
            if len(meta_cats) == num_classes
            else [f"class {i}" for i in range(num_classes)]
        )
        pre = Preprocess.from_transforms(weights.transforms())
    else:
        raise ModelLoadError(
            f"unknown architecture '{arch}' for checkpoint {spec.checkpoint}: not a "
            f"torchvision classification, detection or segmentation model, nor one of "
            f"{', '.join(sorted(_REGISTRY))} (see `network-inspector models`)"
        )
    apply_state_dict(model, state, spec.checkpoint, arch)
    return LoadedModel(
        model=model,
        name=arch,
        description=f"{arch} ({Path(spec.checkpoint).name})",
        pretrained=True,
        categories=categories,
        preprocess=pre,
        device=device,
        source=str(spec.checkpoint),
    )


def _head_classes(arch: str, state: dict[str, torch.Tensor]) -> int:
    """Classes of a fine-tuned checkpoint: the rows of the last 2-D weight (the head)."""
    import torchvision

    default = len(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories", []))
    heads = [v for k, v in state.items() if k.endswith("weight") and v.ndim == 2]
    return int(heads[-1].shape[0]) if heads else (default or 1000)


def _pickle(spec: ModelSpec, device: torch.device) -> LoadedModel:
    path = Path(spec.pickle)
    if path.exists() and not spec.trust_pickle:
        raise ModelLoadError(
            f"{path.name} is a pickled model: unpickling it runs any code inside it, so it is "
            f"opened only with your explicit trust. {TRUST_HINT}"
        )
    obj = unpickle_module(path)
    return _wrap_module(obj, path.stem, f"{path.stem} (trusted pickle {path.name})", device, path)


def _factory(spec: ModelSpec, device: torch.device) -> LoadedModel:
    model, module, path, func = run_factory(spec.factory)
    loaded = _wrap_module(model, func, f"{func} (from {path.name})", device, path)
    classes = getattr(module, "CLASSES", None)
    if classes:
        loaded.categories = list(classes)
    if getattr(module, "PREPROCESS", None):
        try:
            loaded.preprocess = Preprocess(**dict(module.PREPROCESS))
        except (TypeError, ValueError) as e:
            raise ModelLoadError(f"{path.name}: PREPROCESS is not usable: {e}") from None
    return loaded


def _wrap_module(model, name, description, device, path) -> LoadedModel:
    return LoadedModel(
        model=model,
        name=name,
        description=description,
        pretrained=True,
        categories=list(getattr(model, "classes", []) or []),
        preprocess=DEFAULT_PREPROCESS,
        device=device,
        source=str(path),
    )


def load_model(spec: ModelSpec) -> LoadedModel:
    """Load what `spec` names, on its device, in eval mode. Raises ModelLoadError."""
    device = pick_device(spec.device)
    seed = _seed_for_build(spec.seed)
    if spec.pickle:
        loaded = _pickle(spec, device)
    elif spec.factory:
        loaded = _factory(spec, device)
    elif family_of(spec.name):
        loaded = load_hub_model(spec, device)
    elif spec.checkpoint:
        loaded = _checkpoint(spec, device)
    elif spec.name in _REGISTRY:
        loaded = _REGISTRY[spec.name](device)
    elif spec.name and spec.name in _task_models():
        from inspector.core.tasks import catalog

        loaded = catalog.load(spec.name, device)
    elif spec.name:
        loaded = _torchvision(spec.name, device)
    else:
        raise ModelLoadError("no model given")
    loaded.model.to(device).eval()
    loaded.spec = spec
    # A seed the user gave is always recorded; a drawn one only where it made the weights.
    loaded.seed = seed if spec.seed is not None or not loaded.pretrained else None
    if not loaded.pretrained:  # said wherever the description is: how to get them again
        loaded.description += f", seed {seed}"
    if loaded.task == "classification":  # a detection or segmentation model from a factory
        from inspector.core.tasks import task_of

        loaded.task = task_of(loaded.model)
        if loaded.task != "classification" and loaded.preprocess is DEFAULT_PREPROCESS:
            from inspector.core.tasks.catalog import preprocess_for

            loaded.preprocess = preprocess_for(loaded.model, loaded.task)
    if not loaded.categories:
        out = _guess_classes(loaded)
        loaded.categories = [f"class {i}" for i in range(out)]
    return loaded


def _seed_for_build(seed: int | None) -> int:
    """Seed torch's generator for building a model (its random initial weights): with
    `seed`, or else a new one, drawn from the OS, that is returned so it can be recorded."""
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    torch.manual_seed(seed)
    return seed


def _task_models() -> dict[str, str]:
    from inspector.core.tasks.catalog import task_models

    return task_models()


def _guess_classes(loaded: LoadedModel) -> int:
    heads = [m for m in loaded.model.modules() if isinstance(m, nn.Linear)]
    return heads[-1].out_features if heads else 0


def probe_tree(loaded: LoadedModel):
    """The module tree from one forward of zeros; a model that cannot run its own input size
    is the model's fault, said as such (a ModelLoadError). Returns a core.tree.ModuleTree."""
    from inspector.core.tasks import example_input
    from inspector.core.tree import build_tree

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
