"""The pieces of a Copy as Python script that a model family writes: the code that loads its
model (ModelCode), and the one-line refusal when a script cannot (ScriptExportError).

Each family (this package) writes its own (Family.script); core.script.export puts them
into the script. Nothing here imports a family.
"""

from __future__ import annotations

import pprint
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn


class ScriptExportError(ValueError):
    """This run cannot be written as a script; the one-line message says which part."""


@dataclass
class ModelCode:
    code: str  # LABELS, any weights path, load_model()
    weights: str = ""  # the file the weights come from, for the summary
    imports: set[str] = field(default_factory=set)
    safetensors: bool = False  # needs read_safetensors
    checkpoint: bool = False  # needs read_state_dict
    inlined: bool = False  # model classes pasted in (they use Tensor and nn)


def own_classes(model: nn.Module, what: str) -> None:
    """A model built from inspector's classes cannot be loaded without importing inspector."""
    ours = sorted({type(m).__module__ for m in model.modules()
                   if type(m).__module__.split(".")[0] == "inspector"})
    if ours:
        raise ScriptExportError(f"{what} is built from Network Inspector's own classes (in "
                                f"{', '.join(ours)}), so its script would import inspector")


def labels_literal(values: Sequence) -> str:
    """A list as Python source, wrapped; None for the "class i" names load_model made up."""
    values = list(values)
    if values and values == [f"class {i}" for i in range(len(values))]:
        return "None"
    return pprint.pformat(values, width=96, compact=True)


def absolute(path: str | None) -> str:
    return str(Path(path or "").expanduser().resolve())
