"""timm models (`timm:NAME`): built by timm, weights from a file or the local HF cache.

Weights, in this order: the file the user names (`--weights`: safetensors or a state_dict,
read as core.models.files reads every checkpoint), else the model's pretrained weights when
its files are already in the Hugging Face cache (looked up with `try_to_load_from_cache`,
which never uses the network), else random weights, said plainly. Preprocessing comes from
the model's pretrained_cfg (`timm.data.resolve_data_config`), class names from timm's
ImageNet info when the head has 1000 classes.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import Family, LoadedModel, MissingExtra, after_prefix, prefixed
from inspector.core.models.files import (
    ModelLoadError,
    apply_state_dict,
    clean_message,
    read_state_dict,
    short_message,
)

# Files timm's pretrained weights are published as on the HF hub, in timm's preference.
HUB_FILES = ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")


def _timm():
    try:
        import timm
        import timm.data
    except ImportError:
        raise MissingExtra("timm", "timm") from None
    return timm


def list_timm_models() -> list[str]:
    """Every architecture timm can build (for the open-model dialog's list)."""
    return list(_timm().list_models())


def cached_timm_weights(name: str) -> Path | None:
    """The model's default pretrained weights file in the local HF cache, if it is there.

    Looks in the cache only: no network, also without HF_HUB_OFFLINE."""
    timm = _timm()
    try:
        cfg = timm.models.get_pretrained_cfg(name)
    except Exception:  # noqa: BLE001 - an unknown name or tag: no pretrained weights known
        cfg = None
    hub_id = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not hub_id:
        return None
    from huggingface_hub import try_to_load_from_cache

    for filename in HUB_FILES:
        found = try_to_load_from_cache(hub_id, filename)
        if isinstance(found, str) and Path(found).is_file():
            return Path(found)
    return None


def load(spec, device: torch.device) -> LoadedModel:
    timm = _timm()
    name = after_prefix(spec.name)
    if not name:
        raise ModelLoadError(f"'{spec.name}' names no model after 'timm:'")
    if not timm.is_model(name.split(".", 1)[0]):
        raise ModelLoadError(f"unknown timm model '{name}' (timm {timm.__version__} lists "
                             f"{len(timm.list_models())} models: timm.list_models())")
    notes: list[str] = []
    cached = None if spec.checkpoint else cached_timm_weights(name)
    try:
        if cached is not None:
            # timm's own loader from a local file (its checkpoint filters apply), no hub.
            model = timm.create_model(name, pretrained=True,
                                      pretrained_cfg_overlay={"file": str(cached)})
        else:
            model = timm.create_model(name, pretrained=False)
    except Exception as e:  # noqa: BLE001 - timm's own failure, said in one line
        raise ModelLoadError(f"timm could not build '{name}': {type(e).__name__}: "
                             f"{short_message(str(e))}", clean_message(str(e))) from None
    if spec.checkpoint:
        model = _with_weights(timm, name, model, spec.checkpoint)
        desc, source, pretrained = f"timm {name} ({Path(spec.checkpoint).name})", spec.checkpoint, True
    elif cached is not None:
        desc, source, pretrained = f"timm {name} (pretrained, {cached.name} from the HF cache)", \
            str(cached), True
    else:
        desc, source, pretrained = f"timm {name} (RANDOM weights: not in the HF cache)", "", False
    pre, pre_note = timm_preprocess(timm.data.resolve_data_config(model=model))
    if pre_note:
        notes.append(pre_note)
    return LoadedModel(
        model=model,
        name=spec.name,
        description=desc,
        pretrained=pretrained,
        categories=_class_names(timm, model),
        preprocess=pre,
        device=device,
        source=str(source),
        notes=notes,
    )


def _with_weights(timm, name: str, model, path: str):
    """The model with the weights of `path`; a head of another size (a fine-tuned model)
    is rebuilt with the file's number of classes first."""
    state = read_state_dict(path)
    head = f"{model.pretrained_cfg.get('classifier') or ''}.weight"
    rows = state.get(head)
    own = model.state_dict().get(head)
    if rows is not None and own is not None and rows.ndim == 2 and rows.shape[0] != own.shape[0]:
        model = timm.create_model(name, pretrained=False, num_classes=int(rows.shape[0]))
    apply_state_dict(model, state, path, f"timm {name}")
    return model


def timm_preprocess(cfg: dict) -> tuple[Preprocess, str]:
    """Preprocess for timm's resolved data config (input_size, crop_pct, crop_mode,
    interpolation, mean, std), and a note when it is an approximation ("" when exact).

    timm's eval transform in its default 'center' mode, for a square input: resize the
    shorter side to floor(size / crop_pct), then centre-crop: what Preprocess does."""
    _, h, w = cfg["input_size"]
    crop_pct = cfg.get("crop_pct") or 0.875
    interpolation = cfg.get("interpolation") or "bilinear"
    mode = cfg.get("crop_mode") or "center"
    resize = math.floor(min(h, w) / crop_pct)
    notes = []
    if mode != "center" or h != w:
        notes.append(f"timm's '{mode}' crop of a {h} x {w} input is approximated: the shorter "
                     f"side is resized to {resize}, then the centre is cropped.")
    fields = {"crop_size": (h, w), "resize_size": resize, "mean": tuple(cfg["mean"]),
              "std": tuple(cfg["std"])}
    try:
        pre = Preprocess(**fields, interpolation=interpolation)
    except ValueError:  # a resize filter PIL has no name for ("random")
        notes.append(f"timm's '{interpolation}' resize is done as bicubic here.")
        pre = Preprocess(**fields, interpolation="bicubic")
    return pre, " ".join(notes)


def _class_names(timm, model) -> list[str]:
    """ImageNet's class names for a 1000-class head; else "class i"."""
    n = int(getattr(model, "num_classes", 0) or 0)
    if n == 1000:
        try:
            names = timm.data.ImageNetInfo().label_descriptions()
            return [d.split(",")[0].strip() for d in names]
        except Exception:  # noqa: BLE001 - timm without its info files: numbered classes
            pass
    return [f"class {i}" for i in range(n)]


PREFIX = "timm:"
FAMILY = Family(name="timm", claims=prefixed(PREFIX), load=load, extra="timm", module="timm")
