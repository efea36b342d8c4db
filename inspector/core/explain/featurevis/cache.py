"""Feature visualisations on disk, so that revisiting a channel is instant and a changed
model never shows a stale picture.

The key is the sha256 of canonical JSON: FEATUREVIS_VERSION, the weights' hash
(`weights_hash`: every tensor of the state_dict, buffers too, with the model's class and
module structure), the preprocessing, the layer, the target and the settings. A path or a
file's time would miss random weights from a seed, factories and hub models.

    <root>/featurevis/<weights hash[:16]>/<layer>/<key[:24]>.png   the picture
                                                  <key[:24]>.json  objective, steps, ...

The root is INSPECTOR_CACHE_DIR, else the platform's cache folder (XDG_CACHE_HOME or
~/.cache on Linux, ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows)/network-inspector.
Files are written to `.part` names and moved into place, the JSON last: a picture without
its JSON is a miss, and so is one whose JSON gives fewer steps than the settings asked for
(an optimisation stopped before its end is no visualisation of those settings). A hit
touches the files; `prune` removes the least recently used ones beyond a size.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from inspector.core.explain.featurevis.settings import (
    FEATUREVIS_VERSION,
    FeatureVisSettings,
    Target,
)
from inspector.core.inputs.preprocess import Preprocess

CACHE_DIR_ENV = "INSPECTOR_CACHE_DIR"
APP_FOLDER = "network-inspector"
MAX_BYTES = 1 << 30

_hashes: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()


def cache_root() -> Path:
    """The app's cache folder (not created here)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / APP_FOLDER
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / APP_FOLDER / "Cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP_FOLDER


def weights_hash(model: nn.Module) -> str:
    """sha256 of the model's class, its module structure (repr) and every state_dict entry
    (name, dtype, shape, raw bytes; bfloat16 too), computed once per model object."""
    known = _hashes.get(model)
    if known is not None:
        return known
    h = hashlib.sha256()
    h.update(f"{type(model).__module__}.{type(model).__qualname__}\n".encode())
    h.update(hashlib.sha256(repr(model).encode()).digest())
    state = model.state_dict()
    for name in sorted(state):
        value = state[name]
        if not isinstance(value, torch.Tensor):
            h.update(f"{name}={value!r}\n".encode())
            continue
        t = value.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    digest = h.hexdigest()
    _hashes[model] = digest
    return digest


def cache_key(weights: str, preprocess: Preprocess, layer: str, target: Target,
              settings: FeatureVisSettings) -> str:
    doc = {"v": FEATUREVIS_VERSION, "model": weights,
           "preprocess": {"crop": list(preprocess.crop_size), "mean": list(preprocess.mean),
                          "std": list(preprocess.std)},
           "layer": layer, "target": target.key(), "settings": settings.key()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CachedPicture:
    pixels: np.ndarray  # (h, w, 3) uint8
    info: dict[str, Any]  # objective, steps, seed, settings, seconds, device, torch
    path: Path


class FeatureVisCache:
    """The pictures of one root; `root` None: cache_root()."""

    def __init__(self, root: Path | None = None, max_bytes: int = MAX_BYTES) -> None:
        self.root = (Path(root) if root is not None else cache_root()) / "featurevis"
        self.max_bytes = max_bytes

    def paths(self, weights: str, layer: str, key: str) -> tuple[Path, Path]:
        folder = self.root / weights[:16] / (re.sub(r"[^A-Za-z0-9._+-]+", "_", layer) or "_output")
        return folder / f"{key[:24]}.png", folder / f"{key[:24]}.json"

    def load(self, weights: str, layer: str, key: str, size: tuple[int, int] | None = None,
             steps: int | None = None) -> CachedPicture | None:
        """The picture stored under `key`; None (a miss) for anything odd: no JSON, another
        key, (`steps` given) a JSON whose "steps" is not `steps`, a file that is not an 8-bit
        RGB PNG or (`size`, (h, w), given) of another size.
        The header is checked before the pixels are decoded, so a huge planted file is
        never decompressed."""
        png, meta = self.paths(weights, layer, key)
        try:
            info = json.loads(meta.read_text())
            if not isinstance(info, dict) or info.get("key") != key:
                return None
            if steps is not None and info.get("steps") != steps:
                return None
            with Image.open(png) as img:
                if img.format != "PNG" or img.mode != "RGB":
                    return None
                if size is not None and (img.height, img.width) != tuple(size):
                    return None
                pixels = np.asarray(img)
        except (OSError, ValueError, Image.DecompressionBombError):
            return None
        for path in (png, meta):
            try:
                os.utime(path)  # recently used: pruned last
            except OSError:
                pass
        return CachedPicture(pixels, info, png)

    def store(self, weights: str, layer: str, key: str, pixels: np.ndarray,
              info: dict[str, Any]) -> Path | None:
        """Write one picture; None when the cache folder cannot be written (the picture is
        then only not cached: nothing is lost)."""
        png, meta = self.paths(weights, layer, key)
        try:
            png.parent.mkdir(parents=True, exist_ok=True)
            part = png.with_name(png.name + ".part")
            Image.fromarray(np.ascontiguousarray(pixels)).save(part, format="PNG",
                                                               compress_level=1)
            os.replace(part, png)
            part = meta.with_name(meta.name + ".part")
            part.write_text(json.dumps({**info, "key": key}, indent=1) + "\n")
            os.replace(part, meta)
        except OSError:
            return None
        self.prune()
        return png

    def prune(self) -> int:
        """Remove the least recently used pictures beyond max_bytes; returns how many."""
        if not self.root.is_dir():
            return 0
        pictures = []
        for png in self.root.rglob("*.png"):
            try:
                st = png.stat()
                meta = png.with_suffix(".json")
                size = st.st_size + (meta.stat().st_size if meta.exists() else 0)
            except OSError:
                continue
            pictures.append((st.st_mtime, size, png))
        total = sum(p[1] for p in pictures)
        removed = 0
        for _, size, png in sorted(pictures):
            if total <= self.max_bytes:
                break
            for path in (png, png.with_suffix(".json")):
                try:
                    path.unlink()
                except OSError:
                    pass
            total -= size
            removed += 1
        return removed
