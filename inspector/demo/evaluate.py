"""Scores for the demo model: accuracy on fresh images and the Grad-CAM pointing game.

The pointing game (Zhang et al., "Top-down neural attention by excitation backprop") asks
whether the maximum of a class activation map falls inside the box of the object of that
class. Here it is asked twice per image: for the main shape's class (must point at the
main shape) and for the distractor's class (must point at the smaller shape).

``cam_fn(model, x, targets) -> (B, H, W)`` is any CAM method; ``grad_cam`` below is a plain
Grad-CAM used when ``inspector.core.explain.cam`` is not at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader

from inspector.core.hookset import HookSet, ModelState
from inspector.demo.shapes import ShapesDataset

CamFn = Callable[[nn.Module, Tensor, Tensor], Tensor]
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def normalize(images_uint8: Tensor, mean=MEAN, std=STD) -> Tensor:
    """(B, 3, H, W) uint8 -> float, normalised as the shipped preprocessing does."""
    m = torch.tensor(mean, device=images_uint8.device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=images_uint8.device).view(1, 3, 1, 1)
    return (images_uint8.float() / 255 - m) / s


def grad_cam(model: nn.Module, x: Tensor, targets: Tensor, layer: str = "stage3") -> Tensor:
    """Plain Grad-CAM at ``layer``, upsampled to the input size: (B, H, W), not normalised.

    weights = mean gradient of the target logit over the layer's H x W; map = ReLU of the
    weighted sum of the layer's channels. The hook is removed and the model's flags are
    restored whatever happens.
    """
    module = dict(model.named_modules())[layer]
    store: dict[str, Tensor] = {}

    def hook(_m, _inp, out):
        store["a"] = out

    with ModelState(model), HookSet() as hooks, torch.enable_grad():
        hooks.forward(module, hook)
        logits = model(x)
        act = store.pop("a")
        score = logits.gather(1, targets.view(-1, 1).to(logits.device)).sum()
        (grads,) = torch.autograd.grad(score, act)
    weights = grads.mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * act.detach()).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)
    return cam[:, 0]


def _inside(cams: Tensor, boxes: Tensor) -> Tensor:
    """Whether each map's arg-max (first one on ties) is inside its (x0, y0, x1, y1) box."""
    b, h, w = cams.shape
    idx = cams.reshape(b, -1).argmax(1)
    ys, xs = idx // w, idx % w
    boxes = boxes.to(cams.device)
    return (xs >= boxes[:, 0]) & (xs < boxes[:, 2]) & (ys >= boxes[:, 1]) & (ys < boxes[:, 3])


@dataclass(frozen=True)
class PointingResult:
    images: int
    target_hits: int
    distractor_hits: int

    @property
    def target_rate(self) -> float:
        return self.target_hits / max(self.images, 1)

    @property
    def distractor_rate(self) -> float:
        return self.distractor_hits / max(self.images, 1)


def _batches(dataset, batch_size: int) -> Iterable[dict[str, Tensor]]:
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0)


def accuracy(model: nn.Module, dataset, batch_size: int = 100, device="cpu",
             mean=MEAN, std=STD) -> float:  # fmt: skip
    """Fraction of ``dataset`` whose arg-max logit is the main shape's class."""
    correct = total = 0
    with ModelState(model, training=False), torch.no_grad():
        for batch in _batches(dataset, batch_size):
            x = normalize(batch["image"].to(device), mean, std)
            pred = model(x).argmax(1).cpu()
            correct += int((pred == batch["label"]).sum())
            total += len(pred)
    return correct / max(total, 1)


def pointing_game(model: nn.Module, images: int = 200, seed: int = 7, cam_fn: CamFn = grad_cam,
                  batch_size: int = 50, device="cpu", mean=MEAN, std=STD) -> PointingResult:  # fmt: skip
    """Pointing game on ``images`` drawn images that all hold a distractor."""
    # Forced-distractor images can, rarely, find no room for the distractor: draw a few more
    # and keep the first ``images`` that have one.
    dataset = ShapesDataset(int(images * 1.1) + 10, seed, distractor=True)
    seen = t_hits = d_hits = 0
    with ModelState(model, training=False):
        for batch in _batches(dataset, batch_size):
            keep = batch["distractor"] >= 0
            keep &= torch.cumsum(keep.long(), 0) + seen <= images
            if not keep.any():
                break
            x = normalize(batch["image"][keep].to(device), mean, std)
            cams = cam_fn(model, x, batch["label"][keep].to(device))
            t_hits += int(_inside(cams.detach(), batch["box"][keep]).sum())
            cams = cam_fn(model, x, batch["distractor"][keep].to(device))
            d_hits += int(_inside(cams.detach(), batch["distractor_box"][keep]).sum())
            seen += int(keep.sum())
    if seen < images:
        raise RuntimeError(f"pointing_game: only {seen} of {images} images had a distractor")
    return PointingResult(seen, t_hits, d_hits)
