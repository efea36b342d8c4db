"""Average Drop and Increase in Confidence (Chattopadhay et al. 2018, Grad-CAM++), as
torch-cam's ClassificationMetric computes them for a given map.

p is the score of the input, p' the score of the normalised input multiplied by the map
(in [0, 1], at the input's size): where the map is 0 the input becomes 0, the data set's
mean colour, rather than the black of the paper's unnormalised images. Then

    drop = max(0, p - p') / (p + 1e-7)      increase = p' > p

One forward for all the maps of an image (plus one for p when the run's is not given).
"""

from __future__ import annotations

import torch

from inspector.core.explain.metrics.curves import as_maps
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.hookset import ModelState

EPS = 1e-7  # torch-cam's


def confidence_change(forwarder: Forwarder, x: torch.Tensor, maps, p0: float | None = None
                      ) -> list[tuple[float, bool]]:
    """(Average Drop, Increase in Confidence) of each map (H, W) or (M, H, W) in [0, 1]."""
    x = x[:1].detach()
    m = as_maps(maps, tuple(x.shape[-2:]), x.device)
    with ModelState(forwarder.scorer.model, training=False), torch.inference_mode():
        p = (torch.tensor(float(p0)) if p0 is not None else forwarder.score(x)[0]).float()
        masked = forwarder.score_all(m[:, None].to(x.dtype) * x)
    drops = torch.relu(p - masked) / (p + EPS)
    return [(float(d), bool(p < q)) for d, q in zip(drops, masked, strict=True)]
