"""Where in an image one activation looks: the box of input pixels that reach it.

The box is measured on the model, not derived from kernel sizes and strides: the image goes
forward with autograd up to the layer (the forward stops there), and the gradient of that
one activation (channel, position) with respect to the model input is taken. The pixels
where it is non-zero are the ones the activation depends on; their bounding box, in model
input pixels, is mapped back through the preprocessing's resize and crop onto the original
image. Dilations, strides, padding, attention and pooling are all accounted for as the model
computes them. Where the gradient is zero everywhere (a ReLU output of exactly 0 passes no
gradient) the box is the whole part of the image the model saw.

Several (image, channel, position) entries go through one forward and one backward: the
images are stacked as a batch and the selected activations summed; in eval mode each image's
gradient then comes from its own activation only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from inspector.core.hooks import tensor_leaves
from inspector.core.preprocess import Preprocess

from .inputs import ImageFiles, make_loader
from .probe import LayerPlan

Box = tuple[int, int, int, int]  # x0, y0, x1, y1: pixel edges, x1 and y1 exclusive (PIL's crop)


class _ReachedLayer(Exception):
    """Raised by the hook to stop the forward at the layer: nothing above it is needed."""


def input_boxes(model: nn.Module, plan: LayerPlan, x: torch.Tensor, channels: torch.Tensor,
                positions: torch.Tensor) -> list[Box | None]:
    """Per row of x (n, 3, H, W): the box, in model-input pixels, of the input gradient of
    the layer's activation (channels[i], positions[i]); None where the gradient is all zero.
    `positions` are flat indices over the layer's positions, as LayerPlan.view orders them."""
    module = dict(model.named_modules())[plan.name]
    seen = {"calls": 0}

    def hook(mod, args, output):
        seen["calls"] += 1
        if seen["calls"] == plan.calls:
            seen["output"] = next(t for _, t in tensor_leaves(output))
            raise _ReachedLayer

    x = x.detach().clone().requires_grad_(True)
    flags = [(m, m.training) for m in model.modules()]
    handle = module.register_forward_hook(hook)
    try:
        model.eval()
        with torch.enable_grad():
            try:
                model(x)
            except _ReachedLayer:
                pass
            if "output" not in seen:
                raise RuntimeError(f"layer '{plan.name}' did not run in the forward")
            v = plan.view(seen["output"])
            rows = torch.arange(len(x), device=v.device)
            picked = v[rows, channels.to(v.device), positions.to(v.device)]
            if not picked.requires_grad:
                return [None] * len(x)
            (grad,) = torch.autograd.grad(picked.sum(), x, allow_unused=True)
    finally:
        handle.remove()
        for m, training in flags:
            m.training = training
    if grad is None:
        return [None] * len(x)
    support = (grad.detach() != 0).any(dim=1)  # (n, H, W)
    boxes: list[Box | None] = []
    for s in support.cpu():
        ys = s.any(dim=1).nonzero().flatten()
        xs = s.any(dim=0).nonzero().flatten()
        if len(ys) == 0:
            boxes.append(None)
        else:
            boxes.append((int(xs[0]), int(ys[0]), int(xs[-1]) + 1, int(ys[-1]) + 1))
    return boxes


def to_original(box: Box | None, pre: Preprocess, size: tuple[int, int]) -> Box:
    """A box in model-input pixels as a box in the original image's pixels, clipped to it.
    Integer arithmetic: edges map exactly, rounded outwards."""
    w, h = size
    rw, rh = pre.resized_size(size)
    left, top = pre.crop_offset(size)
    ch, cw = pre.crop_size
    x0, y0, x1, y1 = box if box is not None else (0, 0, cw, ch)
    ox0 = max(0, ((x0 + left) * w) // rw)
    oy0 = max(0, ((y0 + top) * h) // rh)
    ox1 = min(w, -((-(x1 + left) * w) // rw))
    oy1 = min(h, -((-(y1 + top) * h) // rh))
    if ox1 <= ox0 or oy1 <= oy0:  # only padding around the image reached it
        return (0, 0, w, h)
    return (int(ox0), int(oy0), int(ox1), int(oy1))


@dataclass(frozen=True)
class Entry:
    """One place in the atlas: layer, channel, rank, and the image and position it holds."""

    layer: str
    channel: int
    rank: int
    index: int
    position: int


def compute_boxes(
    model: nn.Module,
    plans: dict[str, LayerPlan],
    dataset: ImageFiles,
    entries: list[Entry],
    device: torch.device,
    batch_size: int,
    workers: int,
    on_image: Callable[[int], None] | None = None,
) -> tuple[dict[Entry, Box], dict[int, str]]:
    """Boxes in original pixels for every entry, and the images that could not be read again.

    Each image that holds an entry is decoded once (by the same Dataset as the statistics
    pass, in `workers` processes); its entries go through input_boxes `batch_size` at a time.
    """
    by_image: dict[int, list[Entry]] = defaultdict(list)
    for e in entries:
        by_image[e.index].append(e)
    images = sorted(by_image)
    chunks = [images[i : i + batch_size] for i in range(0, len(images), batch_size)]
    loader = make_loader(dataset, chunks, workers, pin_memory=device.type == "cuda")
    boxes: dict[Entry, Box] = {}
    failed: dict[int, str] = {}
    for batch in loader:
        failed.update(batch.failed)
        if batch.x is None:
            continue
        x = batch.x.to(device, non_blocking=True)
        row_of = {int(i): r for r, i in enumerate(batch.indices)}
        todo = [e for i in row_of for e in by_image[i]]
        for name, plan in plans.items():
            mine = [e for e in todo if e.layer == name]
            for start in range(0, len(mine), batch_size):
                part = mine[start : start + batch_size]
                rows = torch.tensor([row_of[e.index] for e in part], device=device)
                found = input_boxes(
                    model, plan, x[rows],
                    torch.tensor([e.channel for e in part]),
                    torch.tensor([e.position for e in part]),
                )
                for e, box in zip(part, found):
                    boxes[e] = to_original(box, dataset.preprocess, batch.sizes[row_of[e.index]])
        if on_image is not None:
            on_image(len(batch))
    return boxes, failed
