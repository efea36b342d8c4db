"""The demo model as a model family of core.models: `demo_shapes`, with its shipped weights
or a checkpoint for its architecture (a retrained demo), and its Copy as Python code.

Registered through the package's entry point (group "network_inspector.model_families" in
pyproject.toml): core finds it without importing this package by name.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import Family, LoadedModel, ModelSpec
from inspector.core.models.files import apply_state_dict, read_state_dict
from inspector.core.models.script_code import ModelCode, ScriptExportError, absolute, labels_literal
from inspector.demo import demo_config, load_demo_model
from inspector.demo import model as demo

NAME = "demo_shapes"


def load(spec: ModelSpec, device: torch.device) -> LoadedModel:
    model, meta = load_demo_model(device=str(device))
    p = meta["preprocess"]
    loaded = LoadedModel(
        model=model,
        name=NAME,
        description=f"{NAME} (shipped weights, {len(meta['classes'])} shape classes)",
        pretrained=True,
        categories=list(meta["classes"]),
        preprocess=Preprocess(
            crop_size=tuple(p["crop_size"]),
            resize_size=p.get("resize_size"),
            mean=tuple(p["mean"]),
            std=tuple(p["std"]),
            interpolation=p.get("interpolation", "bilinear"),
        ),
        device=device,
        source=str(meta.get("weights_path", "")),
    )
    if spec.checkpoint:  # the demo's architecture with other weights (a retrained demo)
        apply_state_dict(model, read_state_dict(spec.checkpoint), spec.checkpoint, NAME)
        loaded.description = f"{NAME} ({Path(spec.checkpoint).name})"
        loaded.source = str(spec.checkpoint)
    return loaded


def script(loaded: LoadedModel) -> ModelCode:
    checkpoint = bool(loaded.spec is not None and loaded.spec.checkpoint)
    weights = absolute(loaded.spec.checkpoint if checkpoint else loaded.source)
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
    # architecture is loaded into the shipped configuration, as `load` does).
    config = demo_config(None if checkpoint else Path(weights).parent)
    read = "read_state_dict" if checkpoint else "read_safetensors"
    code = (
        f"# -- The model: {NAME}, as Network Inspector defines it "
        f"(inspector/demo/model.py) --\n\n\n{source}\n\n"
        f"LABELS = {labels_literal(loaded.categories)}\n"
        f"WEIGHTS = {weights!r}\n\n\n"
        f"def load_model():\n"
        f"    model = build_model({len(config['classes'])}, {tuple(config['arch']['widths'])!r})\n"
        f"    model.load_state_dict({read}(WEIGHTS), strict=True)\n"
        f"    return model\n"
    )
    return ModelCode(code, weights, safetensors=True, checkpoint=checkpoint, inlined=True)


FAMILY = Family(name="demo", claims=lambda spec: spec.name == NAME, load=load,
                names=lambda: [NAME], script=script)
