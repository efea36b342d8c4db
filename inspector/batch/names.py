"""Names of things written: file-name-safe module and image names, one folder per input, and
the message for module names a model does not have."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

# Folders of the run itself inside DIR: an image called "shards.png" must not write into them.
RESERVED = frozenset({"shards", "tensorboard"})


def safe_name(text: str) -> str:
    """A file-name-safe version of a module or method name ("layer4.1" stays readable)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_")


def input_names(sources: Iterable) -> list[str]:
    """One folder name per input (a `inputs.Source`), in order: the file's stem, a video
    frame's stem with _fNNNNNN (sorts in frame order), _2, _3, ... for repeats. Fixed by the
    list alone, so a resumed run names every image as the first run did."""
    used: set[str] = set(RESERVED)
    names = []
    for source in sources:
        base = safe_name(source.path.stem) or "image"
        if source.frame is not None:
            base = f"{base}_f{source.frame:06d}"
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        names.append(name)
    return names


def unknown_modules(names: list[str], tree) -> str:
    """"no module named 'layer5' (did you mean layer4?) ...": for options naming modules."""
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, list(tree.modules), n=3)
        parts.append(f"'{name}'" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return f"no module named {', '.join(parts)} in this model; see `network-inspector tree`"
