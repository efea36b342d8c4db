"""A concept of a folder (`network-inspector concepts`, opened in the Dataset dock): what the
dock's strip says about it, and its direction for the *Remove this concept* edit.

The direction is the concept's unit vector in the layer's channel space, `vectors[k]` of
DIR/concepts.npz (the file the command writes beside concepts.json); its share, top classes
and top channels are concepts.json's."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class FolderConceptError(Exception):
    """A concept that cannot be read; the message is one sentence."""


TOOLTIP = ("Share: the concept's part of the layer's activation over every position of every "
           "image, Σ‖h<sub>k</sub>W<sub>k</sub>‖² / Σ‖x‖² (x shifted by each channel's "
           "minimum). Top classes: softmax of the model's head on the concept's channel "
           "vector placed at every position of the layer. Top channels: the largest weights "
           "of that vector, W<sub>k</sub>.")


@dataclass(frozen=True)
class FolderConcept:
    layer: str
    index: int
    vector: tuple[float, ...]  # unit length, one value per channel of the layer
    caption: str  # rich text: share and top classes
    tooltip: str  # how they are computed, and the top channels


def read_folder_concept(folder: Path, layer: str, index: int) -> FolderConcept:
    """Concept `index` of the concepts in `folder` (DIR of concepts.json and concepts.npz)."""
    npz_path, json_path = folder / "concepts.npz", folder / "concepts.json"
    try:
        with np.load(npz_path) as npz:
            vectors = np.asarray(npz["vectors"], np.float64)
        doc = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, KeyError, ValueError) as e:
        raise FolderConceptError(f"Could not read the concepts in {folder}: {e}") from None
    if not isinstance(doc, dict) or vectors.ndim != 2:
        raise FolderConceptError(f"{json_path} is not a concepts file this app reads: "
                                 f"it should be an object, beside a table of vectors")
    if doc.get("layer") != layer or not 0 <= index < len(vectors):
        raise FolderConceptError(f"{folder} has no concept {index} of {layer}")
    # A file that is not what `network-inspector concepts` writes (a list where an object
    # goes, an entry without "channel"): one sentence naming the file, never a traceback.
    try:
        entry = next((c for c in doc.get("concepts", []) if c.get("index") == index), {})
        channels = entry.get("top_channels") or []
        tooltip = TOOLTIP + (" Top channels: " + ", ".join(
            str(int(c["channel"])) for c in channels[:8]) + "." if channels else "")
        caption = _caption(index, entry, doc)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise FolderConceptError(f"{json_path} is not a concepts file this app reads "
                                 f"(concept {index}: {type(e).__name__} {e})") from None
    return FolderConcept(layer, index, tuple(float(v) for v in vectors[index]), caption, tooltip)


def _caption(index: int, entry: dict, doc: dict) -> str:
    parts = [f"<b>Concept {index}</b> of {doc.get('k', '?')} over {doc.get('images', '?')} "
             f"images"]
    share = entry.get("share")
    if share is not None:
        parts.append(f"{100 * share:.1f}% of the layer's activation")
    classes = entry.get("top_classes")
    if classes:
        parts.append("top classes " + ", ".join(
            f"{html.escape(str(c['label']))} {c['p']:.2f}" for c in classes[:3]))
    return "; ".join(parts)
