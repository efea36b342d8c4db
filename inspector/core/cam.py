"""Class activation maps: which parts of the input a layer's evidence for a class comes from.

Each method is a short function of a layer's activations A and the gradient G of the class
score with respect to them, both (B, K, h, w), returning (B, h, w) maps at the layer's
resolution (EigenCAM uses no gradients; Score-CAM runs masked forwards). Two ways feed them:

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

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .frames import GRAD_OUTPUT, OUTPUT
from .hooks import tensor_leaves
from .tokens import NCHW, NHWC, TOKENS, Layout, detect_layout, spatialize, to_spatial

Target = None | int | str | Sequence[int] | Callable[[torch.Tensor], torch.Tensor]
Progress = Callable[[int, int], None]

_EPS = 1e-7


# -- the methods: (A, G) -> (B, h, w) -----------------------------------------------------------


def _weighted_sum(a: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """ReLU(sum_k w_k A_k) for per-image, per-channel weights (B, K)."""
    return torch.einsum("bk,bkhw->bhw", weights, a).clamp_min(0)


def gradcam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Selvaraju et al. 2017: channel weights are the spatial mean of the gradient."""
    return _weighted_sum(a, g.mean(dim=(2, 3)))


def gradcam_pp(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Chattopadhay et al. 2018: positive gradients weighted per pixel by the closed-form
    alpha of an exponential score, so several instances of a class each count."""
    g2 = g * g
    g3 = g2 * g
    sum_a = a.sum(dim=(2, 3), keepdim=True)
    alpha = g2 / (2 * g2 + sum_a * g3 + 1e-6)
    alpha = torch.where(g != 0, alpha, torch.zeros_like(alpha))
    return _weighted_sum(a, (g.clamp_min(0) * alpha).sum(dim=(2, 3)))


def xgradcam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Fu et al. 2020: weights normalised by the activation so the map sums to the score for
    a ReLU network without biases (the conservation axiom)."""
    weights = (g * a).sum(dim=(2, 3)) / (a.sum(dim=(2, 3)) + _EPS)
    return _weighted_sum(a, weights)


def layercam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Jiang et al. 2021: each location weighted by its own positive gradient."""
    return (g.clamp_min(0) * a).sum(dim=1).clamp_min(0)


def hirescam(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Draelos & Carin 2020: gradient times activation, summed over channels without
    averaging the gradient first, so the map shows where the score actually came from."""
    return (g * a).sum(dim=1).clamp_min(0)


def eigencam(a: torch.Tensor, g: torch.Tensor | None = None) -> torch.Tensor:
    """Muhammad & Yeasin 2020: the activations projected on their first principal
    direction (SVD of the hw x K matrix, not centred, as in the paper). The sign of a
    singular vector is arbitrary: it is chosen so that the map is
    mostly positive (for non-negative activations it is non-negative everywhere). Uses no
    gradient and no class."""
    b, k, h, w = a.shape
    m = a.reshape(b, k, h * w).transpose(1, 2)  # (B, hw, K)
    u, s, _ = torch.linalg.svd(m, full_matrices=False)
    proj = u[:, :, 0] * s[:, :1]  # (B, hw): m @ v1
    sign = torch.sign(proj.sum(dim=1, keepdim=True))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    return (proj * sign).reshape(b, h, w).clamp_min(0)


@dataclass(frozen=True)
class CamMethod:
    name: str
    fn: Callable[..., torch.Tensor] | None  # None: Score-CAM, which needs the model
    needs_grad: bool
    title: str


METHODS: dict[str, CamMethod] = {
    m.name: m
    for m in (
        CamMethod("gradcam", gradcam, True, "Grad-CAM"),
        CamMethod("gradcam++", gradcam_pp, True, "Grad-CAM++"),
        CamMethod("xgradcam", xgradcam, True, "XGrad-CAM"),
        CamMethod("layercam", layercam, True, "LayerCAM"),
        CamMethod("hirescam", hirescam, True, "HiResCAM"),
        CamMethod("eigencam", eigencam, False, "EigenCAM"),
        CamMethod("scorecam", None, False, "Score-CAM"),
    )
}
_ALIASES = {"gradcampp": "gradcam++", "gradcamplusplus": "gradcam++", "gradcamplus": "gradcam++"}


def method_name(name: str) -> str:
    """The canonical name of a method: "Grad-CAM++", "grad_cam_pp" -> "gradcam++"."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    key = _ALIASES.get(key, key)
    if key not in METHODS:
        raise ValueError(f"unknown CAM method '{name}'; known: {', '.join(METHODS)}")
    return key


# -- maps to images -------------------------------------------------------------------------------


def normalize_maps(cams: torch.Tensor, out_hw: tuple[int, int]) -> torch.Tensor:
    """(B, h, w) -> (B, H, W) float32: bilinear upsampling, then min-max to [0, 1] per image.

    A constant map (all zero: no evidence) stays 0 rather than 0/0; a constant positive one
    is 1 everywhere. NaN and infinities (an exploding model) become 0 and the largest float.
    """
    cams = torch.nan_to_num(cams.detach().float(), nan=0.0)
    up = F.interpolate(cams[:, None], size=tuple(out_hw), mode="bilinear", align_corners=False)
    up = up[:, 0]
    lo = up.amin(dim=(1, 2), keepdim=True)
    hi = up.amax(dim=(1, 2), keepdim=True)
    span = hi - lo
    flat = span <= 1e-6 * hi.abs()
    scaled = (up - lo) / torch.where(flat, torch.ones_like(span), span)
    return torch.where(flat, (hi > 0).float().expand_as(up), scaled)


# -- targets --------------------------------------------------------------------------------------


def resolve_target(target: Target, categories: Sequence[str] = ()) -> Target:
    """A user's target as compute_cams takes it: "top1"/None -> None, "7" -> 7, a class name
    -> its index (case-insensitive), anything else unchanged."""
    if not isinstance(target, str):
        return target
    text = target.strip()
    if text.lower() in ("", "top1", "top-1", "top"):
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    lowered = [c.lower() for c in categories]
    if text.lower() in lowered:
        return lowered.index(text.lower())
    import difflib

    close = difflib.get_close_matches(text.lower(), lowered, n=3)
    hint = f"; did you mean {', '.join(repr(categories[lowered.index(c)]) for c in close)}?"
    raise ValueError(f"no class named '{target}' in this model" + (hint if close else ""))


def class_scores(logits: torch.Tensor, target: Target) -> tuple[torch.Tensor, list[int] | None]:
    """The scores to explain, (B,), and the class index per image (None for a score function)."""
    b, n = logits.shape[0], logits.shape[-1]
    if callable(target):
        scores = target(logits)
        if not isinstance(scores, torch.Tensor) or scores.shape != (b,):
            got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ValueError(f"a target score function must return shape ({b},), got {got}")
        return scores, None
    if isinstance(target, torch.Tensor):
        target = target.tolist()
    if target is None:
        idx = logits.detach().reshape(b, -1).argmax(dim=1).tolist()
    elif isinstance(target, numbers.Integral):
        idx = [int(target)] * b
    elif isinstance(target, str):
        raise ValueError(f"class name '{target}': resolve it with resolve_target(target, categories)")
    else:
        idx = [int(t) for t in target]
        if len(idx) != b:
            raise ValueError(f"{len(idx)} targets given for a batch of {b}")
    for i in idx:
        if not 0 <= i < n:
            raise ValueError(f"target class {i} out of range 0..{n - 1}")
    rows = torch.arange(b, device=logits.device)
    return logits.reshape(b, -1)[rows, torch.tensor(idx, device=logits.device)], idx


def logits_of(output: Any) -> torch.Tensor:
    """The class scores in a model's output: the tensor itself, 'logits'/'out', or the first."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        for key in ("logits", "out"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]
    for _, t in tensor_leaves(output):
        return t
    raise ValueError(f"the model returned {type(output).__name__} with no tensor in it")


# -- the default layer ----------------------------------------------------------------------------


def _input_hw(tree) -> tuple[int, int] | None:
    root = tree.modules.get("")
    if root is not None and root.calls and root.calls[0].inputs:
        shape = root.calls[0].inputs[0][1]
        if len(shape) == 4:
            return int(shape[-2]), int(shape[-1])
    return None


def default_target_layer(model: nn.Module, tree) -> str:
    """The layer a CAM reads when the user names none.

    Transformers (ViT, Swin): the first norm of the last block, the last place where every
    patch token still reaches the class score (after ViT's last block only the class token
    is read, so patch-token gradients there are zero). A block is a module with two or more
    LayerNorms over token or channels-last outputs. CNNs: the last module with a spatial
    (B, C, h, w) output of more than one cell (resnet's layer4, not its 1 x 1 avgpool).
    """
    input_hw = _input_hw(tree)
    modules = dict(model.named_modules())
    order = [n for n in (tree.order or list(tree.modules)) if n]

    def layout(name: str) -> Layout | None:
        shape = tree.modules[name].output_shape
        if not shape:
            return None
        found = detect_layout(shape, input_hw)
        return found if found is not None and found.grid[0] * found.grid[1] >= 2 else None

    blocks: dict[str, list[str]] = {}
    for name in order:
        mod = modules.get(name)
        is_norm = isinstance(mod, nn.LayerNorm) or "LayerNorm" in tree.modules[name].type_name
        found = layout(name) if is_norm else None
        if found is not None and found.kind in (TOKENS, NHWC):
            blocks.setdefault(tree.modules[name].parent or "", []).append(name)
    blocks = {parent: norms for parent, norms in blocks.items() if len(norms) >= 2}
    if blocks:
        last = max(blocks.values(), key=lambda norms: order.index(norms[-1]))
        return last[0]
    spatial = [n for n in order if layout(n) is not None]
    candidates = [n for n in spatial if layout(n).kind == NCHW] or spatial
    if candidates:
        return candidates[-1]
    raise ValueError(
        "no module of this model has a spatial output (B, C, h, w) or a token grid: "
        "name the CAM layer explicitly"
    )


# -- Score-CAM ------------------------------------------------------------------------------------


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
        raw = _with_eval(cap.model, lambda: score_cam(cap.model, model_input.detach(), a, target,
                                                      progress=progress))
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


def _with_eval(model: nn.Module, fn: Callable[[], Any]) -> Any:
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        return fn()
    finally:
        for m, training in flags:
            m.training = training


# -- the lean path --------------------------------------------------------------------------------


@dataclass
class CamResult:
    cams: dict[str, np.ndarray]  # method -> (B, H, W) float32 in [0, 1] at the input's size
    raw: dict[str, torch.Tensor]  # method -> (B, h, w) at the layer's resolution, unscaled
    logits: torch.Tensor  # (B, classes) on the CPU
    targets: list[int] | None  # the class explained per image; None for a score function
    layer: str
    layout: Layout | None = None
    activation: torch.Tensor | None = field(default=None, repr=False)  # (B, K, h, w)
    gradient: torch.Tensor | None = field(default=None, repr=False)


class _LayerTap:
    """A forward hook on one module, removed on exit. With `cut`, it turns autograd on at the
    module's output and hands the rest of the model a copy of a fresh leaf: the graph starts
    there, and the original stays unmodified by any in-place op that follows."""

    def __init__(self, module: nn.Module, name: str, cut: bool) -> None:
        self.module, self.name, self.cut = module, name, cut
        self.activation: torch.Tensor | None = None
        self.calls = 0
        self._handle = None

    def __enter__(self) -> _LayerTap:
        self._handle = self.module.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()

    def _hook(self, module, args, output):
        leaves = [(p, t) for p, t in tensor_leaves(output) if t.is_floating_point()]
        if not leaves:
            raise ValueError(f"CAM layer '{self.name}' returned no floating-point tensor")
        path, t = leaves[0]
        self.calls += 1
        if not self.cut:
            self.activation = t.detach().clone()
            return None
        torch.set_grad_enabled(True)  # restored by compute_cams
        leaf = t.detach().requires_grad_(True)
        self.activation = leaf
        return _replace(output, path, leaf.clone())


def _replace(value: Any, path: str, new: torch.Tensor) -> Any:
    if not path:
        return new
    head, _, rest = path.partition(".")
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    items = list(value)
    items[int(head)] = _replace(items[int(head)], rest, new)
    return type(value)(items) if isinstance(value, list) else tuple(items)


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
    keep_tensors: bool = False,
) -> CamResult:
    """CAMs of a batch x (B, 3, H, W) for the given methods at `layer` (default: see
    default_target_layer; builds the module tree when none is given).

    target: None (top-1 per image), a class index, a class name (with `categories`), one
    index per image, or a function logits (B, classes) -> scores (B,).
    """
    names = [method_name(m) for m in methods]
    if not names:
        raise ValueError("no CAM method asked for")
    if x.ndim == 3:
        x = x[None]
    if layer is None:
        if tree is None:
            from .tree import build_tree

            tree = build_tree(model, x[:1].detach())
        layer = default_target_layer(model, tree)
    modules = dict(model.named_modules())
    if layer not in modules:
        raise KeyError(f"no module named '{layer}' in the model")
    target = resolve_target(target, categories)
    need_grad = any(METHODS[n].needs_grad for n in names)
    flags = [(m, m.training) for m in model.modules()]
    grad_was = torch.is_grad_enabled()
    tap = _LayerTap(modules[layer], layer, cut=need_grad)
    try:
        model.eval()
        torch.set_grad_enabled(False)  # the tap turns it on at the layer
        with tap:
            logits = logits_of(model(x))
        if tap.activation is None:
            raise ValueError(f"CAM layer '{layer}' did not run in the forward")
        scores, idx = class_scores(logits, target)
        grad = None
        if need_grad:
            if not scores.requires_grad:
                raise ValueError(
                    f"the class score does not depend on '{layer}' through autograd (is the layer "
                    f"run under torch.no_grad, or after the output?)"
                )
            (grad,) = torch.autograd.grad(scores.sum(), tap.activation, allow_unused=True)
            if grad is None:
                raise ValueError(f"the class score does not depend on layer '{layer}'")
        torch.set_grad_enabled(False)
        act = tap.activation.detach()
        a, layout = spatialize(act, tuple(x.shape[-2:]), layer, batch_size=x.shape[0])
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
        cams = {n: normalize_maps(r, out_hw).cpu().numpy() for n, r in raw.items()}
        return CamResult(
            cams=cams,
            raw={n: r.cpu() for n, r in raw.items()},
            logits=logits.detach().float().cpu(),
            targets=idx,
            layer=layer,
            layout=layout,
            activation=a.cpu() if keep_tensors else None,
            gradient=g.cpu() if keep_tensors and g is not None else None,
        )
    finally:
        torch.set_grad_enabled(grad_was)
        for m, training in flags:
            m.training = training
