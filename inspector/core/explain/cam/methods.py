"""The CAM methods: each a short function of a layer's activations A and the gradient G of
the class score with respect to them, both (B, K, h, w), returning (B, h, w) maps at the
layer's resolution. EigenCAM reads no gradient; Score-CAM (scorecam.py) runs the model.

Names, titles and which need gradients come from `core.explain.catalog`, the table the window
and the CLI read too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inspector.core.explain import catalog as _table

_EPS = 1e-7


def _weighted_sum(a: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """ReLU(sum_k w_k A_k) for per-image, per-channel weights (B, K)."""
    return torch.einsum("bk,bkhw->bhw", weights, a).clamp_min(0)


def gradcam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Selvaraju et al. 2017: channel weights are the spatial mean of the gradient."""
    return _weighted_sum(a, g.mean(dim=(2, 3)))


def gradcam_pp(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Chattopadhay et al. 2018: positive gradients weighted per pixel by the closed-form
    alpha of an exponential score, so several instances of a class each count."""
    g2 = g * g
    g3 = g2 * g
    sum_a = a.sum(dim=(2, 3), keepdim=True)
    alpha = g2 / (2 * g2 + sum_a * g3 + 1e-6)
    alpha = torch.where(g != 0, alpha, torch.zeros_like(alpha))
    return _weighted_sum(a, (g.clamp_min(0) * alpha).sum(dim=(2, 3)))


def xgradcam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Fu et al. 2020: weights normalised by the activation so the map sums to the score for
    a ReLU network without biases (the conservation axiom)."""
    weights = (g * a).sum(dim=(2, 3)) / (a.sum(dim=(2, 3)) + _EPS)
    return _weighted_sum(a, weights)


def layercam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Jiang et al. 2021: each location weighted by its own positive gradient."""
    return (g.clamp_min(0) * a).sum(dim=1).clamp_min(0)


def hirescam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Draelos & Carin 2020: gradient times activation, summed over channels without
    averaging the gradient first, so the map shows where the score actually came from."""
    return (g * a).sum(dim=1).clamp_min(0)


def eigencam(a: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
    """Muhammad & Yeasin 2020: the activations projected on their first principal
    direction (SVD of the hw x K matrix, not centred, as in the paper). The sign of a
    singular vector is arbitrary: it is chosen so that the map is
    mostly positive (for non-negative activations it is non-negative everywhere). Uses no
    gradient and no class."""
    b, k, h, w = a.shape
    m = a.reshape(b, k, h * w).transpose(1, 2)  # (B, hw, K)
    u, s, _ = torch.linalg.svd(m, full_matrices=False)
    proj = u[:, :, 0] * s[:, :1]  # (B, hw): m @ v1
    sign = torch.sign(proj.sum(dim=1, keepdim=True))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return (proj * sign).reshape(b, h, w).clamp_min(0)


@dataclass(frozen=True)
class CamMethod:
    name: str
    fn: Callable[..., torch.Tensor] | None  # None: Score-CAM, which needs the model
    needs_grad: bool
    title: str


_FUNCTIONS: dict[str, Callable[..., torch.Tensor] | None] = {
    "gradcam": gradcam,
    "gradcam++": gradcam_pp,
    "xgradcam": xgradcam,
    "layercam": layercam,
    "hirescam": hirescam,
    "eigencam": eigencam,
    "scorecam": None,
}
# The CAMs of a layer (the attention maps are core.explain.attention's).
METHODS: dict[str, CamMethod] = {
    name: CamMethod(name, _FUNCTIONS[name], m.needs_grad, m.title)
    for name, m in _table.CAM_METHODS.items() if m.source == _table.LAYER
}


def method_name(name: str) -> str:
    """The canonical name of a method: "Grad-CAM++", "grad_cam_pp" -> "gradcam++"."""
    return _table.cam_method(name)


def normalize_maps(cams: torch.Tensor, out_hw: tuple[int, int]) -> torch.Tensor:
    """(B, h, w) -> (B, H, W) float32: bilinear upsampling, then min-max to [0, 1] per image.

    A constant map (all zero: no evidence) stays 0 rather than 0/0; a constant positive one
    is 1 everywhere. NaN and infinities (an exploding model) become 0 and the largest float.
    """
    cams = torch.nan_to_num(cams.detach().float(), nan=0.0)
    up = F.interpolate(cams[:, None], size=tuple(out_hw), mode="bilinear", align_corners=False)
    up = up[:, 0]
    lo = up.amin(dim=(1, 2), keepdim=True)
    hi = up.amax(dim=(1, 2), keepdim=True)
    span = hi - lo
    flat = span <= 1e-6 * hi.abs()
    scaled = (up - lo) / torch.where(flat, torch.ones_like(span), span)
    return torch.where(flat, (hi > 0).float().expand_as(up), scaled)
