"""The lean path to attention maps, for scripts and `compute_cams`: one forward of a batch
under an AttentionCapture (without autograd but from the first block read on, when a method
needs gradients), then the methods.

    from inspector.core.explain.attention.maps import attention_maps
    maps = attention_maps(model, x, ["rollout", "gradrollout", "legrad"])
    maps.grids["rollout"]   # (B, gh, gw) float32, the raw map on the patch grid
    maps.cams["rollout"]    # (B, H, W) in [0, 1] at the input's size, as every CAM

The Session's path (core.explain.attention.stage) computes the same maps from a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from inspector.core.explain.attention.capture import AttentionCapture
from inspector.core.explain.attention.find import (
    AttentionModel,
    describe_blocks,
    find_attention,
    legrad_blocks,
    refusal,
)
from inspector.core.explain.attention.methods import gradrollout, legrad, legrad_gradients, rollout
from inspector.core.explain.attention.options import LEGRAD_BLOCKS, AttentionOptions
from inspector.core.explain.cam.methods import normalize_maps
from inspector.core.explain.cam.targets import Target, class_scores, logits_of, resolve_target
from inspector.core.explain.catalog import ATTENTION_CAMS, cam_method
from inspector.core.hookset import ModelState


@dataclass
class AttentionMaps:
    grids: dict[str, torch.Tensor]  # method -> (B, gh, gw) float32 on the CPU, unscaled
    cams: dict[str, np.ndarray]  # method -> (B, H, W) float32 in [0, 1] at the input's size
    logits: torch.Tensor  # (B, classes) on the CPU
    targets: list[int] | None  # the class explained per image; None for a score function
    blocks: dict[str, str]  # method -> the blocks it read, in words
    prefix: int  # tokens before the patch grid
    grid: tuple[int, int]


def attention_maps(model: nn.Module, x: torch.Tensor, methods: Sequence[str],
                   target: Target = None, *, options: AttentionOptions | None = None,
                   legrad_from: str | None = None, categories: Sequence[str] = (),
                   found: AttentionModel | None = None) -> AttentionMaps:
    """Attention maps of a batch x (B, 3, H, W); see the module docstring. legrad_from: the
    first block LeGrad reads (a block, its attention or a module in it; None: the last 4).
    ValueError, one sentence, for a model the maps do not apply to."""
    names = [cam_method(m) for m in methods]
    wrong = [n for n in names if n not in ATTENTION_CAMS]
    if wrong or not names:
        raise ValueError(f"not attention maps: {', '.join(wrong) or 'none asked for'}")
    options = options or AttentionOptions()
    x = x[None] if x.ndim == 3 else x
    found = found if found is not None else find_attention(model)
    if found is None:
        raise ValueError(refusal(model, None, None))
    picked = legrad_blocks(found, legrad_from, LEGRAD_BLOCKS) if "legrad" in names else ()
    every = {"rollout", "gradrollout"} & set(names)
    only = None if every else [found.attention[i] for i in picked]
    grad = bool({"gradrollout", "legrad"} & set(names))
    keep = [found.blocks[i] for i in picked]
    with ModelState(model, training=False), torch.no_grad():
        with AttentionCapture(model, found, grad=grad, only=only, keep_blocks=keep) as cap:
            logits = logits_of(model(x))
    hw = (int(x.shape[-2]), int(x.shape[-1]))
    why = cap.check(x.shape[0], hw)
    if why:
        raise ValueError(why)
    prefix, grid = cap.layout(hw)
    target = resolve_target(target, categories)
    raw: dict[str, torch.Tensor] = {}
    blocks: dict[str, str] = {}
    all_blocks = describe_blocks(found, range(len(found.attention)))
    scores, idx = class_scores(logits, target)
    if "legrad" in names:
        if idx is None:
            raise ValueError("LeGrad scores each block with the model's head: it needs a "
                             "class, not a score function")
        raw["legrad"] = legrad(legrad_gradients(cap, picked, idx), prefix=prefix)
        blocks["legrad"] = describe_blocks(found, picked)
    if "gradrollout" in names:
        grads = cap.gradients(scores.sum())
        raw["gradrollout"] = gradrollout(cap.probs(), grads, prefix=prefix,
                                         class_token=found.class_token)
        blocks["gradrollout"] = all_blocks
    if "rollout" in names:
        raw["rollout"] = rollout(cap.probs(), fusion=options.fusion, discard=options.discard,
                                 prefix=prefix, class_token=found.class_token)
        blocks["rollout"] = all_blocks
    cap.release()
    grids = {n: raw[n].reshape(-1, *grid).float().cpu() for n in names}
    return AttentionMaps(
        grids=grids,
        cams={n: normalize_maps(g, hw).cpu().numpy() for n, g in grids.items()},
        logits=logits.detach().float().cpu(), targets=idx, blocks=blocks, prefix=prefix,
        grid=grid)
