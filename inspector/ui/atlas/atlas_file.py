"""Reading a channel atlas (`network-inspector atlas --out DIR`) for the window: DIR/atlas.json
checked field by field, and where its crops and original images are.

Torch-free on purpose (the window opens before torch is imported, and an atlas can be
browsed with any model loaded): the format is read here rather than through
inspector.batch, whose writers import torch. What the writer guarantees (batch/writers.py):
per layer and channel the top images in descending value, each with its path, its value (a
float, or null when it was not finite) and its box (x0, y0, x1, y1 in the image's own
pixels, x1 and y1 exclusive; null when no box could be measured). An entry that is a video's
frame (`atlas --every N VIDEO`) also has "frame", its index from 0; its path is the video's.

Anything that does not fit that format raises AtlasError with one sentence that names the
file and the first field that is wrong, so the window can say it in its status bar.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.batch.names import safe_name  # the crops' folder names, as the atlas writes them

ATLAS_JSON = "atlas.json"
CONCEPTS_JSON = "concepts.json"  # `network-inspector concepts`: the same layout, concepts for channels
MAKE_ONE = "network-inspector atlas --model MODEL --layers LAYER --out DIR FOLDER"
# How far up from the atlas folder a relative image path is looked for (see Atlas.resolve).
SEARCH_PARENTS = 3


class AtlasError(ValueError):
    """An atlas that cannot be read; the message is one sentence for the status bar."""


@dataclass(frozen=True)
class TopImage:
    """One image of a channel's top list."""

    rank: int  # 0 for the image with the largest value
    path: str  # as atlas.json has it (relative to where the command ran, or absolute)
    value: float | None
    box: tuple[int, int, int, int] | None
    frame: int | None = None  # a video's frame (its index, from 0): `path` is the video

    def describe(self) -> str:
        """"photo.jpg", or "frame 20 of clip.mp4"."""
        return self.path if self.frame is None else f"frame {self.frame} of {self.path}"


@dataclass(frozen=True)
class AtlasLayer:
    name: str
    channels: int
    top: dict[int, tuple[TopImage, ...]]
    mean: tuple[float | None, ...]
    active_fraction: tuple[float | None, ...]
    dead: tuple[int, ...]


@dataclass
class Atlas:
    folder: Path  # DIR: the folder atlas.json is in
    model: str
    weights: str | None
    images: int
    failed: int
    layers: dict[str, AtlasLayer]
    kind: str = "atlas"  # or "concepts": a layer's "channels" are its concepts
    _resolved: dict[str, Path | None] = field(default_factory=dict, repr=False)

    def crop_path(self, layer: str, channel: int, rank: int) -> Path:
        """DIR/crops/<layer>/<channel>/<rank>.png, named as batch/writers.crop_path names it."""
        return self.folder / "crops" / safe_name(layer) / str(channel) / f"{rank}.png"

    def resolve(self, path: str) -> Path | None:
        """The image file an entry names, or None when it is gone.

        The command writes paths as it was given them: relative ones are relative to the
        folder it ran in, which the window does not know. They are looked for from the
        window's working folder, then from the atlas folder and its parents (an atlas made
        with `--out out/atlas photos/` finds `photos/x.jpg` two levels up)."""
        if path in self._resolved:
            return self._resolved[path]
        p = Path(path).expanduser()
        if p.is_absolute():
            candidates = [p]
        else:
            bases = [Path.cwd(), self.folder, *list(self.folder.parents)[:SEARCH_PARENTS]]
            candidates = [base / p for base in bases]
        found = next((c for c in candidates if c.is_file()), None)
        self._resolved[path] = found
        return found

    def describe(self) -> str:
        """"demo_shapes, 1,234 images, layers stage2, stage3": what the dock's header says."""
        layers = ", ".join(self.layers) or "none"
        failed = f" ({self.failed} unreadable)" if self.failed else ""
        if self.kind == "concepts":
            return f"{self.model}, {self.images:,} images{failed}, concepts of {layers}"
        return f"{self.model}, {self.images:,} images{failed}, layers {layers}"


def read_atlas(where: str | Path) -> Atlas:
    """The atlas in folder `where` (or the atlas.json file `where`). Raises AtlasError."""
    where = Path(where).expanduser()
    path = where if where.suffix.lower() == ".json" else where / ATLAS_JSON
    if not path.is_file() and (where / CONCEPTS_JSON).is_file():
        path = where / CONCEPTS_JSON
    if not path.is_file():
        if path.parent.is_dir():
            raise AtlasError(f"No {ATLAS_JSON} in {path.parent}: make one with `{MAKE_ONE}`")
        raise AtlasError(f"{path.parent} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AtlasError(f"Could not read {path}: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise AtlasError(f"{path} is not a complete atlas (bad JSON at line {e.lineno}, "
                         f"column {e.colno}: {e.msg})") from None
    try:
        return _atlas(doc, path.parent)
    except _Bad as e:
        raise AtlasError(f"{path} is not an atlas this app reads: {e}") from None


class _Bad(Exception):
    """A field that does not fit; the message names it."""


def _atlas(doc: Any, folder: Path) -> Atlas:
    _expect(isinstance(doc, dict), "", "an object")
    model = doc.get("model")
    _expect(isinstance(model, str) and model != "", "model", "a model name")
    weights = doc.get("weights")
    _expect(weights is None or isinstance(weights, str), "weights", "a path or null")
    images = _count(doc.get("images"), "images")
    failed = doc.get("failed", [])
    _expect(isinstance(failed, list), "failed", "a list")
    layers = doc.get("layers")
    _expect(isinstance(layers, dict), "layers", "an object of layers")
    return Atlas(folder, model, weights, images, len(failed),
                 {name: _layer(name, raw) for name, raw in layers.items()},
                 kind="concepts" if doc.get("kind") == "concepts" else "atlas")


def _layer(name: str, raw: Any) -> AtlasLayer:
    where = f"layers.{name}"
    _expect(isinstance(raw, dict), where, "an object")
    channels = _count(raw.get("channels"), f"{where}.channels")
    top_raw = raw.get("top")
    _expect(isinstance(top_raw, dict), f"{where}.top", "an object of channels")
    top: dict[int, tuple[TopImage, ...]] = {}
    for key, entries in top_raw.items():
        here = f"{where}.top.{key}"
        _expect(key.isascii() and key.isdigit() and int(key) < channels, here, f"a channel below {channels}")
        _expect(isinstance(entries, list), here, "a list")
        top[int(key)] = tuple(_entry(e, rank, f"{here}[{rank}]") for rank, e in enumerate(entries))
    mean = _numbers(raw.get("mean", []), f"{where}.mean", channels)
    active = _numbers(raw.get("active_fraction", []), f"{where}.active_fraction", channels)
    dead = raw.get("dead", [])
    _expect(isinstance(dead, list) and all(_is_int(c) and 0 <= c < channels for c in dead),
            f"{where}.dead", f"a list of channels below {channels}")
    return AtlasLayer(name, channels, top, mean, active, tuple(sorted(set(dead))))


def _entry(raw: Any, rank: int, where: str) -> TopImage:
    _expect(isinstance(raw, dict), where, "an object")
    path = raw.get("path")
    _expect(isinstance(path, str) and path != "", f"{where}.path", "a file path")
    value = raw.get("value")
    _expect(value is None or (_is_number(value) and math.isfinite(value)), f"{where}.value",
            "a number or null")
    box = raw.get("box")
    if box is not None:
        _expect(isinstance(box, list) and len(box) == 4 and all(_is_int(v) for v in box)
                and box[0] < box[2] and box[1] < box[3], f"{where}.box",
                "[x0, y0, x1, y1] with x0 < x1 and y0 < y1, or null")
        box = tuple(box)
    frame = raw.get("frame")
    _expect(frame is None or (_is_int(frame) and frame >= 0), f"{where}.frame",
            "a frame index (0 or more), or absent")
    return TopImage(rank, path, None if value is None else float(value), box, frame)


def _numbers(raw: Any, where: str, channels: int) -> tuple[float | None, ...]:
    """A per-channel list (may be empty: an atlas of no images); null stays None."""
    _expect(isinstance(raw, list) and len(raw) in (0, channels)
            and all(v is None or _is_number(v) for v in raw),
            where, f"a list of {channels} numbers")
    return tuple(None if v is None else float(v) for v in raw)


def _count(raw: Any, where: str) -> int:
    _expect(_is_int(raw) and raw >= 0, where, "a count (0 or more)")
    return raw


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _expect(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise _Bad(f"{where or 'the file'} should be {what}")
