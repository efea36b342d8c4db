"""Copy as Python: a run written as a standalone script that needs torch, torchvision, numpy
and Pillow, never `inspector`.

`script_for(loaded, request)` returns the script's text. It loads the same model and weights
file the way `core.models.load_model` did (from `LoadedModel.spec`), reads and preprocesses
an image as core.images and core.preprocess do, registers the run's hooks in plain PyTorch
(forward hooks for the captured outputs, `Tensor.register_hook` for their gradients, one
function per edit of core.interventions) and removes every handle at the end. It prints,
and writes as JSON, the logits and per module the mean, std, min and max of the output of
its first call, and of that output's gradient: the figures of `analyse`'s NPZ for that
image. A run that a script cannot redo raises ScriptExportError, naming the part.

The script's fixed blocks are in core.script_template; this module picks and fills them.
"""

from __future__ import annotations

import inspect
import pprint
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from . import interventions as iv
from . import script_template as tpl
from .capture_spec import leaf_names
from .models import DEMO_MODEL, LoadedModel, ModelSpec
from .run import RunRequest


class ScriptExportError(ValueError):
    """This run cannot be written as a script; the one-line message says which part."""


def script_for(
    loaded: LoadedModel, request: RunRequest, modules: Sequence[str] | None = None
) -> str:
    """The standalone script that redoes `request` on `loaded`'s model (see the module doc).

    modules: the modules whose outputs (and gradients) the script records; None: the
    request's captured modules (`capture.modules`), or every leaf without a capture.
    """
    part = _model_part(loaded)
    names = dict(loaded.model.named_modules())
    captured = _captured(loaded.model, names, request, modules)
    input_size = loaded.preprocess.crop_size
    edits = [_edit(n, item, names, input_size)
             for n, item in enumerate(request.interventions, 1)]
    capture = request.capture
    backward = request.backward or bool(request.cams) or capture is None or capture.needs_grad
    target = request.target
    if target is not None and loaded.categories and not 0 <= target < len(loaded.categories):
        raise ScriptExportError(f"target class {target} is not one of the model's "
                                f"{len(loaded.categories)} classes")
    image = request.image if isinstance(request.image, (str, Path)) else None
    if image is not None:
        image = str(Path(image).expanduser().resolve())

    blocks = [tpl.HEADER.substitute(
        title=f"A Network Inspector run of {loaded.name}, as a standalone script.",
        summary=_summary(loaded, part, edits, captured, backward, target, image),
        image_hint=" [IMAGE]" if image else " IMAGE",
        grad_words=" (and of the gradient of the score w.r.t. that output)" if backward else "",
        grad_json=', "gradients": {...}' if backward else "",
        imports=_imports(part),
    )]
    if part.safetensors:
        blocks.append(tpl.SAFETENSORS)
    if part.checkpoint:
        blocks.append(tpl.CHECKPOINT)
    # isort: one blank line after the imports, PEP 8: two after a function.
    blocks.append(("\n" if len(blocks) == 1 else "\n\n") + part.code)
    blocks.append(tpl.IMAGE.substitute(
        crop_size=repr(tuple(loaded.preprocess.crop_size)),
        resize_size=repr(loaded.preprocess.resize_size),
        resample=_RESAMPLE[loaded.preprocess.interpolation],
        mean=repr(tuple(loaded.preprocess.mean)),
        std=repr(tuple(loaded.preprocess.std)),
        stretch=repr(bool(request.stretch)),
        run_image=f"\n# The image of the run: what the script reads without an IMAGE.\n"
                  f"RUN_IMAGE = {image!r}\n" if image else "",
    ))
    blocks.append(tpl.CAPTURE.substitute(
        captured=pprint.pformat(captured, width=96, compact=True),
        target=repr(target),
        grad_registration=tpl.GRAD_REGISTRATION if backward else "",
        grad_hook=tpl.GRAD_HOOK if backward else "",
    ))
    if edits:
        blocks.append(_EDITS_HEAD)
        if any(e.channels for e in edits):
            blocks.append(tpl.CHANNEL_DIM)
        blocks.append("".join(e.definition for e in edits))
    blocks.append(tpl.RUN.substitute(
        device_choice={"cuda": tpl.DEVICE_CUDA, "mps": tpl.DEVICE_MPS}.get(
            loaded.device.type, tpl.DEVICE_CPU),
        edits=_registrations(edits, list(names)),
        forward=tpl.FORWARD_WITH_GRAD if backward else tpl.FORWARD_NO_GRAD,
    ))
    blocks.append(tpl.MAIN.substitute(
        image_default=', nargs="?", default=RUN_IMAGE' if image else "",
        show_gradients=tpl.SHOW_GRADIENTS if backward else "",
        json_gradients=tpl.JSON_GRADIENTS if backward else "",
    ))
    return "".join(blocks)


# -- the model --------------------------------------------------------------------------------


@dataclass
class _ModelPart:
    code: str  # LABELS, any weights path, load_model()
    weights: str = ""  # the file the weights come from, for the summary
    imports: set[str] = field(default_factory=set)
    safetensors: bool = False  # needs read_safetensors
    checkpoint: bool = False  # needs read_state_dict
    inlined: bool = False  # model classes pasted in (they use Tensor and nn)


def _model_part(loaded: LoadedModel) -> _ModelPart:
    """How load_model loaded it (the same order of cases), as code."""
    spec = loaded.spec
    if spec is None:
        raise ScriptExportError(f"{loaded.name} was not loaded by core.models.load_model, so "
                                f"how to load it again is not known")
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


def _demo(loaded: LoadedModel, weights: str, checkpoint: bool) -> _ModelPart:
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
        f"LABELS = {_literal(loaded.categories)}\n"
        f"WEIGHTS = {weights!r}\n\n\n"
        f"def load_model():\n"
        f"    model = build_model({len(config['classes'])}, {tuple(config['arch']['widths'])!r})\n"
        f"    model.load_state_dict({read}(WEIGHTS), strict=True)\n"
        f"    return model\n"
    )
    return _ModelPart(code, weights, safetensors=True, checkpoint=checkpoint, inlined=True)


def _torchvision(loaded: LoadedModel, name: str) -> _ModelPart:
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
    return _ModelPart(code, loaded.source, imports={"import torchvision"})


def _torchvision_checkpoint(loaded: LoadedModel, arch: str, weights: str) -> _ModelPart:
    import torchvision

    if arch not in torchvision.models.list_models(module=torchvision.models):
        raise ScriptExportError(f"'{arch}' is neither the demo model nor a torchvision "
                                f"architecture, so a script cannot build it")
    meta = list(torchvision.models.get_model_weights(arch).DEFAULT.meta.get("categories") or [])
    labels = (f'torchvision.models.get_model_weights({arch!r}).DEFAULT.meta["categories"]'
              if meta and meta == loaded.categories else _literal(loaded.categories))
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
    return _ModelPart(code, weights, {"import torchvision"}, safetensors=True, checkpoint=True)


def _factory(loaded: LoadedModel, spec: ModelSpec) -> _ModelPart:
    _own_classes(loaded.model, "the factory's model")
    func = (spec.factory or "").rpartition(":")[2]
    path = _absolute(loaded.source)
    call = f"module.{func}" if func.isidentifier() else f"getattr(module, {func!r})"
    code = (
        f"# -- The model: {func}() of {Path(path).name} --\n\n"
        f"LABELS = {_literal(loaded.categories)}\n"
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
    return _ModelPart(code, path, {"import importlib.util", "import sys"})


def _pickle(loaded: LoadedModel, spec: ModelSpec) -> _ModelPart:
    _own_classes(loaded.model, "the pickled model")
    path = _absolute(spec.pickle or loaded.source)
    code = (
        f"# -- The model: a whole module saved with torch.save(model) --\n\n"
        f"LABELS = {_literal(loaded.categories)}\n"
        f"PICKLED_MODEL = {path!r}\n\n\n"
        f"def load_model():\n"
        f"    # weights_only=False unpickles the whole module, and unpickling runs code from the\n"
        f"    # file (its classes must be importable here). Network Inspector opened it because\n"
        f"    # you said you trust the file; do the same here.\n"
        f'    with open(PICKLED_MODEL, "rb") as f:\n'
        f'        return torch.load(f, map_location="cpu", weights_only=False)\n'
    )
    return _ModelPart(code, path)


def _own_classes(model: nn.Module, what: str) -> None:
    """A model built from inspector's classes cannot be loaded without importing inspector."""
    ours = sorted({type(m).__module__ for m in model.modules()
                   if type(m).__module__.split(".")[0] == "inspector"})
    if ours:
        raise ScriptExportError(f"{what} is built from Network Inspector's own classes (in "
                                f"{', '.join(ours)}), so its script would import inspector")


# -- what is captured ---------------------------------------------------------------------------


def _captured(model: nn.Module, names: dict[str, nn.Module], request: RunRequest,
              modules: Sequence[str] | None) -> list[str]:
    if modules is not None:
        wanted = list(modules)
    elif request.capture is not None:
        wanted = list(request.capture.modules)
    else:
        wanted = leaf_names(model)
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ScriptExportError(f"no module named {', '.join(map(repr, unknown))} in the model")
    chosen = set(wanted)
    return [n for n in names if n in chosen]  # forward order of named_modules()


# -- the edits --------------------------------------------------------------------------------

_EDITS_HEAD = """

# -- The edits of the run, one hook function each ------------------------------------------------
# A forward hook (module, args, output) that returns a tensor replaces the module's output;
# a forward pre-hook (module, args) that returns a tuple replaces its inputs.
"""


@dataclass
class _Edit:
    module: str
    description: str
    definition: str
    registration: str  # "register_forward_hook(edit_1_clamp)"
    channels: bool = False  # needs channel_dim / channel_mask


def _edit(n: int, item: iv.Intervention, names: dict[str, nn.Module],
          input_size: tuple[int, int]) -> _Edit:
    if item.module not in names:
        raise ScriptExportError(f"the edit '{item.describe()}' names module '{item.module}', "
                                f"which the model does not have")
    kind = _EDIT_NAMES.get(type(item))
    if kind is None:
        raise ScriptExportError(f"the edit '{item.describe()}' ({type(item).__name__}) has no "
                                f"script form")
    fn = f"edit_{n}_{kind}"
    if isinstance(item, iv.Occlude):
        x0, y0, x1, y1 = item.box
        h, w = input_size
        if item.module == "" and not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
            raise ScriptExportError(f"occlusion box {list(item.box)} is not inside the "
                                    f"{w} x {h} model input")
        body = (f"    x = args[0]\n"
                f"    keep = torch.ones((1, 1, *x.shape[-2:]), dtype=x.dtype, device=x.device)\n"
                f"    keep[..., {y0}:{y1}, {x0}:{x1}] = 0\n"
                f"    return (x * keep + {item.value!r} * (1 - keep), *args[1:])\n")
        return _Edit(item.module, _one_line(item.describe()), _function(fn, "module, args", item, body),
                     f"register_forward_pre_hook({fn})")
    channels = False
    if isinstance(item, iv.ScaleGradient):
        body = ("    if output.requires_grad:\n"
                "        # Tensor.register_hook: called with this output's gradient during\n"
                "        # backward; the gradient it returns flows on instead.\n"
                f"        handles.append(output.register_hook(lambda grad: grad * {item.factor!r}))"
                "\n")
    elif isinstance(item, iv.Clamp):
        body = f"    return output.clamp({item.min!r}, {item.max!r})\n"
    elif isinstance(item, iv.AddNoise):
        if item.seed is None:
            raise ScriptExportError(f"the edit '{item.describe()}' draws new noise on every "
                                    f"run (no seed), which a script cannot repeat: give it a seed")
        body = ("    # Drawn on the CPU with its own generator, so that the seed gives the same\n"
                "    # noise on every device.\n"
                "    generator = torch.Generator()\n"
                f"    generator.manual_seed({item.seed!r})\n"
                "    noise = torch.randn(output.shape, generator=generator, dtype=torch.float32)\n"
                f"    return output + ({item.std!r} * noise).to(device=output.device, "
                "dtype=output.dtype)\n")
    elif isinstance(item, iv.ReplaceWithMean):
        channels = True
        body = ("    # Each channel's mean over the positions of each sample (over the channels\n"
                "    # for a (B, C) output).\n"
                f"    d = channel_dim(output, {item.dim!r})\n"
                "    positions = [i for i in range(1, output.ndim) if i != d] or [d]\n"
                "    return output.mean(dim=positions, keepdim=True).expand_as(output)\n")
    elif isinstance(item, iv.ScaleChannels) and not item.channels:
        body = f"    return output * {item.factor!r}\n"
    else:  # ZeroChannels, KeepChannels, ScaleChannels of some channels
        channels = True
        value, keep = {iv.ZeroChannels: (0.0, False), iv.KeepChannels: (0.0, True)}.get(
            type(item), (getattr(item, "factor", 1.0), False))
        args = f"{list(item.channels)!r}, {value!r}, {item.dim!r}" + (", keep=True" if keep else "")
        body = f"    return output * channel_mask(output, {args})\n"
    return _Edit(item.module, _one_line(item.describe()), _function(fn, "module, args, output", item, body),
                 f"register_forward_hook({fn})", channels)


_EDIT_NAMES = {
    iv.ZeroChannels: "zero_channels", iv.KeepChannels: "keep_channels",
    iv.ScaleChannels: "scale", iv.Clamp: "clamp", iv.AddNoise: "noise",
    iv.ReplaceWithMean: "mean", iv.ScaleGradient: "scale_gradient", iv.Occlude: "occlude",
}


def _function(name: str, params: str, item: iv.Intervention, body: str) -> str:
    text = _one_line(item.describe())
    doc = f'"""{text}."""' if not set(text) & {'"', "\\"} else repr(text)
    return f"\n\ndef {name}({params}):\n    {doc}\n{body}"


def _registrations(edits: list[_Edit], order: list[str]) -> str:
    """The edits' hook registrations, module by module in forward order, and within a module
    in the order of the run's edits, as core.hooks.Capture registers them (the order of hooks
    on different modules does not matter)."""
    if not edits:
        return ""
    lines = ["",
             "        # The edits first: a module's hooks run in the order they were registered,",
             "        # so the capture hooks below see the edited output, as the next modules do."]
    for module in sorted({e.module for e in edits}, key=order.index):
        target = "model" if module == "" else f"modules[{module!r}]"
        lines += [f"        handles.append({target}.{e.registration})"
                  for e in edits if e.module == module]
    return "\n".join(lines)


# -- text ---------------------------------------------------------------------------------------


def _imports(part: _ModelPart) -> str:
    """The script's imports, grouped and sorted as isort would."""
    standard = sorted({"import argparse", "import json"} | {i for i in part.imports
                                                            if "torchvision" not in i})
    third = ["import numpy as np", "import torch"]
    third += sorted(i for i in part.imports if "torchvision" in i)
    third += ["from PIL import Image, ImageOps"]
    if part.inlined:
        third.append("from torch import Tensor, nn")
    return "\n".join(standard) + "\n\n" + "\n".join(third) + "\n"


_RESAMPLE = {
    "nearest": "NEAREST", "nearest-exact": "NEAREST", "bilinear": "BILINEAR",
    "bicubic": "BICUBIC", "box": "BOX", "hamming": "HAMMING", "lanczos": "LANCZOS",
}


def _summary(loaded, part, edits, captured, backward, target, image) -> str:
    lines = [f"Model: {loaded.description}"]
    if part.weights:
        lines.append(f"Weights: {part.weights}")
    if image:
        lines.append(f"Image of the run: {image}")
    lines.append("Edits: none" if not edits else "Edits, each a hook function below:")
    lines += [f"  {n}. {e.description}" for n, e in enumerate(edits, 1)]
    lines.append(f"Captured: the outputs of {len(captured)} modules" + (
        f", and their gradients: backward of the score of "
        f"{'the top-1 class' if target is None else f'class {target}'}" if backward else ""))
    text = "\n".join(lines) + "\n"
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _literal(values: Sequence) -> str:
    """A list as Python source, wrapped; None for the "class i" names load_model made up."""
    values = list(values)
    if values and values == [f"class {i}" for i in range(len(values))]:
        return "None"
    return pprint.pformat(values, width=96, compact=True)


def _absolute(path: str | None) -> str:
    return str(Path(path or "").expanduser().resolve())
