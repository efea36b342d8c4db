"""What a run can ask for, by name: hook kinds, class activation maps, input attributions.

The one table the engine, the window and the CLI read. It imports no torch, so the UI can
fill its menus and the CLI its help text before torch has loaded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# -- hook kinds, in the order a module sees them ----------------------------------------------

INPUT = "input"  # forward pre-hook: what the module receives
OUTPUT = "output"  # forward hook: what it returns
GRAD_OUTPUT = "grad_output"  # gradient of the score w.r.t. the module's output
GRAD_INPUT = "grad_input"  # gradient w.r.t. its input, through this module only
KINDS = (INPUT, OUTPUT, GRAD_OUTPUT, GRAD_INPUT)
GRADIENT_KINDS = (GRAD_OUTPUT, GRAD_INPUT)
# What a module shows until the user picks: grad_input costs a view per input and turns
# in-place modules off for the run, so it is asked for explicitly.
DEFAULT_KINDS = (INPUT, OUTPUT, GRAD_OUTPUT)


@dataclass(frozen=True)
class KindInfo:
    column: str  # the module tree's checkbox column
    words: str  # in sentences: "the input gradient of conv1"
    tip: str  # the column's tooltip
    symbol: str = ""  # a gradient view's choice: "∂score/∂output"


# How the window presents each kind: a kind added above and here (and hooked in
# core.hooks) gets its tree column, its tooltip and, for a gradient, its gradient-view choice.
KIND_INFO: dict[str, KindInfo] = {
    INPUT: KindInfo("In", "input",
                    "Capture the module's input (forward pre-hook): the input statistics view"),
    OUTPUT: KindInfo("Out", "output", "Capture the module's output (forward hook): statistics "
                     "and the activation view"),
    GRAD_OUTPUT: KindInfo("\u2207Out", "output gradient", "Capture the gradient of the score "
                          "w.r.t. the output: the gradient views", "\u2202score/\u2202output"),
    GRAD_INPUT: KindInfo("\u2207In", "input gradient", "Capture the gradient w.r.t. the module's "
                         "input, through this module only", "\u2202score/\u2202input"),
}

# -- explanation methods ------------------------------------------------------------------------

CAM = "cam"  # a map at a layer's resolution, from its activations (and their gradients)
# A value per input pixel and channel: from the input gradient, or (occlusion) from forwards
# of occluded copies of the input.
ATTRIBUTION = "attribution"


@dataclass(frozen=True)
class Method:
    name: str  # what the CLI, frames and NPZ keys use: "gradcam++", "ig"
    title: str  # what the window shows: "Grad-CAM++", "Integrated Gradients"
    family: str  # CAM or ATTRIBUTION
    needs_grad: bool  # needs a backward pass (EigenCAM, Score-CAM and occlusion do not)
    # How an attribution's channels become the [0, 1] map the window and the PNGs show
    # (core.saliency.attribution_map): "abs_max" for gradients, whose sign says which way a
    # pixel would push the score; "sum" (positive part) for occlusion, whose sign says
    # whether covering the patch lowers the score (evidence) or raises it (counter-evidence).
    display: str = "abs_max"


_TABLE = (
    Method("gradcam", "Grad-CAM", CAM, True),
    Method("gradcam++", "Grad-CAM++", CAM, True),
    Method("xgradcam", "XGrad-CAM", CAM, True),
    Method("layercam", "LayerCAM", CAM, True),
    Method("hirescam", "HiResCAM", CAM, True),
    Method("eigencam", "EigenCAM", CAM, False),
    Method("scorecam", "Score-CAM", CAM, False),
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
    """The settings of the input attributions that have any (see core.saliency).

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
