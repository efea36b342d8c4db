"""`analyse --boxes FILE.json`: the objects' boxes for the pointing game.

The file maps an image's file name to its boxes in the picture's own pixels:

    {"cat_01.png": [[12, 30, 118, 140]], "two_dogs.jpg": [[0, 5, 60, 90], [70, 8, 130, 95]]}

A key may also be a path ending the image's path ("pets/cat_01.png"); a video's name
stands for every frame of it. Instead of boxes, an image may name a mask image of the object
at the picture's size, nonzero pixels the object (relative to the JSON file's folder):
{"cat_01.png": "masks/cat_01.png"}. Anything else is refused in one sentence before any image is
read (analyse's exit status 2).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from inspector.core.explain.metrics.pointing import load_mask

Boxes = dict[str, list[tuple[float, float, float, float]] | str]  # str: a mask's path
FORMAT = '{"IMAGE FILE NAME": [[x0, y0, x1, y1], ...] or "MASK IMAGE FILE"}'


def load_boxes(path: Path) -> Boxes:
    """The boxes of the file at `path`; ValueError, one sentence, for a file that is not
    such a file."""
    where = f"--boxes {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{where}: cannot read it ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not a text file (JSON is UTF-8 text)") from e
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not JSON ({e.msg} at line {e.lineno}, column "
                         f"{e.colno})") from e
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where}: expected {FORMAT}")
    boxes: Boxes = {}
    for name, items in value.items():
        if isinstance(items, str):
            boxes[name] = _mask(where, name, Path(path).parent / items)
            continue
        if not isinstance(items, list) or not items:
            raise ValueError(f"{where}: '{name}' must list its boxes as [[x0, y0, x1, y1], ...]")
        boxes[name] = [_box(where, name, item) for item in items]
    return boxes


def _mask(where: str, name: str, path: Path) -> str:
    try:
        mask = load_mask(str(path))
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e
    if not mask.any():
        raise ValueError(f"{where}: the mask {path} of '{name}' has no nonzero pixel")
    return str(path)


def _box(where: str, name: str, item) -> tuple[float, float, float, float]:
    numbers = (isinstance(item, list) and len(item) == 4
               and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item))
    if not numbers or not all(math.isfinite(v) for v in item):
        raise ValueError(f"{where}: a box of '{name}' is {json.dumps(item)}, not four numbers "
                         f"[x0, y0, x1, y1]")
    x0, y0, x1, y1 = (float(v) for v in item)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"{where}: the box {json.dumps(item)} of '{name}' is empty "
                         f"(x1 <= x0 or y1 <= y0)")
    return (x0, y0, x1, y1)


def _matches(key: str, path: Path) -> bool:
    key = key.replace("\\", "/").lstrip("./")
    return key == path.name or path.as_posix().endswith("/" + key) or key == path.as_posix()


def boxes_for(boxes: Boxes | None, path: Path) -> tuple[tuple[float, float, float, float], ...]:
    """The boxes the file gives for the image (or video) at `path`; () when none (or a
    mask)."""
    for key, found in (boxes or {}).items():
        if _matches(key, Path(path)):
            return () if isinstance(found, str) else tuple(found)
    return ()


def mask_for(boxes: Boxes | None, path: Path) -> str:
    """The mask file the file names for the image at `path`; "" when none."""
    for key, found in (boxes or {}).items():
        if _matches(key, Path(path)):
            return found if isinstance(found, str) else ""
    return ""


def unmatched(boxes: Boxes, paths) -> list[str]:
    """The file's names that match none of `paths`."""
    paths = [Path(p) for p in paths]
    return [key for key in boxes if not any(_matches(key, p) for p in paths)]


def digest(boxes: Boxes | None) -> str | None:
    """A hash of the boxes, for the shards' key: a resume with other boxes is another job."""
    if boxes is None:
        return None
    h = hashlib.sha256(json.dumps(boxes, sort_keys=True).encode())
    for found in boxes.values():
        if isinstance(found, str):  # a mask changed in place is other boxes too
            h.update(Path(found).read_bytes())
    return h.hexdigest()[:16]
