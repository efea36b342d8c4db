"""Files out of `compare-models`:

    DIR/cka.json      {"model_a", "model_b", "images", "layers_a", "layers_b", "cka": rows
                      A's layers, columns B's, in forward order; then how it was computed:
                      "estimator", "batch_size", "order_seed", "blocks", seeds, "failed"}
    DIR/cka.png       the heatmap, rows A's layers (first on top), columns B's, their names on
                      the left and at the bottom, a colour bar from 0 to 1, and a caption
                      saying the estimator and the number of images
    DIR/matches.json  with --match LA:LB: the matched channels, the lost and new ones, and
                      the atlas crops of each channel where an atlas was given

PIL only (as batch.figures): no display and no plotting library needed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from inspector.batch.figures import font
from inspector.batch.writers import crop_path, write_json

MEASURE = ("linear CKA (Kornblith et al. 2019) of the layers' outputs flattened per image: "
           "<HKH, HLH> / (|HKH| |HLH|), K and L the Gram matrices over the images")
ESTIMATOR_TEXT = {
    "exact": "exact: the biased HSIC over all images at once (inflated for few images and "
             "wide layers)",
    "minibatch": "minibatch: Nguyen et al. 2021's unbiased HSIC_1 summed over minibatches of "
                 "a seeded permutation (can dip slightly below 0)",
}
# A perceptually uniform map (viridis), from its anchor colours: 0 dark blue, 1 yellow.
_VIRIDIS = np.array([[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142],
                     [38, 130, 142], [31, 158, 137], [53, 183, 121], [110, 206, 88],
                     [181, 222, 43], [253, 231, 37]], dtype=np.float64)
NAN_COLOUR = (128, 128, 128)
MAX_LABELS = 120  # names per side; beyond, every k-th name is written


def _f(v: float) -> float | None:
    return round(float(v), 7) if math.isfinite(v) else None


def viridis(values: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 colours of values in [0, 1] (clipped); nan grey."""
    v = np.clip(np.nan_to_num(values, nan=0.0), 0.0, 1.0) * (len(_VIRIDIS) - 1)
    lo = np.floor(v).astype(int).clip(0, len(_VIRIDIS) - 2)
    t = (v - lo)[..., None]
    out = _VIRIDIS[lo] * (1 - t) + _VIRIDIS[lo + 1] * t
    out[np.isnan(values)] = NAN_COLOUR
    return out.round().astype(np.uint8)


def cka_document(info: dict[str, Any], layers_a, layers_b, values) -> dict[str, Any]:
    """cka.json: the issue's keys first, then the protocol (`info`: model_b, images, ...)."""
    matrix = np.asarray(values, dtype=np.float64)
    return {
        "model_a": info["model_a"], "model_b": info["model_b"], "images": info["images"],
        "layers_a": list(layers_a), "layers_b": list(layers_b),
        "cka": [[_f(v) for v in row] for row in matrix.tolist()],
        "measure": MEASURE,
        "estimator": info["estimator"],
        "estimator_text": ESTIMATOR_TEXT[info["estimator"]],
        **{k: v for k, v in info.items() if k not in ("model_a", "model_b", "images",
                                                     "estimator")},
    }


def write_cka(out: Path, doc: dict[str, Any]) -> None:
    write_json(out / "cka.json", doc)


def caption(doc: dict[str, Any]) -> str:
    """"linear CKA, exact, 256 images: resnet18 (rows) vs resnet34 (columns)"."""
    return (f"linear CKA, {doc['estimator']}, {doc['images']} images: {doc['model_a']} (rows) "
            f"vs {doc['model_b']} (columns)")


def random_weights(doc: dict[str, Any]) -> list[str]:
    """The figure says what the CLI's warning says: a model with random weights (seed_a /
    seed_b are set only then) compares untrained layers."""
    sides = [(side, doc.get(f"seed_{side.lower()}")) for side in ("A", "B")]
    return [f"model {side} ({doc[f'model_{side.lower()}']}) has random weights (seed {seed}): "
            f"an untrained network" for side, seed in sides if seed is not None]


def cka_figure(doc: dict[str, Any]) -> Image.Image:
    """The heatmap of a cka.json document, as described in the module docstring."""
    values = np.array([[math.nan if v is None else v for v in row] for row in doc["cka"]],
                      dtype=np.float64).reshape(len(doc["layers_a"]), len(doc["layers_b"]))
    rows, cols = values.shape
    cell = max(4, min(24, 720 // max(rows, cols, 1)))
    size = max(9, min(13, cell - 1))
    text = font(size)
    names_a, step_a = _thinned(doc["layers_a"])
    names_b, step_b = _thinned(doc["layers_b"])
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    label_w = max((int(measure.textlength(n, font=text)) for n in names_a if n), default=0) + 8
    label_h = max((int(measure.textlength(n, font=text)) for n in names_b if n), default=0) + 8
    bar_w, pad = 16, 10
    width = max(420, pad + label_w + cols * cell + pad + bar_w + 40 + pad)
    lines = [caption(doc), ESTIMATOR_TEXT[doc["estimator"]], *random_weights(doc)]
    if step_a > 1 or step_b > 1:
        lines.append(f"every {max(step_a, step_b)}-th layer named")
    lines = [part for line in lines
             for part in _wrapped(line, width - 2 * pad, measure, text)]
    head = len(lines) * (size + 3) + 8
    height = head + rows * cell + label_h + pad
    img = Image.new("RGB", (width, height), (255, 255, 255))
    x0, y0 = pad + label_w, head
    heat = Image.fromarray(viridis(values)).resize((cols * cell, rows * cell),
                                                   Image.Resampling.NEAREST)
    img.paste(heat, (x0, y0))
    draw = ImageDraw.Draw(img)
    for k, line in enumerate(lines):
        draw.text((pad, 4 + k * (size + 3)), line, fill=(0, 0, 0), font=text)
    for r, name in enumerate(names_a):
        if name:
            w = draw.textlength(name, font=text)
            draw.text((x0 - 4 - w, y0 + r * cell + (cell - size) // 2), name, fill=(0, 0, 0),
                      font=text)
    strip = Image.new("RGB", (label_h, cols * cell), (255, 255, 255))
    sd = ImageDraw.Draw(strip)
    for c, name in enumerate(names_b):
        if name:  # written along the strip, which is then turned to run down the columns
            w = sd.textlength(name, font=text)
            sd.text((label_h - 4 - w, c * cell + (cell - size) // 2), name, fill=(0, 0, 0),
                    font=text)
    img.paste(strip.rotate(90, expand=True), (x0, y0 + rows * cell))
    _colour_bar(draw, x0 + cols * cell + pad, y0, bar_w, max(rows * cell, 60), text)
    return img


def _wrapped(line: str, width: int, measure: ImageDraw.ImageDraw, text) -> list[str]:
    """`line` cut at spaces into lines no wider than `width` pixels (a word wider stays whole)."""
    out: list[str] = []
    for word in line.split(" "):
        if out and measure.textlength(f"{out[-1]} {word}", font=text) <= width:
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return out


def _thinned(names: list[str]) -> tuple[list[str], int]:
    step = max(1, math.ceil(len(names) / MAX_LABELS))
    return [n if i % step == 0 else "" for i, n in enumerate(names)], step


def _colour_bar(draw: ImageDraw.ImageDraw, x: int, y: int, w: int, h: int, text) -> None:
    ramp = viridis(np.linspace(1.0, 0.0, h))
    for k in range(h):
        draw.line([(x, y + k), (x + w - 1, y + k)], fill=tuple(int(c) for c in ramp[k]))
    draw.rectangle([x, y, x + w - 1, y + h - 1], outline=(0, 0, 0))
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        ty = y + round((1 - v) * (h - 1))
        draw.line([(x + w, ty), (x + w + 3, ty)], fill=(0, 0, 0))
        draw.text((x + w + 5, ty - 6), f"{v:g}", fill=(0, 0, 0), font=text)


def write_cka_png(out: Path, doc: dict[str, Any]) -> Path:
    path = out / "cka.png"
    part = path.with_name("cka.png.part")
    cka_figure(doc).save(part, format="PNG")
    part.replace(path)
    return path


# -- matched channels -----------------------------------------------------------------------------


def check_atlas(folder: Path, flag: str) -> str | None:
    """None when `folder`'s atlas.json has what atlas_crops reads (or is not there), else one
    sentence: checked before any work (a malformed one raised AttributeError at the end)."""
    path = Path(folder) / "atlas.json"
    if not path.exists():
        return None  # no atlas there: the comparison runs, and matches.json notes it
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        return f"{flag}: cannot read {path} ({e.strerror or e})"
    except ValueError as e:
        return f"{flag}: {path} is not JSON ({e})"
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), str) \
            or not isinstance(doc.get("layers"), dict):
        return f"{flag}: {path} is not an atlas (an object with its model and layers)"
    for name, entry in doc["layers"].items():
        top = entry.get("top") if isinstance(entry, dict) else None
        if not isinstance(top, dict) or not all(
                isinstance(k, str) and k.isascii() and k.isdigit() and isinstance(v, list)
                for k, v in top.items()):
            return (f"{flag}: {path} is not an atlas: layer {name}'s top images should be "
                    f"lists under channel numbers")
    return None


def atlas_crops(folder: Path | None, model: str, layer: str) -> tuple[dict[int, list[str]], str]:
    """The crop files of each channel of `layer` in the atlas in `folder` (written by
    `network-inspector atlas`), and a note when it cannot be used ("" when it can)."""
    if folder is None:
        return {}, ""
    try:
        doc = json.loads((Path(folder) / "atlas.json").read_text())
    except (OSError, ValueError) as e:
        return {}, f"no crops from {folder}: cannot read its atlas.json ({e})"
    if doc.get("model") != model:
        return {}, f"no crops from {folder}: its atlas is of {doc.get('model')}, not {model}"
    entry = doc.get("layers", {}).get(layer)
    if entry is None:
        return {}, f"no crops from {folder}: its atlas has no layer {layer}"
    crops = {}
    for channel, top in entry.get("top", {}).items():
        paths = [crop_path(Path(folder), layer, int(channel), r) for r in range(len(top))]
        crops[int(channel)] = [str(p) for p in paths if p.is_file()]
    return crops, ""


def matches_document(plan, match, images: int, samples: int, crops_a: dict, crops_b: dict,
                     notes: list[str]) -> dict[str, Any]:
    """matches.json (`plan`: pair.MatchPlan, `match`: core.compare.matching.ChannelMatch)."""
    listed_a = {a for a, _, _ in match.pairs} | {a for a, _, _ in match.lost}
    listed_b = {b for _, b, _ in match.pairs} | {b for b, _, _ in match.new}
    return {
        "layer_a": plan.layer_a, "layer_b": plan.layer_b,
        "channels_a": plan.channels_a, "channels_b": plan.channels_b,
        "grid": list(plan.grid) if plan.grid is not None and len(plan.grid) == 2 else None,
        "images": images, "samples": samples, "threshold": match.threshold,
        "measure": "Pearson correlation of each channel of A with each of B over images and "
                   "positions (Li et al. 2015); one-to-one matching maximising the summed "
                   "correlation; lost (A) / new (B): unmatched, or best correlation with any "
                   "channel of the other side below the threshold",
        "pairs": [{"a": a, "b": b, "corr": _f(r)} for a, b, r in match.pairs],
        "lost": [{"channel": a, "best": b, "corr": _f(r)} for a, b, r in match.lost],
        "new": [{"channel": b, "best": a, "corr": _f(r)} for b, a, r in match.new],
        "dead_a": list(match.dead_a), "dead_b": list(match.dead_b),
        "crops_a": {str(c): crops_a[c] for c in sorted(listed_a) if crops_a.get(c)},
        "crops_b": {str(c): crops_b[c] for c in sorted(listed_b) if crops_b.get(c)},
        "notes": notes,
    }
