"""Files out: DIR/atlas.json, the crops of the top images, the per-class Grad-CAM maps.

An entry that is a video's frame names the video's path and the frame ("frame": its index,
from 0); an image file's entry has no "frame".

JSON is written to a `.part` file and moved into place, so a reader never sees half a file.
Values are written as the shortest decimal that reads back as the same float32.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch.nn.functional as F
from PIL import Image

from inspector.batch.boxes import Box, Entry
from inspector.batch.engine.shards import write_text_atomic
from inspector.batch.inputs import Source, VideoFrames
from inspector.batch.names import safe_name
from inspector.batch.reduce import Reduction
from inspector.core.export.files import colorize, save_png
from inspector.core.inputs.images import ImageLoadError, load_image

CROP_SIDE = 96  # the crops' longer side, in pixels


def _f32(v: float) -> float | None:
    """The shortest decimal of a float32; None for NaN and infinities (not JSON)."""
    v = float(v)
    if not math.isfinite(v):
        return None
    return float(str(np.float32(v)))


def entries_of(total: Reduction) -> list[Entry]:
    """Every (layer, channel, rank) of the final top lists."""
    out = []
    for name, layer in total.layers.items():
        index, pos = layer.top_index.cpu().tolist(), layer.top_pos.cpu().tolist()
        for c, (row_i, row_p) in enumerate(zip(index, pos)):
            out.extend(Entry(name, c, r, i, p) for r, (i, p) in enumerate(zip(row_i, row_p)))
    return out


def where(source: Source) -> dict[str, Any]:
    """An entry's "path", and its "frame" when it is a video's frame."""
    if source.frame is None:
        return {"path": str(source.path)}
    return {"path": str(source.path), "frame": source.frame}


def atlas_document(
    model: str,
    weights: str | None,
    sources: list[Source],
    total: Reduction,
    boxes: dict[Entry, Box],
    missing: list[tuple[str, str]],
) -> dict[str, Any]:
    """atlas.json's content. `missing`: (path, reason) of inputs that were never in the job."""
    failed = [{"path": p, "error": e} for p, e in missing]
    failed += [{**where(sources[i]), "error": e} for i, e in sorted(total.failed)]
    layers: dict[str, Any] = {}
    n = total.images
    for name, layer in total.layers.items():
        values = layer.top_value.cpu().tolist()
        index = layer.top_index.cpu().tolist()
        pos = layer.top_pos.cpu().tolist()
        top = {}
        for c, row in enumerate(zip(values, index, pos)):
            top[str(c)] = []
            for r, (v, i, p) in enumerate(zip(*row)):
                box = boxes.get(Entry(name, c, r, i, p))
                top[str(c)].append({**where(sources[i]), "value": _f32(v),
                                    "box": list(box) if box is not None else None})
        positive = layer.positive.cpu()
        layers[name] = {
            "channels": len(values),
            "top": top,
            "mean": [_f32(m / n) if n else None for m in layer.sum_mean.cpu().tolist()],
            "active_fraction": [_f32(p / n) if n else 0.0 for p in positive.tolist()],
            "dead": [c for c, p in enumerate(positive.tolist()) if p == 0] if n else [],
        }
    return {
        "model": model,
        "weights": weights,
        "images": n,
        "failed": failed,
        "layers": layers,
    }


# A list of numbers (a box, a map row) that json.dumps spread over lines: one line again.
_NUMBER_LIST = re.compile(r"\[\n\s*([-+.\deEnul,\s]*?)\n\s*\]")


def write_json(path: Path, doc: Any) -> Path:
    text = json.dumps(doc, indent=1)
    text = _NUMBER_LIST.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    write_text_atomic(path, text + "\n")
    return path


# -- crops ----------------------------------------------------------------------------------------


def crop_path(out: Path, layer: str, channel: int, rank: int) -> Path:
    return out / "crops" / safe_name(layer) / str(channel) / f"{rank}.png"


def write_crops(out: Path, sources: list[Source], boxes: dict[Entry, Box],
                every: int = 1) -> list[str]:
    """DIR/crops/<layer>/<channel>/<rank>.png for every boxed entry: the box's part of the
    original image, its longer side scaled to CROP_SIDE. Each image is decoded once; video
    frames in index order, so each video is decoded once, front to back (`every`: the
    stride of its frames). Returns the errors of images that could not be read again."""
    by_image: dict[int, list[Entry]] = defaultdict(list)
    for e in boxes:
        by_image[e.index].append(e)
    errors = []
    with VideoFrames(every) as videos:
        for index in sorted(by_image):
            source = sources[index]
            try:
                image = (load_image(source.path) if source.frame is None
                         else videos.read(source))
            except ImageLoadError as err:
                errors.append(str(err) if source.frame is None
                              else f"{source}: {err.reason}")
                continue
            for e in by_image[index]:
                crop = image.crop(boxes[e])
                w, h = crop.size
                scale = CROP_SIDE / max(w, h)
                size = (max(1, round(w * scale)), max(1, round(h * scale)))
                crop = crop.resize(size, Image.Resampling.LANCZOS)
                save_png(crop_path(out, e.layer, e.channel, e.rank), np.asarray(crop))
    return errors


# -- class maps -----------------------------------------------------------------------------------


def write_classes(out: Path, total: Reduction, categories: list[str], cam_layer: str,
                  input_hw: tuple[int, int]) -> dict[str, Any]:
    """DIR/classes.json (per predicted class: the mean Grad-CAM at the CAM layer's resolution
    and the image count) and DIR/classes/<class>.png (that map at the model input's size,
    jet colours over [0, 1]: each image's map is scaled to [0, 1] before the mean)."""
    classes: dict[str, Any] = {}
    names_used: set[str] = set()
    for c in range(total.cam_sum.shape[0]):
        count = int(total.cam_count[c])
        if count == 0:
            continue
        name = categories[c] if c < len(categories) else f"class {c}"
        mean = (total.cam_sum[c] / count).float()
        file = safe_name(name) or f"class_{c}"
        if file in names_used:
            file = f"{file}_{c}"
        names_used.add(file)
        big = F.interpolate(mean[None, None], size=tuple(input_hw), mode="bilinear",
                            align_corners=False)[0, 0]
        png = save_png(out / "classes" / f"{file}.png", colorize(big.clamp(0, 1).numpy()))
        classes[name] = {
            "index": c,
            "count": count,
            "png": png.relative_to(out).as_posix(),
            "map": [[round(float(v), 6) for v in row] for row in mean.tolist()],
        }
    doc = {
        "method": "gradcam",
        "layer": cam_layer,
        "map_size": list(total.cam_sum.shape[1:]),
        "classes": classes,
    }
    write_json(out / "classes.json", doc)
    return doc

