"""What every model family shares: what to load (ModelSpec), what was loaded (LoadedModel),
what a family is (Family), and the optional libraries some families need (MissingExtra).

This module imports nothing of the families (core.models.load puts them in its table), so
a family module and the dispatcher can both import it without a circle.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.files import ModelLoadError

if TYPE_CHECKING:
    from inspector.core.models.script_code import ModelCode

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DEFAULT_PREPROCESS = Preprocess(
    crop_size=(224, 224), resize_size=256, mean=IMAGENET_MEAN, std=IMAGENET_STD
)
# The model loaded when none is named: the bundled demo, which inspector.demo registers.
DEFAULT_MODEL = "demo_shapes"
CLASSIFICATION = "classification"


@dataclass(frozen=True)
class ModelSpec:
    """What to load. `name` is a catalog name (torchvision or registered), a prefixed hub
    name (`timm:NAME`, `hf:PATH`) or the architecture for `checkpoint`; `factory` is
    "path/to/file.py:function"; `pickle` a whole saved module, loaded only with
    `trust_pickle` (unpickling runs arbitrary code)."""

    name: str | None = DEFAULT_MODEL
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
            return f"weights for {self.name or DEFAULT_MODEL}"
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
    # What it was loaded from and by which family (load_model fills both in): how Copy as
    # Python (core.script.export) writes the same load as code.
    spec: ModelSpec | None = None
    family: str = ""
    # The seed torch's generator had when the model was built: what reproduces its random
    # weights (ModelSpec.seed). None for weights that all came from files.
    seed: int | None = None
    # "classification", "detection" or "segmentation" (core.tasks): how the model is called,
    # what its output means and which score the gradients start from.
    task: str = CLASSIFICATION

    def label(self, index: int) -> str:
        return self.categories[index] if 0 <= index < len(self.categories) else f"class {index}"


@dataclass(frozen=True)
class Family:
    """One way of loading models: a row of core.models.load's table.

    claims: whether this family loads `spec` (the table asks each family in turn).
    load: the LoadedModel of `spec` on `device`, in any mode (the dispatcher moves it to
        the device and sets eval); raises ModelLoadError with a sentence.
    names: the catalog names it offers (`network-inspector models`, the open-model dialog).
    script: Copy as Python's code for a model it loaded (core.models.script_code.ModelCode), or
        None where a standalone script cannot load such a model (the window says why).
    extra: the pip extra that installs the library it needs (None: none needed), and
    module: that library's import name, checked before loading (MissingExtra).
    """

    name: str
    claims: Callable[[ModelSpec], bool]
    load: Callable[[ModelSpec, torch.device], LoadedModel]
    names: Callable[[], list[str]] = list
    script: Callable[[LoadedModel], ModelCode] | None = None
    extra: str | None = None
    module: str | None = None


class MissingExtra(ModelLoadError):
    """An optional library a model family needs is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"{module} is not installed: pip install 'network-inspector[{extra}]'")


def has_module(module: str) -> bool:
    """Whether `module` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules (set to None)
        return False


def require(family: Family) -> None:
    """MissingExtra unless the library `family` needs is installed."""
    if family.module is not None and not has_module(family.module):
        raise MissingExtra(family.module, family.extra or family.name)


def prefixed(prefix: str) -> Callable[[ModelSpec], bool]:
    """A `claims` for a family named by a prefix of ModelSpec.name ("timm:")."""
    return lambda spec: bool(spec.name) and spec.name.startswith(prefix)


def after_prefix(name: str) -> str:
    """The name after a family's prefix: "resnet18" for "timm:resnet18"."""
    return name.split(":", 1)[1].strip()


def wrap_module(model: nn.Module, name: str, description: str, device: torch.device,
                source: Any) -> LoadedModel:
    """A LoadedModel for a module that came without a catalog entry (a factory, a pickle):
    the classes its `classes` attribute names, ImageNet's preprocessing."""
    return LoadedModel(
        model=model,
        name=name,
        description=description,
        pretrained=True,
        categories=list(getattr(model, "classes", []) or []),
        preprocess=DEFAULT_PREPROCESS,
        device=device,
        source=str(source),
    )
