"""How the sanity check makes a run's maps again on the randomised copy of the model: the
CAMs by the lean path (core.explain.cam.compute.compute_cams, every CAM of the layer from
one forward and backward), the attention maps (rollout, gradient rollout, LeGrad: no layer)
by core.explain.attention.maps.attention_maps with the run's attention options, the
attributions by core.explain.attributions.attribute, for the class the run explained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from inspector.core.explain.attention.maps import attention_maps
from inspector.core.explain.attributions import attribute
from inspector.core.explain.cam.compute import compute_cams
from inspector.core.explain.metrics.maps import attribution_saliency

Explain = Callable[[nn.Module], dict[str, np.ndarray]]


def cam_maps(x: torch.Tensor, methods: Sequence[str], layer: str, target: int, tree=None
             ) -> Explain:
    """The CAMs `methods` at `layer` of the model it is called with, (H, W) in [0, 1]."""

    def explain(model: nn.Module) -> dict[str, np.ndarray]:
        result = compute_cams(model, x, list(methods), layer, target=target, tree=tree)
        return {m: result.cams[m][0] for m in methods}

    return explain


def attention_maps_of(x: torch.Tensor, methods: Sequence[str], target: int, options=None,
                      legrad_from: str | None = None) -> Explain:
    """The attention maps `methods` of the model it is called with, as the run made them
    (its rollout options; LeGrad from `legrad_from`, None: its last blocks)."""
    def explain(model: nn.Module) -> dict[str, np.ndarray]:
        # Gradient rollout and LeGrad differentiate the score, which the metrics' caller
        # may have turned off.
        with torch.enable_grad():
            result = attention_maps(model, x, list(methods), target, options=options,
                                    legrad_from=legrad_from)
        return {m: result.cams[m][0] for m in methods}

    return explain


def attribution_maps(x: torch.Tensor, methods: Sequence[str], target: int, options=None
                     ) -> Explain:
    """The attributions `methods` of the model it is called with, as the metrics score them."""

    def explain(model: nn.Module) -> dict[str, np.ndarray]:
        return {m: attribution_saliency(attribute(model, x, target, m, options)[0])
                for m in methods}

    return explain
