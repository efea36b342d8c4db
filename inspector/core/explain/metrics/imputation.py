"""ROAD's noisy linear imputation (Rong et al. 2022), as pytorch-grad-cam's
NoisyLinearImputer computes it, without scipy.

Every removed pixel becomes the weighted mean of its neighbours inside the image (weights
1/6 for the four sides, 1/12 for the four corners, renormalised at the border), the kept
pixels fixed: for removed pixel i with in-image weight sum s_i,

    s_i u_i - sum over removed neighbours j of w_ij u_j = sum over kept neighbours j of w_ij v_j

one sparse linear system for all removed pixels, the same for every channel. It is
symmetric positive definite when at least one pixel is kept, and is solved here
matrix-free by conjugate gradients with a Jacobi preconditioner, in float64 (float32 stalls
near 2e-4 on large holes), the channels as one batch; the 8-neighbour stencil is shifted
adds of the padded image (several times faster than a one-channel conv2d on a CPU).
pytorch-grad-cam solves the same system with scipy's spsolve.

Then `noise` times a standard normal draw is added at every removed pixel, channel by
channel, the removed pixels in reading order: with a generator seeded s, the same numbers
pytorch-grad-cam gets after torch.manual_seed(s).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

TOLERANCE = 1e-8  # relative residual at which the solve stops
MAX_ITERATIONS = 20000
CHECK_EVERY = 50  # iterations between two calls of `check` (a cancel stops a long solve)


def stencil(u: torch.Tensor) -> torch.Tensor:
    """The weighted sum over the 8 neighbours of each pixel of (..., H, W); 0 outside."""
    p = F.pad(u, (1, 1, 1, 1))
    sides = p[..., 1:-1, 2:] + p[..., 1:-1, :-2] + p[..., 2:, 1:-1] + p[..., :-2, 1:-1]
    corners = p[..., 2:, 2:] + p[..., 2:, :-2] + p[..., :-2, 2:] + p[..., :-2, :-2]
    return sides * (1 / 6) + corners * (1 / 12)


def impute(x: torch.Tensor, keep: torch.Tensor, noise: float = 0.0,
           generator: torch.Generator | None = None,
           check: Callable[[], None] | None = None) -> torch.Tensor:
    """x (C, H, W) with the pixels where `keep` (H, W) is False imputed; float32, on x's
    device (float64 arithmetic, on the CPU for a device without it). ValueError when no
    pixel is kept (nothing to impute from)."""
    if not bool(keep.any()):
        raise ValueError("ROAD keeps no pixel at this percentile: nothing to impute from")
    device = x.device if x.device.type == "cuda" else torch.device("cpu")
    c, h, w = x.shape
    dt = torch.float64
    removed = (~keep.to(device)).to(dt)[None, None].expand(c, 1, h, w)
    kept = 1 - removed
    v = x.to(device, dt)[:, None]
    diagonal = stencil(torch.ones(1, 1, h, w, dtype=dt, device=device))
    u = _solve(removed, diagonal, removed * stencil(v * kept), check)
    out = (v * kept + u * removed)[:, 0].float()
    if noise:
        flat = out.reshape(c, -1)
        where = torch.nonzero(~keep.flatten().cpu()).flatten()
        draw = torch.randn((c, where.numel()), generator=generator)
        flat[:, where.to(device)] += (noise * draw).to(device)
    return out.to(x.device)


def _solve(removed: torch.Tensor, diagonal: torch.Tensor, b: torch.Tensor,
           check: Callable[[], None] | None) -> torch.Tensor:
    """(D - W_rr) u = b on the removed pixels by Jacobi-preconditioned conjugate gradients."""
    u = torch.zeros_like(b)
    r = b.clone()
    z = r / diagonal
    direction = z.clone()
    rz = (r * z).sum((1, 2, 3), keepdim=True)
    norm_b = b.flatten(1).norm(dim=1).clamp_min(1e-300)
    for it in range(MAX_ITERATIONS):
        ap = removed * (diagonal * direction - stencil(direction * removed))
        alpha = rz / (direction * ap).sum((1, 2, 3), keepdim=True).clamp_min(1e-300)
        u = u + alpha * direction
        r = r - alpha * ap
        if float((r.flatten(1).norm(dim=1) / norm_b).max()) < TOLERANCE:
            break
        if check is not None and it % CHECK_EVERY == CHECK_EVERY - 1:
            check()
        z = r / diagonal
        rz_next = (r * z).sum((1, 2, 3), keepdim=True)
        direction = z + rz_next / rz.clamp_min(1e-300) * direction
        rz = rz_next
    return u
