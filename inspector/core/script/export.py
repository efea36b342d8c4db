"""Copy as Python: a run written as a standalone script that needs torch, torchvision, numpy
and Pillow, never `inspector`.

`script_for(loaded, request)` returns the script's text. It loads the same model and weights
file the way `core.models.load.load_model` did (from `LoadedModel.spec`), reads and preprocesses
an image as core.inputs.images and core.inputs.preprocess do, registers the run's hooks in plain PyTorch
(forward hooks for the captured outputs, `Tensor.register_hook` for their gradients, one
function per edit of core.edits.interventions) and removes every handle at the end. It prints,
and writes as JSON, the logits and per module the mean, std, min and max of the output of
its first call, and of that output's gradient: the figures of `analyse`'s NPZ for that
image. A run that a script cannot redo raises ScriptExportError, naming the part.

The script's fixed blocks are in core.script.template, its model loading is written by
core.models.script_code; this module picks and fills them.
"""

from __future__ import annotations

import pprint
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from inspector.core.edits import interventions as iv
from inspector.core.models.base import LoadedModel
from inspector.core.models.load import family_named
from inspector.core.models.script_code import ModelCode, ScriptExportError
from inspector.core.run.capture_spec import leaf_names
from inspector.core.run.request import RunRequest
from inspector.core.script import template as tpl


def script_for(
    loaded: LoadedModel, request: RunRequest, modules: Sequence[str] | None = None
) -> str:
    """The standalone script that redoes `request` on `loaded`'s model (see the module doc).

    modules: the modules whose outputs (and gradients) the script records; None: the
    request's captured modules (`capture.modules`), or every leaf without a capture.
    """
    if loaded.task != "classification":  # core.tasks: a list of images in, boxes or masks out
        raise ScriptExportError(f"Copy as Python writes classifier runs; {loaded.name} is a "
                                f"{loaded.task} model")
    part = model_code(loaded)
    names = dict(loaded.model.named_modules())
    captured = _captured(loaded.model, names, request, modules)
    input_size = loaded.preprocess.crop_size
    edits = [_edit(n, item, names, input_size)
             for n, item in enumerate(request.interventions, 1)]
    # The script's backward: the run's gradients (a CAM's run makes them too).
    backward = request.gradients or bool(request.cams)
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
        model_name=repr(loaded.name or "model"),  # what the module tree shows for the root
        image_default=', nargs="?", default=RUN_IMAGE' if image else "",
        show_gradients=tpl.SHOW_GRADIENTS if backward else "",
        json_gradients=tpl.JSON_GRADIENTS if backward else "",
    ))
    return "".join(blocks)


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
        body = ("    if not output.requires_grad:\n"
                "        return None\n"
                "    # A copy, hooked and returned in place of the output: the output itself may\n"
                "    # also be an inner module's (a Sequential returns its last child's), whose\n"
                "    # hooks on it would see the gradient before the scaling.\n"
                "    output = output.clone()\n"
                "    # Tensor.register_hook: called with this tensor's gradient during backward;\n"
                "    # the gradient it returns flows on instead.\n"
                f"    handles.append(output.register_hook(lambda grad: grad * {item.factor!r}))\n"
                "    return output\n")
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
    elif isinstance(item, iv.ProjectOut):
        channels = True
        body = ("    # The concept's unit direction u removed at every position: a - (a . u) u.\n"
                f"    d = channel_dim(output, {item.dim!r})\n"
                f"    u = torch.tensor({list(item.vector)!r}, dtype=output.dtype, "
                "device=output.device)\n"
                "    u = (u / u.norm()).view([-1 if i == d else 1 for i in range(output.ndim)])\n"
                "    return output - (output * u).sum(dim=d, keepdim=True) * u\n")
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
    iv.ProjectOut: "project_out",
}


def _function(name: str, params: str, item: iv.Intervention, body: str) -> str:
    text = _one_line(item.describe())
    doc = f'"""{text}."""' if not set(text) & {'"', "\\"} else repr(text)
    return f"\n\ndef {name}({params}):\n    {doc}\n{body}"


def _registrations(edits: list[_Edit], order: list[str]) -> str:
    """The edits' hook registrations, module by module in forward order, and within a module
    in the order of the run's edits, as core.run.capture.Capture registers them (the order of hooks
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


def _imports(part: ModelCode) -> str:
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


def model_code(loaded: LoadedModel) -> ModelCode:
    """How its family loaded the model, as code (core.models.base.Family.script)."""
    family = family_named(loaded.family) if loaded.family else None
    if loaded.spec is None or family is None:
        raise ScriptExportError(f"{loaded.name} was not loaded by core.models.load.load_model, "
                                f"so how to load it again is not known")
    if family.script is None:
        raise ScriptExportError(f"{loaded.spec.name} is a {family.name} model: a script uses "
                                f"torch, torchvision, numpy and Pillow only, so it cannot load it")
    return family.script(loaded)
