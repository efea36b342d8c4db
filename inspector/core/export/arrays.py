"""A run's whole tensors, as the NPZ of `network-inspector analyse` holds them.

One layout for the CLI and the window's File ▸ Save run as NPZ, so that a file saved from
either reads the same way:

    input                  (1, 3, H, W) float32, the model input (after preprocessing)
    logits                 (1, classes) float32, the model's output (after any edits)
    activation/<module>    the module's output of its last call in the run; a tuple or
                           dict output's parts as activation/<module>:<path>
    gradient/<module>      the gradient of the explained class's score w.r.t. that output
    cam/<method>           H x W of the model input, in [0, 1]
    grid/<method>          an attention map (rollout, gradrollout, legrad) on the patch grid,
                           rows x columns, before upsampling and scaling (float32)
    attention/<module>     an attention module's (heads, tokens, tokens) attention of the
                           first image (core.explain.attention)
    attr/<method>          3 x H x W input attributions, signed, not scaled (core.explain.attributions)

Frames carry whole tensors only where their capture asked for them (CaptureSpec.full).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from inspector.core.records.frames import ActivationFrame, GradientFrame
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT

KIND_PREFIX = {OUTPUT: "activation", GRAD_OUTPUT: "gradient"}


def full_arrays(frames: Iterable) -> dict[tuple[str, str], np.ndarray]:
    """(activation|gradient, module[:path]) -> the whole tensor of the module's last call."""
    best: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
    for f in frames:
        if f.__class__ not in (ActivationFrame, GradientFrame) or f.full is None:
            continue
        kind = KIND_PREFIX.get(f.kind)
        if kind is None:
            continue
        key = (kind, f.module + (f":{f.path}" if f.path else ""))
        if key not in best or f.call >= best[key][0]:
            best[key] = (f.call, f.full)
    return {k: v for k, (_, v) in best.items()}


def npz_arrays(model_input, arrays: Mapping[tuple[str, str], np.ndarray],
               cams: Mapping[str, np.ndarray], logits=None) -> dict[str, np.ndarray]:
    """The NPZ's arrays by name (see the module docstring). `model_input`: (3, H, W) or
    (1, 3, H, W), a tensor or an array; `arrays`: (kind, module) -> array, as `full_arrays`
    gives plus ("attr", method) entries; `cams`: method -> map."""
    x = _float32(model_input)
    npz: dict[str, np.ndarray] = {"input": x[None] if x.ndim == 3 else x}
    if logits is not None:
        npz["logits"] = _float32(logits)
    for (kind, module), array in arrays.items():
        npz[f"{kind}/{module}"] = _float32(array)
    for method, cam in cams.items():
        npz[f"cam/{method}"] = _float32(cam)
    return npz


def _float32(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a tensor (torch is not imported here for it)
        value = value.detach().to("cpu").float().numpy()
    return np.asarray(value).astype(np.float32, copy=False)
