"""How alike two maps are: Spearman's rank correlation and SSIM, as scipy and scikit-image
compute them (Adebayo et al. 2018 compare maps with both), without either library.

- spearman: the Pearson correlation of the two maps' average ranks (ties get the mean of
  their ranks, scipy.stats.rankdata's 'average': a ReLU'd CAM ties many pixels at 0),
  in float64. None when either map is constant (undefined, where scipy returns NaN).
- ssim: skimage.metrics.structural_similarity's defaults for 2-D maps: a 7 x 7 uniform
  window, K1 = 0.01, K2 = 0.03, sample covariances (x 49/48), the mean over the windows
  that lie wholly inside the map; `data_range` 1 for the app's [0, 1] maps.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

WINDOW = 7
K1, K2 = 0.01, 0.03


def _flat(a) -> torch.Tensor:
    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.asarray(a))
    return t.detach().flatten().to("cpu", torch.float64)


def average_ranks(values) -> torch.Tensor:
    """Ranks 1..n of the flattened values, ties given their mean rank, float64."""
    v = _flat(values)
    n = v.numel()
    ordered, order = torch.sort(v, stable=True)
    new = torch.ones(n, dtype=torch.bool)
    new[1:] = ordered[1:] != ordered[:-1]
    group = torch.cumsum(new, 0) - 1
    starts = torch.nonzero(new).flatten()
    ends = torch.cat([starts[1:], torch.tensor([n])])
    mean_rank = (starts + ends - 1).to(torch.float64) / 2 + 1
    ranks = torch.empty(n, dtype=torch.float64)
    ranks[order] = mean_rank[group]
    return ranks


def spearman(a, b) -> float | None:
    """Spearman's rank correlation of two maps of the same size; None when either is
    constant."""
    ra, rb = average_ranks(a), average_ranks(b)
    if ra.numel() != rb.numel():
        raise ValueError(f"maps of {ra.numel()} and {rb.numel()} values cannot be compared")
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = float(ra.norm() * rb.norm())
    return None if den == 0 else float((ra * rb).sum()) / den


def ssim(a, b, data_range: float = 1.0) -> float:
    """The structural similarity of two (H, W) maps, each side at least WINDOW."""
    x = torch.as_tensor(np.asarray(a) if not isinstance(a, torch.Tensor) else a)
    y = torch.as_tensor(np.asarray(b) if not isinstance(b, torch.Tensor) else b)
    x = x.detach().to("cpu", torch.float64)[None, None]
    y = y.detach().to("cpu", torch.float64)[None, None]
    if x.shape != y.shape or min(x.shape[-2:]) < WINDOW:
        raise ValueError(f"SSIM needs two maps of the same size, at least {WINDOW} x "
                         f"{WINDOW}: got {tuple(x.shape[-2:])} and {tuple(y.shape[-2:])}")

    def mean(t: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(t, kernel_size=WINDOW, stride=1)

    n = WINDOW * WINDOW
    sample = n / (n - 1)
    ux, uy = mean(x), mean(y)
    vx = sample * (mean(x * x) - ux * ux)
    vy = sample * (mean(y * y) - uy * uy)
    vxy = sample * (mean(x * y) - ux * uy)
    c1, c2 = (K1 * data_range) ** 2, (K2 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return float(s.mean())
