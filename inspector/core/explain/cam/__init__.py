"""Class activation maps: which parts of the input a layer's evidence for a class comes from.

    methods.py   each CAM: a short function of a layer's activations and gradients
    targets.py   the class score explained (an index, a name, top-1, a score function)
    layer.py     the layer read when none is named
    scorecam.py  Score-CAM, which runs masked forwards instead of reading gradients
    compute.py   the two ways in: from a Session run's Capture, and the lean path
"""

from inspector.core.explain.cam.compute import CamResult, cam_from_capture, compute_cams
from inspector.core.explain.cam.layer import cam_layers, default_target_layer
from inspector.core.explain.cam.methods import (
    METHODS,
    CamMethod,
    eigencam,
    gradcam,
    gradcam_pp,
    hirescam,
    layercam,
    method_name,
    normalize_maps,
    xgradcam,
)
from inspector.core.explain.cam.scorecam import Progress, score_cam
from inspector.core.explain.cam.targets import Target, class_scores, logits_of, resolve_target

__all__ = [
    "METHODS",
    "CamMethod",
    "CamResult",
    "Progress",
    "Target",
    "cam_from_capture",
    "cam_layers",
    "class_scores",
    "compute_cams",
    "default_target_layer",
    "eigencam",
    "gradcam",
    "gradcam_pp",
    "hirescam",
    "layercam",
    "logits_of",
    "method_name",
    "normalize_maps",
    "resolve_target",
    "score_cam",
    "xgradcam",
]
