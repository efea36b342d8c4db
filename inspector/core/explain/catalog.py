"""The explanation methods a run can ask for, by name: class activation maps and input
attributions, with their titles, their options and the spellings people type.

The one table the engine, the window and the CLI read. It imports no torch, so the UI can
fill its menus and the CLI its help text before torch has loaded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# -- explanation methods ------------------------------------------------------------------------

CAM = "cam"  # a map at a layer's resolution, from its activations (and their gradients)
# A value per input pixel and channel: from the input gradient, or (occlusion) from forwards
# of occluded copies of the input.
ATTRIBUTION = "attribution"
# What a CAM is computed from: a layer's activations (and gradients), or a transformer's
# attention probabilities over its blocks (core.explain.attention).
LAYER = "layer"
ATTENTION = "attention"


@dataclass(frozen=True)
class Method:
    name: str  # what the CLI, frames and NPZ keys use: "gradcam++", "ig"
    title: str  # what the window shows: "Grad-CAM++", "Integrated Gradients"
    family: str  # CAM or ATTRIBUTION
    needs_grad: bool  # needs a backward pass (EigenCAM, Score-CAM and occlusion do not)
    # How an attribution's channels become the [0, 1] map the window and the PNGs show
    # (core.explain.attributions.attribution_map): "abs_max" for gradients, whose sign says which way a
    # pixel would push the score; "sum" (positive part) for occlusion, whose sign says
    # whether covering the patch lowers the score (evidence) or raises it (counter-evidence).
    display: str = "abs_max"
    source: str = LAYER  # CAMs: LAYER or ATTENTION


_TABLE = (
    Method("gradcam", "Grad-CAM", CAM, True),
    Method("gradcam++", "Grad-CAM++", CAM, True),
    Method("xgradcam", "XGrad-CAM", CAM, True),
    Method("layercam", "LayerCAM", CAM, True),
    Method("hirescam", "HiResCAM", CAM, True),
    Method("eigencam", "EigenCAM", CAM, False),
    Method("scorecam", "Score-CAM", CAM, False),
    Method("rollout", "Attention rollout", CAM, False, source=ATTENTION),
    Method("gradrollout", "Gradient rollout", CAM, True, source=ATTENTION),
    Method("legrad", "LeGrad", CAM, True, source=ATTENTION),
    Method("saliency", "Saliency", ATTRIBUTION, True),
    Method("gxi", "Gradient × Input", ATTRIBUTION, True),
    Method("smoothgrad", "SmoothGrad", ATTRIBUTION, True),
    Method("ig", "Integrated Gradients", ATTRIBUTION, True),
    Method("occlusion", "Occlusion", ATTRIBUTION, False, display="sum"),
)
METHODS: dict[str, Method] = {m.name: m for m in _TABLE}
CAM_METHODS: dict[str, Method] = {n: m for n, m in METHODS.items() if m.family == CAM}
ATTRIBUTION_METHODS: dict[str, Method] = {
    n: m for n, m in METHODS.items() if m.family == ATTRIBUTION
}
DEFAULT_CAM = "gradcam"
# The "layer" an attribution's map is reported at: the model input (CamFrame.layer).
ATTRIBUTION_LAYER = "(input)"
GRADIENT_FREE_CAMS = frozenset(n for n, m in CAM_METHODS.items() if not m.needs_grad)
# CAMs of a transformer's attention, over its blocks: they read no layer.
ATTENTION_CAMS = frozenset(n for n, m in CAM_METHODS.items() if m.source == ATTENTION)
# CAMs that run the model again after the run's own forward (Score-CAM's masked inputs);
# the others are computed from what the run's hooks kept.
FORWARD_CAMS = frozenset({"scorecam"})

# Other spellings people type, after lower-casing and dropping '-', '_' and spaces.
_ALIASES = {
    "gradcampp": "gradcam++",
    "gradcamplusplus": "gradcam++",
    "gradcamplus": "gradcam++",
    "gradientxinput": "gxi",
    "inputxgradient": "gxi",
    "integratedgradients": "ig",
    "occlusionsensitivity": "occlusion",
    "attentionrollout": "rollout",
    "gradientrollout": "gradrollout",
    "chefer": "gradrollout",
}


def _key(name: str) -> str:
    key = name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    return _ALIASES.get(key, key)


def cam_method(name: str) -> str:
    """The canonical name of a CAM method: "Grad-CAM++", "grad_cam_pp" -> "gradcam++"."""
    key = _key(name)
    if key not in CAM_METHODS:
        raise ValueError(f"unknown CAM method '{name}'; known: {', '.join(CAM_METHODS)}")
    return key


def attribution_method(name: str) -> str:
    """The canonical name of an input attribution: "Integrated-Gradients" -> "ig"."""
    key = _key(name)
    if key not in ATTRIBUTION_METHODS:
        raise ValueError(
            f"unknown attribution method '{name}'; known: {', '.join(ATTRIBUTION_METHODS)}"
        )
    return key


@dataclass(frozen=True)
class AttributionOptions:
    """The settings of the input attributions that have any (see core.explain.attributions).

    ig_steps: Integrated Gradients' steps along the path from the baseline (the all-zero
        model input) to the input; its error in completeness shrinks as they grow.
    smoothgrad_samples: noisy copies averaged by SmoothGrad.
    smoothgrad_sigma: their noise's standard deviation, as a fraction of each image's value
        range (Smilkov et al. found 10-20% works best).
    seed: SmoothGrad's noise generator: the same seed gives the same attribution.
    batch_size: inputs per forward for SmoothGrad, IG and occlusion (bounds their memory).
    occlusion_patch: the side, in model-input pixels, of the square patch occlusion slides
        over the input (clipped to the input's size).
    occlusion_stride: the step between two patch positions, in model-input pixels. A stride
        under the patch size makes patches overlap, and each pixel's value an average.
    """

    ig_steps: int = 50
    smoothgrad_samples: int = 25
    smoothgrad_sigma: float = 0.15
    seed: int = 0
    batch_size: int = 16
    occlusion_patch: int = 32
    occlusion_stride: int = 16

    def __post_init__(self) -> None:
        for name in ("ig_steps", "smoothgrad_samples", "batch_size", "occlusion_patch",
                     "occlusion_stride"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be at least 1, "
                                 f"got {getattr(self, name)}")
        sigma = float(self.smoothgrad_sigma)
        if not sigma >= 0:  # also NaN
            raise ValueError(f"smoothgrad-sigma must be 0 or more, got {self.smoothgrad_sigma}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
