"""Hugging Face transformers image classifiers (`hf:PATH`), from a `save_pretrained` folder.

AutoModelForImageClassification loads the model offline (`local_files_only=True`) with the
attention transformers picks (SDPA, fused, where the model supports it): a run that reads
the attention probabilities switches the model to eager attention for that run only
(core.explain.attention.capture), so plain runs keep the fused kernel. Its output is a ModelOutput
(a dict with `logits`), which core.explain.cam.logits_of unwraps; the models take the pixel values
as their first positional argument, so the engine calls them as any other model. Code
shipped in the folder (config.json's `auto_map`) runs only with `trust_remote_code`, the
user's explicit consent, as for pickles.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging as pylogging
from pathlib import Path

import torch

from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import (
    DEFAULT_PREPROCESS,
    Family,
    LoadedModel,
    MissingExtra,
    after_prefix,
    prefixed,
)
from inspector.core.models.files import ModelLoadError, clean_message, short_message

REMOTE_CODE_HINT = (
    "It runs only with your consent: in the window tick 'Run the code in this folder' in "
    "Open model > Hugging Face, on the command line add --trust-remote-code."
)
# PIL's resampling filters by number, as image processors store them.
_RESAMPLE = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
CONVNEXT_WARP_SIZE = 384  # ConvNeXt's processor: from this size on it resizes without a crop


def _transformers():
    try:
        import transformers
    except ImportError:
        raise MissingExtra("transformers", "hf") from None
    return transformers


def hf_folder(path: str) -> Path:
    """The save_pretrained folder named, checked: it exists and has a config.json."""
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ModelLoadError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise ModelLoadError(f"{folder} is a file: hf: takes the folder save_pretrained wrote")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} has no config.json: not a folder save_pretrained wrote")
    return folder


def needs_remote_code(folder: Path) -> bool:
    """Whether the folder's config maps its classes to code of its own (auto_map)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{folder / 'config.json'} cannot be read: {e}") from None
    return isinstance(config, dict) and bool(config.get("auto_map"))


def load(spec, device: torch.device) -> LoadedModel:
    transformers = _transformers()
    if not after_prefix(spec.name):
        raise ModelLoadError(f"'{spec.name}' names no model after 'hf:'")
    folder = hf_folder(after_prefix(spec.name))
    trust = bool(spec.trust_remote_code)
    if needs_remote_code(folder) and not trust:
        raise ModelLoadError(f"{folder.name} holds its own model code (auto_map in "
                             f"config.json): loading it runs that code. {REMOTE_CODE_HINT}")
    with _quiet(transformers) as report:
        try:
            model = transformers.AutoModelForImageClassification.from_pretrained(
                str(folder), local_files_only=True, trust_remote_code=trust)
        except Exception as e:  # noqa: BLE001 - transformers' reasons are many; one line each
            raise _load_error(folder, e, report.getvalue()) from None
    pre, notes = _preprocess(transformers, folder, trust, model.config)
    id2label = dict(getattr(model.config, "id2label", None) or {})
    n = int(getattr(model.config, "num_labels", 0) or len(id2label))
    categories = [str(id2label.get(i, id2label.get(str(i), f"class {i}"))) for i in range(n)]
    return LoadedModel(
        model=model,
        name=spec.name,
        description=f"{type(model).__name__} from {folder.name}",
        pretrained=True,
        categories=categories,
        preprocess=pre,
        device=device,
        source=str(folder),
        notes=notes,
    )


@contextlib.contextmanager
def _quiet(transformers):
    """transformers' own output kept off the user's terminal while a model loads: its
    progress bars ("Loading weights: 100%") and its load report (a table of every tensor
    that did not fit, in colour), which is kept for the error's details instead."""
    logging = transformers.utils.logging
    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    report = io.StringIO()
    handler = pylogging.StreamHandler(report)
    logging.disable_default_handler()
    logging.add_handler(handler)
    # The report is a warning: read whatever verbosity the user's code set (error hides it).
    verbosity = logging.get_verbosity()
    logging.set_verbosity(min(verbosity, logging.WARNING))
    try:
        yield report
    finally:
        logging.set_verbosity(verbosity)
        logging.remove_handler(handler)
        logging.enable_default_handler()
        if bars:
            logging.enable_progress_bar()


def _load_error(folder: Path, e: Exception, report: str) -> ModelLoadError:
    """One sentence; a load report (tensors whose shapes do not fit the config) is summed
    up in it and kept whole in the details."""
    report = clean_message(report)
    mismatched = [line.split("|")[0].strip() for line in report.splitlines()
                  if "| MISMATCH" in line]
    if mismatched:
        reason = (f"{len(mismatched)} of its tensors do not fit the shapes its config.json "
                  f"gives ({', '.join(mismatched[:2])}{', ...' if len(mismatched) > 2 else ''})")
    else:
        reason = f"{type(e).__name__}: {short_message(str(e))}"
    return ModelLoadError(f"transformers could not load {folder.name} as an image classifier: "
                          f"{reason}", "\n".join(filter(None, [report, clean_message(str(e))])))


def _preprocess(transformers, folder: Path, trust: bool, config=None
                ) -> tuple[Preprocess, list[str]]:
    """The folder's AutoImageProcessor as a Preprocess; without one, ImageNet's mean and
    std at the model's own image size (config.image_size), said in a note."""

    if not (folder / "preprocessor_config.json").is_file():
        side = getattr(config, "image_size", None)
        pre = DEFAULT_PREPROCESS
        if isinstance(side, int) and side > 0 and (side, side) != pre.crop_size:
            pre = Preprocess(crop_size=(side, side), resize_size=side * 256 // 224,
                             mean=pre.mean, std=pre.std)
        return pre, [f"{folder.name} has no preprocessor_config.json: the input is resized "
                     f"to {pre.crop_size[0]} pixels and normalised as for ImageNet."]
    try:
        processor = transformers.AutoImageProcessor.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=trust)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"{folder.name}: its image processor cannot be read: "
                             f"{type(e).__name__}: {short_message(str(e))}"
                             ) from None
    return processor_preprocess(processor)


def _field(value, key: str):
    """A size's field: SizeDict (transformers 5) attribute or dict (4.x) key."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)


def processor_preprocess(p) -> tuple[Preprocess, list[str]]:
    """Preprocess for an image processor's size, crop, resample, mean and std (ViT, DeiT,
    BEiT, Swin, ConvNeXt, ResNet processors), and notes where it is an approximation."""
    notes: list[str] = []
    size = getattr(p, "size", None)
    h, w, short = _field(size, "height"), _field(size, "width"), _field(size, "shortest_edge")
    crop = getattr(p, "crop_size", None) if getattr(p, "do_center_crop", False) else None
    ch, cw = _field(crop, "height"), _field(crop, "width")
    crop_pct = getattr(p, "crop_pct", None)
    if not getattr(p, "do_resize", True):
        raise ModelLoadError("the image processor does not resize: the model then takes "
                             "images of any size, which this app does not support")
    if short and crop_pct and short < CONVNEXT_WARP_SIZE and crop is None:
        crop_hw, resize = (short, short), int(short / crop_pct)  # ConvNeXt below 384
    elif short and crop is not None:
        crop_hw, resize = (ch, cw), short
    elif short:
        crop_hw, resize = (short, short), None  # ConvNeXt from 384 on: a plain resize
    elif h and w and crop is not None:
        crop_hw, resize = (ch, cw), min(h, w)
        notes.append(f"The processor resizes to {h} x {w} and then crops; here the shorter "
                     f"side is resized to {min(h, w)}, keeping the aspect ratio: the same for "
                     f"square images.")
    elif h and w:
        crop_hw, resize = (h, w), None
    else:
        raise ModelLoadError(f"the image processor's size {size!r} is not one this app reads")
    resample = getattr(p, "resample", 2)
    interpolation = _RESAMPLE.get(int(resample) if resample is not None else 2, "bilinear")
    if getattr(p, "do_normalize", True):
        mean, std = tuple(p.image_mean), tuple(p.image_std)
    else:
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    rescale = getattr(p, "rescale_factor", 1 / 255) if getattr(p, "do_rescale", True) else 1.0
    if abs(rescale * 255 - 1) > 1e-6:
        # Preprocess scales 8-bit values to 0..1: fold another factor into mean and std.
        k = rescale * 255
        mean, std = tuple(m / k for m in mean), tuple(s / k for s in std)
    return Preprocess(crop_size=crop_hw, resize_size=resize, mean=mean, std=std,
                      interpolation=interpolation), notes


PREFIX = "hf:"
FAMILY = Family(name="hf", claims=prefixed(PREFIX), load=load, extra="hf", module="transformers")
