"""Models from other libraries' hubs: `timm:NAME` (timm) and `hf:PATH` (Hugging Face
transformers image classifiers), named in ModelSpec.name with their prefix.

Each family lives in its own module (timm_models, hf_models) and needs an optional extra;
without it, loading says in one line what to install (`MissingExtra`, a ModelLoadError),
never a traceback. Nothing here downloads: timm's pretrained weights come from a file the
user names or from the Hugging Face cache when the files are already there, and an HF
model from a folder written by `save_pretrained`.
"""

from __future__ import annotations

import importlib.util

from inspector.core.model_files import ModelLoadError

TIMM_PREFIX = "timm:"
HF_PREFIX = "hf:"
# family -> (the module that must import, the extra that installs it)
EXTRAS = {"timm": ("timm", "timm"), "hf": ("transformers", "hf")}


class MissingExtra(ModelLoadError):
    """An optional library a model family needs is not installed."""

    def __init__(self, family: str) -> None:
        module, extra = EXTRAS[family]
        super().__init__(
            f"{module} is not installed: pip install 'network-inspector[{extra}]'"
        )
        self.family = family


def family_of(name: str | None) -> str | None:
    """"timm", "hf", or None for a name of the app's own catalog."""
    if not name:
        return None
    if name.startswith(TIMM_PREFIX):
        return "timm"
    if name.startswith(HF_PREFIX):
        return "hf"
    return None


def hub_name(name: str) -> str:
    """The name after the family's prefix: "resnet18" for "timm:resnet18"."""
    return name.split(":", 1)[1].strip()


def has_extra(family: str) -> bool:
    """Whether the library a family needs is installed (without importing it)."""
    try:
        return importlib.util.find_spec(EXTRAS[family][0]) is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules (set to None)
        return False


def require_extra(family: str) -> None:
    """MissingExtra unless the family's library is installed."""
    if not has_extra(family):
        raise MissingExtra(family)


def load_hub_model(spec, device):
    """The LoadedModel of a `timm:` or `hf:` spec (core.models.load_model dispatches here)."""
    family = family_of(spec.name)
    require_extra(family)
    if not hub_name(spec.name):
        raise ModelLoadError(f"'{spec.name}' names no model after '{family}:'")
    if family == "timm":
        from inspector.core.timm_models import load_timm

        return load_timm(spec, device)
    from inspector.core.hf_models import load_hf

    return load_hf(spec, device)
