"""Copy as Python, the model: how each kind of model that core.models.load_model loads is
written as code for the script (core.script_export), from `LoadedModel.spec`.

The demo model's classes are pasted in (the script must not import inspector); torchvision
models are built by name, with their weights enum or a checkpoint read as core.model_files
reads it; factory files are imported by path; trusted pickles are unpickled.
"""

from __future__ import annotations

import inspect
import pprint
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from inspector.core.model_hub import family_of
from inspector.core.models import DEMO_MODEL, LoadedModel, ModelSpec


class ScriptExportError(ValueError):
    """This run cannot be written as a script; the one-line message says which part."""


@dataclass
class ModelCode:
    code: str  # LABELS, any weights path, load_model()
    weights: str = ""  # the file the weights come from, for the summary
    imports: set[str] = field(default_factory=set)
    safetensors: bool = False  # needs read_safetensors
    checkpoint: bool = False  # needs read_state_dict
    inlined: bool = False  # model classes pasted in (they use Tensor and nn)


def model_code(loaded: LoadedModel) -> ModelCode:
    """How load_model loaded it (the same order of cases), as code."""
    spec = loaded.spec
    if spec is None:
        raise ScriptExportError(f"{loaded.name} was not loaded by core.models.load_model, so "
                                f"how to load it again is not known")
    if family_of(spec.name):
        raise ScriptExportError(f"{spec.name} is a {family_of(spec.name)} model: a script "
                                f"uses torch, torchvision, numpy and Pillow only, so it cannot "
                                f"load it")
    if spec.pickle:
        return _pickle(loaded, spec)
    if spec.factory:
        return _factory(loaded, spec)
    if spec.checkpoint:
        arch = spec.name or DEMO_MODEL
        if arch == DEMO_MODEL:
            return _demo(loaded, _absolute(spec.checkpoint), checkpoint=True)
        return _torchvision_checkpoint(loaded, arch, _absolute(spec.checkpoint))
    if spec.name == DEMO_MODEL:
        return _demo(loaded, _absolute(loaded.source), checkpoint=False)
    return _torchvision(loaded, spec.name or "")


def _demo(loaded: LoadedModel, weights: str, checkpoint: bool) -> ModelCode:
    from inspector.demo import demo_config
    from inspector.demo import model as demo

    if not isinstance(loaded.model, demo.ShapesCNN):
        raise ScriptExportError(f"{loaded.name} is not the demo architecture "
                                f"({type(loaded.model).__name__})")
    try:
        source = "\n\n".join(inspect.getsource(o) for o in (demo.ConvBNReLU, demo.ShapesCNN,
                                                              demo.build_model))
    except (OSError, TypeError):  # a frozen build without the .py files
        raise ScriptExportError("the demo model's source code is not part of this "
                                "installation, so it cannot be pasted into a script") from None
    # The architecture's size as load_demo_model builds it (a checkpoint for the demo
    # architecture is loaded into the shipped configuration, as core.models does).
    folder = None if checkpoint else Path(weights).parent
    config = demo_config(folder)
    read = "read_state_dict" if checkpoint else "read_safetensors"
    code = (
        f"# -- The model: {DEMO_MODEL}, as Network Inspector defines it "
        f"(inspector/demo/model.py) --\n\n\n{source}\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"WEIGHTS = {weights!r}\n\n\n"
        f"def load_model():\n"
        f"    model = build_model({len(config['classes'])}, {tuple(config['arch']['widths'])!r})\n"
        f"    model.load_state_dict({read}(WEIGHTS), strict=True)\n"
        f"    return model\n"
    )
    return ModelCode(code, weights, safetensors=True, checkpoint=checkpoint, inlined=True)


def _torchvision(loaded: LoadedModel, name: str) -> ModelCode:
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        raise ScriptExportError(f"'{name}' is neither the demo model nor a torchvision model, "
                                f"so a script cannot load it")
    if not loaded.pretrained:
        raise ScriptExportError(
            f"{name} has random weights (no pretrained file on this machine), which a script "
            f"cannot draw again: save them with torch.save(model.state_dict(), PATH) and open "
            f"that file as the checkpoint for {name}")
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


def _torchvision_checkpoint(loaded: LoadedModel, arch: str, weights: str) -> ModelCode:
    import torchvision

    if arch not in torchvision.models.list_models(module=torchvision.models):
        raise ScriptExportError(f"'{arch}' is neither the demo model nor a torchvision "
                                f"architecture, so a script cannot build it")
    meta = list(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories") or [])
    labels = (f'torchvision.models.get_model_weights({arch!r}).DEFAULT.meta["categories"]'
              if meta and meta == loaded.categories else labels_literal(loaded.categories))
    classes = len(loaded.categories)  # core.models: the rows of the checkpoint's head
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


def _factory(loaded: LoadedModel, spec: ModelSpec) -> ModelCode:
    _own_classes(loaded.model, "the factory's model")
    func = (spec.factory or "").rpartition(":")[2]
    path = _absolute(loaded.source)
    call = f"module.{func}" if func.isidentifier() else f"getattr(module, {func!r})"
    code = (
        f"# -- The model: {func}() of {Path(path).name} --\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"FACTORY_FILE = {path!r}\n\n\n"
        f"def load_model():\n"
        f"    # Import the file as a module and call its factory with no arguments, as\n"
        f"    # Network Inspector did. This runs the file's code.\n"
        f'    spec = importlib.util.spec_from_file_location("model_factory", FACTORY_FILE)\n'
        f"    module = importlib.util.module_from_spec(spec)\n"
        f"    sys.modules[spec.name] = module  # dataclasses and pickling look it up here\n"
        f"    spec.loader.exec_module(module)\n"
        f"    return {call}()\n"
    )
    return ModelCode(code, path, {"import importlib.util", "import sys"})


def _pickle(loaded: LoadedModel, spec: ModelSpec) -> ModelCode:
    _own_classes(loaded.model, "the pickled model")
    path = _absolute(spec.pickle or loaded.source)
    code = (
        f"# -- The model: a whole module saved with torch.save(model) --\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"PICKLED_MODEL = {path!r}\n\n\n"
        f"def load_model():\n"
        f"    # weights_only=False unpickles the whole module, and unpickling runs code from the\n"
        f"    # file (its classes must be importable here). Network Inspector opened it because\n"
        f"    # you said you trust the file; do the same here.\n"
        f'    with open(PICKLED_MODEL, "rb") as f:\n'
        f'        return torch.load(f, map_location="cpu", weights_only=False)\n'
    )
    return ModelCode(code, path)


def _own_classes(model: nn.Module, what: str) -> None:
    """A model built from inspector's classes cannot be loaded without importing inspector."""
    ours = sorted({type(m).__module__ for m in model.modules()
                   if type(m).__module__.split(".")[0] == "inspector"})
    if ours:
        raise ScriptExportError(f"{what} is built from Network Inspector's own classes (in "
                                f"{', '.join(ours)}), so its script would import inspector")


def labels_literal(values: Sequence) -> str:
    """A list as Python source, wrapped; None for the "class i" names load_model made up."""
    values = list(values)
    if values and values == [f"class {i}" for i in range(len(values))]:
        return "None"
    return pprint.pformat(values, width=96, compact=True)


def _absolute(path: str | None) -> str:
    return str(Path(path or "").expanduser().resolve())
