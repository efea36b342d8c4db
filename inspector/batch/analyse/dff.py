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
    channels, positions = _factorised_size(session, layer)
    if a.dff > min(channels, positions):
        raise ValueError(f"--dff {a.dff}: '{layer}' has {channels} channels at {positions} "
                         f"positions, so at most {min(channels, positions)} concepts")
    return layer, list(dict.fromkeys([*layers, layer]))


def _factorised_size(session, layer: str) -> tuple[int, int]:
    """(channels, positions) of one image's output of `layer` read as a spatial map, from the
    probe's shapes; ValueError, as dff_arrays would raise on every image, when it is none."""
    from inspector.core.tokens import NCHW, detect_layout

    shape = session.tree[layer].output_shape
    hw = session.loaded.preprocess.crop_size
    layout = detect_layout(tuple(shape), hw, batch_size=1) if shape else None
    if layout is None:
        raise ValueError(f"--dff-layer {layer}: its output has shape {list(shape or [])}, "
                         f"which is not a spatial map (B, C, h, w), a channels-last map or a "
                         f"patch grid: choose a convolution's or a block's output")
    channels = shape[1] if layout.kind == NCHW else shape[-1]  # NHWC and tokens: last
    gh, gw = layout.grid
    return int(channels), int(gh * gw)


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
