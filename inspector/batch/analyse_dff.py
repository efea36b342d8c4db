"""`analyse --dff K`: deep feature factorisation of each image at one layer, into its NPZ.

    dff/concepts   (channels, K) float32, as pytorch-grad-cam's `dff` returns them
    dff/heatmaps   (K, h, w) float32 at the layer's resolution, not rescaled

The layer is --dff-layer, else the CAM layer; its whole output is captured for it.
"""

from __future__ import annotations

import numpy as np

from inspector.batch.names import unknown_modules


def check_dff(a, session, cam_layer: str | None, layers: list[str]) -> tuple[str | None,
                                                                            list[str]]:
    """(the DFF layer, the layers to capture with it) of `a` (an Analysis); ValueError, one
    line, when it cannot work (scikit-learn missing among the reasons)."""
    if not a.dff:
        return None, layers
    from inspector.core.explain.concepts import ConceptsUnavailable, sklearn_decomposition

    if a.dff < 1:
        raise ValueError("--dff must be 1 or more concepts")
    try:
        sklearn_decomposition()
    except ConceptsUnavailable as e:
        raise ValueError(str(e)) from None
    layer = a.dff_layer or cam_layer or session.default_cam_layer()
    if layer is None:
        raise ValueError("the model has no layer to factorise by default: name one with "
                         "--dff-layer")
    if layer not in session.tree.modules:
        raise ValueError(unknown_modules([layer], session.tree))
    return layer, list(dict.fromkeys([*layers, layer]))


def dff_arrays(k: int, layer: str, arrays: dict, input_hw: tuple[int, int]) -> dict:
    """The image's ("dff", "concepts") and ("dff", "heatmaps") from its captured arrays."""
    import torch

    from inspector.core.explain.concepts import dff
    from inspector.core.tokens import spatialize

    acts = arrays.get(("activation", layer))
    if acts is None:
        return {}
    t = torch.from_numpy(np.asarray(acts, np.float32))
    spatial = spatialize(t, input_hw, layer, batch_size=1)[0]
    result = dff(spatial.numpy(), k)
    return {("dff", "concepts"): result.concepts.astype(np.float32),
            ("dff", "heatmaps"): result.heatmaps[0].astype(np.float32)}
