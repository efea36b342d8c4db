"""Input attributions: how much each input pixel matters to a class score.

Saliency, the absolute input gradient (Simonyan et al. 2014, as Captum's `Saliency` with
abs=True), Gradient x Input (Shrikumar et al. 2016),
SmoothGrad (Smilkov et al. 2017), Integrated Gradients (Sundararajan et al. 2017), and
occlusion sensitivity (Zeiler & Fergus 2014; core.explain.occlusion), which needs no gradient.
`attribute(model, x, target, method, options)` runs any of those named in
`core.explain.catalog.ATTRIBUTION_METHODS` and returns the attribution as a numpy array.
The gradient methods take the gradient of the score with respect to the input only
(`torch.autograd.grad(score, x)`): no parameter gradient is computed or accumulated, and
the model's own `.grad` fields are left alone. The model runs in eval mode and its
train/eval flags are restored afterwards.

SmoothGrad and Integrated Gradients run many forwards; they go through the model at most
`batch_size` inputs at a time, so memory stays bounded whatever the number of samples or
steps. The class explained is chosen once, on the unperturbed input, so every sample
explains the same class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from inspector.core.explain.cam.methods import normalize_maps
from inspector.core.explain.cam.targets import Target, class_scores, logits_of
from inspector.core.explain.catalog import (
    ATTRIBUTION_METHODS,
    AttributionOptions,
    attribution_method,
)
from inspector.core.explain.occlusion import occlusion_sensitivity
from inspector.core.hookset import ModelState

Progress = Callable[[int, int], None]


@dataclass
class Attribution:
    method: str
    attributions: torch.Tensor  # (B, C, H, W) like the input, on the CPU
    targets: list[int] | None  # the class explained per image; None for a score function
    scores: torch.Tensor  # (B,) the explained score at the input
    delta: torch.Tensor | None = None  # Integrated Gradients: sum(attr) - (f(x) - f(baseline))


def attribution_map(attributions: torch.Tensor, reduce: str = "abs_max") -> np.ndarray:
    """Collapse the channels of (B, C, H, W) attributions and scale each image to [0, 1].

    abs_max: the largest |value| over channels (what Simonyan et al. show); abs_sum: sum of
    |values|; sum: the signed sum, clipped at 0 (positive evidence only).
    """
    a = attributions.detach().float()
    if reduce == "abs_max":
        m = a.abs().amax(dim=1)
    elif reduce == "abs_sum":
        m = a.abs().sum(dim=1)
    elif reduce == "sum":
        m = a.sum(dim=1).clamp_min(0)
    else:
        raise ValueError(f"unknown reduction '{reduce}': abs_max, abs_sum or sum")
    return normalize_maps(m, tuple(m.shape[-2:])).cpu().numpy()


def display_map(method: str, attributions: torch.Tensor) -> np.ndarray:
    """The [0, 1] map of `method`'s (B, C, H, W) attributions the views and PNGs show: the
    reduction its entry in core.explain.catalog names (gradients: largest |value|; occlusion: the
    positive part, where covering the pixel lowers the score)."""
    return attribution_map(attributions, ATTRIBUTION_METHODS[attribution_method(method)].display)


@contextmanager
def _eval(model: nn.Module) -> Iterator[None]:
    with ModelState(model, training=False), torch.enable_grad():
        yield


def _fixed_target(model: nn.Module, x: torch.Tensor, target: Target):
    """(scores at x, targets as indices or the score function) chosen once on x."""
    with torch.no_grad():
        scores, idx = class_scores(logits_of(model(x)), target)
    return scores.detach(), (target if idx is None else idx)


def _input_grad(model: nn.Module, x: torch.Tensor, target):
    """(d score / d x, scores, class indices or None) for a batch."""
    xin = x.detach().requires_grad_(True)
    scores, idx = class_scores(logits_of(model(xin)), target)
    (grad,) = torch.autograd.grad(scores.sum(), xin)
    return grad, scores.detach(), idx


def _rows(fixed, i: int, n: int):
    """The target for n rows that all belong to image i."""
    return fixed if callable(fixed) else [fixed[i]] * n


def saliency(model: nn.Module, x: torch.Tensor, target: Target = None) -> Attribution:
    """|d score / d x| per input value: how much the score moves when that value does,
    whichever way (Captum's `Saliency`, abs=True)."""
    with _eval(model):
        grad, scores, idx = _input_grad(model, x, target)
    return Attribution("saliency", grad.abs().cpu(), idx, scores.cpu())


def gradient_x_input(model: nn.Module, x: torch.Tensor, target: Target = None) -> Attribution:
    """Gradient times input: for a linear model without bias it sums to the score."""
    with _eval(model):
        grad, scores, idx = _input_grad(model, x, target)
    return Attribution("gradient_x_input", (grad * x.detach()).cpu(), idx, scores.cpu())


def smoothgrad(
    model: nn.Module,
    x: torch.Tensor,
    target: Target = None,
    samples: int = 25,
    sigma: float = 0.15,
    batch_size: int = 16,
    seed: int = 0,
    squared: bool = False,
    progress: Progress | None = None,
) -> Attribution:
    """The gradient averaged over `samples` noisy copies of the input.

    sigma is the noise's standard deviation as a fraction of each image's value range
    (Smilkov et al. found 10-20% works best). squared averages squared gradients
    (SmoothGrad-Squared). Noise comes from a generator seeded with `seed`: reproducible.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with _eval(model):
        scores, fixed = _fixed_target(model, x, target)
        total = torch.zeros_like(x, dtype=torch.float32)
        span = (x.amax(dim=(1, 2, 3)) - x.amin(dim=(1, 2, 3))).float()
        for i in range(x.shape[0]):
            for start in range(0, samples, batch_size):
                n = min(batch_size, samples - start)
                noise = torch.randn((n, *x.shape[1:]), generator=gen).to(x.device, x.dtype)
                noisy = x[i : i + 1] + noise * (sigma * span[i]).to(x.dtype)
                grad, _, _ = _input_grad(model, noisy, _rows(fixed, i, n))
                grad = grad.float()
                total[i] += (grad * grad if squared else grad).sum(dim=0)
                if progress is not None:
                    progress(i * samples + start + n, x.shape[0] * samples)
    return Attribution("smoothgrad", (total / samples).cpu(), _indices(fixed), scores.cpu())


def integrated_gradients(
    model: nn.Module,
    x: torch.Tensor,
    target: Target = None,
    steps: int = 50,
    baseline: torch.Tensor | float | None = None,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> Attribution:
    """(x - baseline) times the gradient averaged along the straight path from the baseline
    to x (trapezoid rule over steps + 1 points). Completeness: the attributions of an image
    sum to score(x) - score(baseline), up to the discretisation error returned as `delta`.

    baseline: None or a number (a constant input, 0 = the dataset mean for a normalised
    input) or a tensor broadcastable to x.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    base = torch.zeros_like(x) if baseline is None else torch.as_tensor(baseline, dtype=x.dtype)
    base = base.to(x.device).expand_as(x)
    alphas = torch.linspace(0.0, 1.0, steps + 1, device=x.device, dtype=torch.float64)
    weights = torch.full((steps + 1,), 1.0 / steps, device=x.device, dtype=torch.float64)
    weights[0] = weights[-1] = 0.5 / steps
    with _eval(model):
        scores, fixed = _fixed_target(model, x, target)
        with torch.no_grad():
            base_scores, _ = class_scores(logits_of(model(base)), fixed)
        attr = torch.zeros_like(x, dtype=torch.float32)
        for i in range(x.shape[0]):
            diff = (x[i] - base[i]).float()
            avg = torch.zeros_like(diff)
            for start in range(0, steps + 1, batch_size):
                a = alphas[start : start + batch_size].to(torch.float32)
                path = base[i : i + 1] + a[:, None, None, None].to(x.dtype) * (x[i] - base[i])
                grad, _, _ = _input_grad(model, path, _rows(fixed, i, len(a)))
                w = weights[start : start + len(a)].to(torch.float32)
                avg += (grad.float() * w[:, None, None, None]).sum(dim=0)
                if progress is not None:
                    progress(i * (steps + 1) + start + len(a), x.shape[0] * (steps + 1))
            attr[i] = avg * diff
    delta = attr.sum(dim=(1, 2, 3)) - (scores.float() - base_scores.float())
    return Attribution(
        "integrated_gradients", attr.cpu(), _indices(fixed), scores.cpu(), delta.detach().cpu()
    )


def occlusion(
    model: nn.Module,
    x: torch.Tensor,
    target: Target = None,
    patch: int = 32,
    stride: int = 16,
    fill: float = 0.0,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> Attribution:
    """The fall of the class logit when a patch of `fill` (0: the data set's mean colour)
    covers each pixel, averaged over the patches covering it: see core.explain.occlusion. Forwards
    only, under torch.no_grad."""
    attr, scores, idx = occlusion_sensitivity(model, x, target, patch=patch, stride=stride,
                                              fill=fill, batch_size=batch_size,
                                              progress=progress)
    return Attribution("occlusion", attr, idx, scores)


def _indices(fixed) -> list[int] | None:
    if fixed is None or callable(fixed):
        return None
    if isinstance(fixed, int):
        return [fixed]
    return [int(i) for i in fixed]


METHODS: dict[str, Callable[..., Attribution]] = {
    "saliency": saliency,
    "gxi": gradient_x_input,
    "smoothgrad": smoothgrad,
    "ig": integrated_gradients,
    "occlusion": occlusion,
}


def attribute(
    model: nn.Module,
    x: torch.Tensor,
    target: Target,
    method: str,
    options: AttributionOptions | None = None,
    progress: Progress | None = None,
) -> np.ndarray:
    """The `method` attribution of x for `target`, float32 like x: (C, H, W) for one image
    (C, H, W), (B, C, H, W) for a batch. Signed (saliency: absolute), at the model input's
    resolution, before any scaling for display (see display_map).

    method: a name in core.explain.catalog.ATTRIBUTION_METHODS (saliency, gxi, smoothgrad, ig,
    occlusion); options: IG's steps, SmoothGrad's samples, noise and seed, occlusion's patch
    and stride, the batch size of the many-forward methods. IG's baseline and occlusion's
    patch are all zeros (the data set's mean colour of a normalised input).
    Raises ValueError for an unknown method or bad options.
    """
    name = attribution_method(method)
    opts = options if options is not None else AttributionOptions()
    one = x.ndim == 3
    batch = x[None] if one else x
    if name == "smoothgrad":
        result = smoothgrad(model, batch, target, samples=opts.smoothgrad_samples,
                            sigma=opts.smoothgrad_sigma, batch_size=opts.batch_size,
                            seed=opts.seed, progress=progress)
    elif name == "ig":
        result = integrated_gradients(model, batch, target, steps=opts.ig_steps,
                                      batch_size=opts.batch_size, progress=progress)
    elif name == "occlusion":
        result = occlusion(model, batch, target, patch=opts.occlusion_patch,
                           stride=opts.occlusion_stride, batch_size=opts.batch_size,
                           progress=progress)
    else:
        result = METHODS[name](model, batch, target)
    out = result.attributions.detach().float().numpy()
    return out[0] if one else out
