"""Class activation maps from a run: which parts of the input a layer's evidence comes from.

Two ways feed the methods (methods.py, scorecam.py):

- `cam_from_capture`: from what a `hooks.Capture` kept during a Session run (the GUI).
- `compute_cams`: the lean path for scripts and batches (and the CLI's Score-CAM). One
  forward hook, on the target layer only. The forward runs without autograd up to that
  layer, and the hook hands the rest of the model a fresh leaf, so the graph starts at the
  layer: the backward is `torch.autograd.grad(score, activation)` through the few modules
  above it, and nothing below it (no input gradient, no parameter gradient) is computed.
  A CAM costs about one forward.

Token outputs (ViT, Swin) are read as grids by `core.tokens`. Maps are upsampled bilinearly
to the model input and scaled to [0, 1] per image; `Preprocess.to_original` maps them onto
the original picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from inspector.core.explain.cam.layer import default_target_layer
from inspector.core.explain.cam.methods import METHODS, method_name, normalize_maps
from inspector.core.explain.cam.scorecam import Progress, score_cam
from inspector.core.explain.cam.targets import Target, class_scores, logits_of, resolve_target
from inspector.core.explain.catalog import ATTENTION_CAMS
from inspector.core.hookset import HookSet, ModelState, replace_leaf, tensor_leaves
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.tokens import Layout, spatialize, to_spatial

# -- the Session path -----------------------------------------------------------------------------


def _kept(cap, layer: str, kind: str) -> torch.Tensor | None:
    """The kept tensor of the layer's last call: the plain output, else its first tensor."""
    found = cap.kept_tensor(layer, kind)
    if found is not None:
        return found
    keys = [key for key in cap.kept if key[0] == layer and key[2] == kind]
    if not keys:
        return None
    last = max(key[1] for key in keys)
    return cap.kept[min(key for key in keys if key[1] == last)]


def cam_from_capture(
    method: str,
    cap,
    layer: str,
    input_hw: tuple[int, int],
    *,
    model_input: torch.Tensor | None = None,
    target: Target = None,
    progress: Progress | None = None,
) -> np.ndarray:
    """One CAM (float32 H x W at the model input's size, in [0, 1]) from a Capture that kept
    `layer` (its output and output gradient); the first image of the batch.

    Score-CAM also needs the model input and the target (it runs the model again).
    """
    name = method_name(method)
    spec = METHODS[name]
    a = _kept(cap, layer, OUTPUT)
    if a is None:
        raise ValueError(f"CAM layer '{layer}' kept no output in this run: did it run in the forward?")
    batch = model_input.shape[0] if model_input is not None else 1
    a, layout = spatialize(a, tuple(input_hw), layer, batch_size=batch)
    g = _kept(cap, layer, GRAD_OUTPUT)
    if spec.fn is None:
        if model_input is None:
            raise ValueError("Score-CAM runs the model on masked inputs: it needs the model input")
        with ModelState(cap.model, training=False):
            raw = score_cam(cap.model, model_input.detach(), a, target, progress=progress)
    elif spec.needs_grad:
        if g is None:
            raise ValueError(
                f"{spec.title}: no gradient reached '{layer}' (run with backward on, and pick a "
                f"layer on the path to the class score)"
            )
        raw = spec.fn(a.float(), to_spatial(g, layout).float())
    else:
        raw = spec.fn(a.float())
    return normalize_maps(raw[:1], tuple(input_hw))[0].cpu().numpy()


# -- the lean path --------------------------------------------------------------------------------


@dataclass
class CamResult:
    cams: dict[str, np.ndarray]  # method -> (B, H, W) float32 in [0, 1] at the input's size
    raw: dict[str, torch.Tensor]  # method -> (B, h, w) at the layer's resolution, unscaled
    logits: torch.Tensor  # (B, classes) on the CPU
    targets: list[int] | None  # the class explained per image; None for a score function
    layer: str
    layout: Layout | None = None


class _LayerTap:
    """The forward hook on the CAM layer. With `cut`, it turns autograd on at the layer's
    output and hands the rest of the model a copy of a fresh leaf: the graph starts there,
    and the original stays unmodified by any in-place op that follows."""

    def __init__(self, name: str, cut: bool) -> None:
        self.name, self.cut = name, cut
        self.activation: torch.Tensor | None = None

    def __call__(self, module, args, output):
        leaves = [(p, t) for p, t in tensor_leaves(output) if t.is_floating_point()]
        if not leaves:
            raise ValueError(f"CAM layer '{self.name}' returned no floating-point tensor")
        path, t = leaves[0]
        if not self.cut:
            self.activation = t.detach().clone()
            return None
        torch.set_grad_enabled(True)  # restored by compute_cams
        leaf = t.detach().requires_grad_(True)
        self.activation = leaf
        return replace_leaf(output, path, leaf.clone())


def compute_cams(
    model: nn.Module,
    x: torch.Tensor,
    methods: Sequence[str] = ("gradcam",),
    layer: str | None = None,
    target: Target = None,
    *,
    tree=None,
    categories: Sequence[str] = (),
    progress: Progress | None = None,
    score_batch_size: int = 32,
) -> CamResult:
    """CAMs of a batch x (B, 3, H, W) for the given methods at `layer` (default: see
    default_target_layer; builds the module tree when none is given).

    target: None (top-1 per image), a class index, a class name (with `categories`), one
    index per image, or a function logits (B, classes) -> scores (B,).

    Attention maps (rollout, gradrollout, legrad) read no layer: they come from
    core.explain.attention.maps, in a forward of their own; `layer` is LeGrad's first block
    when they are all that is asked for, else LeGrad reads the last 4 blocks.
    """
    names = [method_name(m) for m in methods]
    if not names:
        raise ValueError("no CAM method asked for")
    if x.ndim == 3:
        x = x[None]
    attention = [n for n in names if n in ATTENTION_CAMS]
    if attention:
        return _with_attention(model, x, names, attention, layer, target, tree=tree,
                               categories=categories, progress=progress,
                               score_batch_size=score_batch_size)
    layer = layer if layer is not None else _default_layer(model, x, tree)
    modules = dict(model.named_modules())
    if layer not in modules:
        raise KeyError(f"no module named '{layer}' in the model")
    target = resolve_target(target, categories)
    tap = _LayerTap(layer, cut=any(METHODS[n].needs_grad for n in names))
    with ModelState(model, training=False), torch.set_grad_enabled(False):
        with HookSet() as hooks:  # the tap turns autograd on at the layer
            hooks.forward(modules[layer], tap)
            logits = logits_of(model(x))
        if tap.activation is None:
            raise ValueError(f"CAM layer '{layer}' did not run in the forward")
        scores, idx = class_scores(logits, target)
        grad = _layer_gradient(scores, tap) if tap.cut else None
        torch.set_grad_enabled(False)
        a, layout = spatialize(tap.activation.detach(), tuple(x.shape[-2:]), layer,
                               batch_size=x.shape[0])
        a = a.float()
        g = to_spatial(grad, layout).float() if grad is not None else None
        raw: dict[str, torch.Tensor] = {}
        for name in names:
            spec = METHODS[name]
            if spec.fn is None:
                raw[name] = score_cam(model, x, a, target if idx is None else idx,
                                      score_batch_size, progress, logits.detach())
            else:
                raw[name] = spec.fn(a, g) if spec.needs_grad else spec.fn(a)
    out_hw = tuple(x.shape[-2:])
    return CamResult(
        cams={n: normalize_maps(r, out_hw).cpu().numpy() for n, r in raw.items()},
        raw={n: r.cpu() for n, r in raw.items()},
        logits=logits.detach().float().cpu(),
        targets=idx,
        layer=layer,
        layout=layout,
    )


def _with_attention(model, x, names, attention, layer, target, **rest) -> CamResult:
    """compute_cams of a list with attention maps: those from their own forward, the
    layer's CAMs (if any) from compute_cams, in one CamResult."""
    from inspector.core.explain.attention.maps import attention_maps

    others = [n for n in names if n not in attention]
    maps = attention_maps(model, x, attention, target, categories=rest["categories"],
                          legrad_from=None if others else layer)
    if not others:
        return CamResult(cams=maps.cams, raw=dict(maps.grids), logits=maps.logits,
                         targets=maps.targets, layer="")
    result = compute_cams(model, x, others, layer, target, **rest)
    result.cams.update(maps.cams)
    result.raw.update(maps.grids)
    return result


def _default_layer(model: nn.Module, x: torch.Tensor, tree) -> str:
    if tree is None:
        from inspector.core.models.tree import build_tree

        tree = build_tree(model, x[:1].detach())
    return default_target_layer(model, tree)


def _layer_gradient(scores: torch.Tensor, tap: _LayerTap) -> torch.Tensor:
    """d (sum of the scores) / d the layer's output, through the modules above it only."""
    if not scores.requires_grad:
        raise ValueError(
            f"the class score does not depend on '{tap.name}' through autograd (is the layer "
            f"run under torch.no_grad, or after the output?)"
        )
    (grad,) = torch.autograd.grad(scores.sum(), tap.activation, allow_unused=True)
    if grad is None:
        raise ValueError(f"the class score does not depend on layer '{tap.name}'")
    return grad
