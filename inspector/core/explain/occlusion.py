"""Occlusion sensitivity (Zeiler & Fergus 2014): how much the class score falls when a
square patch of the input is covered.

The patch is filled with `fill`, 0 by default: 0 in the normalised model input is the
data set's mean colour (the preprocessing subtracts the mean and divides by the standard
deviation), the usual "nothing here" of a normalised input, and the baseline Integrated
Gradients starts from too. It covers every input channel at once.

The score is the target's logit, the same score the CAMs and the gradient attributions
explain, not its softmax probability: the probability also moves when other classes'
logits move, and saturates near 1 where a confident model's logit still falls.

Each pixel's value is the mean, over the patch positions that cover it, of
score(input) - score(input with that patch covered): positive where covering the pixel
lowers the score (evidence for the class), negative where it raises it. Every input
channel gets the same value, as with Captum's `Occlusion` and a (C, patch, patch) window.
Patches start at 0, stride, 2 * stride, ... along each axis, and a last one lies flush with
the far edge, so that every pixel is covered at least once (that last step may be shorter
than the stride).

Everything runs under `torch.no_grad` with the model in eval mode (its flags restored
afterwards): no backward pass, so a model whose backward fails still gets a map. Occluded
copies go through the model at most `batch_size` at a time and at most MAX_BATCH_BYTES of
them per forward, so memory is that of one no-grad forward of such a batch whatever the
number of patches. `progress(done, total)`, in patches over all images, is called after
each batch; it may raise (the Session's raises RunCancelled on cancel) to stop between two
batches. No hooks are installed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from inspector.core.explain.cam.targets import Target, class_scores, logits_of
from inspector.core.hookset import ModelState

Progress = Callable[[int, int], None]

# The occluded inputs of one forward take at most this many bytes (at least one input):
# 64 MiB is 100 copies of a 224 x 224 float32 image, so only very large inputs lower the
# batch below its usual 16.
MAX_BATCH_BYTES = 64 << 20


def patch_starts(size: int, patch: int, stride: int) -> list[int]:
    """Where the patches start along an axis of `size` pixels: every `stride` pixels, and a
    last patch flush with the far edge. `patch` is at most `size`."""
    starts = list(range(0, size - patch + 1, stride))
    if starts[-1] != size - patch:
        starts.append(size - patch)
    return starts


def patch_boxes(height: int, width: int, patch: int, stride: int) -> list[tuple[int, int, int, int]]:
    """(top, left, bottom, right) of every patch position, row by row. The patch is clipped
    to the input's size."""
    if patch < 1 or stride < 1:
        raise ValueError(f"occlusion patch and stride must be at least 1, got {patch} and {stride}")
    ph, pw = min(patch, height), min(patch, width)
    return [
        (y, x, y + ph, x + pw)
        for y in patch_starts(height, ph, stride)
        for x in patch_starts(width, pw, stride)
    ]


def occlusion_sensitivity(
    model: nn.Module,
    x: torch.Tensor,
    target: Target = None,
    patch: int = 32,
    stride: int = 16,
    fill: float = 0.0,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> tuple[torch.Tensor, torch.Tensor, list[int] | None]:
    """(attributions (B, C, H, W) float32 on the CPU, scores at x (B,), the class explained
    per image or None for a score function) for a batch x of (B, C, H, W).

    The class is chosen once, on the unoccluded input (target None: its top class), so that
    every occluded copy is scored for the same class.
    """
    if x.ndim != 4:
        raise ValueError(f"occlusion needs a (B, C, H, W) input, got {tuple(x.shape)}")
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    b, _, h, w = x.shape
    boxes = patch_boxes(h, w, patch, stride)
    image_bytes = x[0].numel() * x.element_size()
    per_batch = max(1, min(batch_size, MAX_BATCH_BYTES // max(1, image_bytes)))
    # How many patches cover each pixel: the same for every image.
    covers = torch.zeros((h, w), dtype=torch.float32)
    for top, left, bottom, right in boxes:
        covers[top:bottom, left:right] += 1
    total = torch.zeros((b, h, w), dtype=torch.float32)
    with ModelState(model, training=False), torch.no_grad():
        scores, idx = class_scores(logits_of(model(x)), target)
        fixed = target if idx is None else idx
        for i in range(b):
            for start in range(0, len(boxes), per_batch):
                chunk = boxes[start : start + per_batch]
                copies = x[i : i + 1].repeat(len(chunk), 1, 1, 1)
                for k, (top, left, bottom, right) in enumerate(chunk):
                    copies[k, :, top:bottom, left:right] = fill
                rows = fixed if callable(fixed) else [fixed[i]] * len(chunk)
                occluded, _ = class_scores(logits_of(model(copies)), rows)
                drops = (scores[i] - occluded).float().cpu().tolist()
                for drop, (top, left, bottom, right) in zip(drops, chunk, strict=True):
                    total[i, top:bottom, left:right] += drop
                if progress is not None:
                    progress(i * len(boxes) + start + len(chunk), b * len(boxes))
    attributions = (total / covers)[:, None].expand(b, x.shape[1], h, w).contiguous()
    return attributions, scores.detach().float().cpu(), idx
