"""Score-CAM (Wang et al. 2020): channel weights from masked forwards instead of gradients."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from inspector.core.explain.cam.methods import _weighted_sum
from inspector.core.explain.cam.targets import Target, class_scores, logits_of

Progress = Callable[[int, int], None]


@torch.no_grad()
def score_cam(
    model: nn.Module,
    x: torch.Tensor,
    a: torch.Tensor,
    target: Target = None,
    batch_size: int = 32,
    progress: Progress | None = None,
    logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Wang et al. 2020: each channel, upsampled and scaled to [0, 1], masks the input; the
    target's softmax probability on that masked input is the channel's weight. (B, h, w).

    x is the model input (B, 3, H, W) and a the layer's activations (B, K, h, w). The masked
    inputs go through the model `batch_size` at a time, so memory stays bounded; progress is
    called with (forwards done, forwards in all), and may raise to stop (a cancelled run).
    `logits` of x, when known, saves a forward.
    """
    b, k = a.shape[:2]
    hw = tuple(x.shape[-2:])
    if logits is None:
        logits = logits_of(model(x))
    _, idx = class_scores(logits, target)
    total, done = b * k, 0
    weights = torch.zeros(b, k, device=a.device, dtype=torch.float32)
    for i in range(b):
        for start in range(0, k, batch_size):
            chunk = a[i, start : start + batch_size, None].float()
            up = F.interpolate(chunk, size=hw, mode="bilinear", align_corners=False)
            lo = up.amin(dim=(2, 3), keepdim=True)
            span = up.amax(dim=(2, 3), keepdim=True) - lo
            masks = torch.where(span > 0, (up - lo) / span.clamp_min(1e-12), torch.zeros_like(up))
            out = logits_of(model(x[i : i + 1].to(masks.dtype) * masks))
            if idx is None:
                w = target(out)
            else:
                w = out.float().softmax(dim=-1)[:, idx[i]]
            weights[i, start : start + len(chunk)] = w.float()
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return _weighted_sum(a.float(), weights)
