"""Where in an image one activation looks: the box of input pixels that reach it.

The box is measured on the model, not derived from kernel sizes and strides: the image goes
forward with autograd up to the layer (the forward stops there), and the gradient of that
one activation (channel, position) with respect to the model input is taken. The pixels
where it is non-zero are the ones the activation depends on; their bounding box, in model
input pixels, is mapped back through the preprocessing's resize and crop onto the original
image. Dilations, strides, padding, attention and pooling are all accounted for as the model
computes them. Where the gradient is zero everywhere (a ReLU output of exactly 0 passes no
gradient) the box is the whole part of the image the model saw.

Several (image, channel, position) entries go through one forward and one backward:
- entries of one image: the image goes forward once, and the entries' gradients come from one
  batched backward (autograd's is_grads_batched, one one-hot output gradient per entry), about
  1.5 to 2 times faster than a forward per entry (resnet18 on the CPU);
- entries alone on their image: the images are stacked as a batch and the selected
  activations summed; in eval mode each image's gradient then comes from its own activation.
A model whose backward cannot be batched (an op without a vmap rule) takes the second way.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from inspector.batch.inputs import ImageFiles, make_loader
from inspector.batch.probe import LayerPlan
from inspector.core.hookset import tensor_leaves
from inspector.core.inputs.preprocess import Preprocess

Box = tuple[int, int, int, int]  # x0, y0, x1, y1: pixel edges, x1 and y1 exclusive (PIL's crop)


class _ReachedLayer(Exception):
    """Raised by the hook to stop the forward at the layer: nothing above it is needed."""


def input_boxes(model: nn.Module, plan: LayerPlan, x: torch.Tensor, channels: torch.Tensor,
                positions: torch.Tensor) -> list[Box | None]:
    """Per row of x (n, 3, H, W): the box, in model-input pixels, of the input gradient of
    the layer's activation (channels[i], positions[i]); None where the gradient is all zero.
    `positions` are flat indices over the layer's positions, as LayerPlan.view orders them."""

    def grads(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        rows = torch.arange(len(x), device=v.device)
        picked = v[rows, channels.to(v.device), positions.to(v.device)]
        if not picked.requires_grad:
            return None
        return torch.autograd.grad(picked.sum(), x, allow_unused=True)[0]

    grad = _through_layer(model, plan, x, grads)
    return [None] * len(x) if grad is None else _boxes_of(grad)


def image_boxes(model: nn.Module, plan: LayerPlan, x: torch.Tensor, channels: torch.Tensor,
                positions: torch.Tensor) -> list[Box | None]:
    """input_boxes for n entries of ONE image x (1, 3, H, W): one forward, and the n input
    gradients from one batched backward."""

    def grads(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        if not v.requires_grad:
            return None
        n = len(channels)
        one_hot = torch.zeros((n, *v.shape), dtype=v.dtype, device=v.device)
        one_hot[torch.arange(n), 0, channels.to(v.device), positions.to(v.device)] = 1
        (g,) = torch.autograd.grad(v, x, grad_outputs=one_hot, is_grads_batched=True,
                                   allow_unused=True)
        return None if g is None else g[:, 0]

    with warnings.catch_warnings():  # an op without a batching rule: a slower loop, same result
        warnings.filterwarnings("ignore", message="There is a performance drop")
        grad = _through_layer(model, plan, x, grads)
    return [None] * len(channels) if grad is None else _boxes_of(grad)


def _through_layer(model: nn.Module, plan: LayerPlan, x: torch.Tensor, grads):
    """Run x forward with autograd up to the layer's last call (the forward stops there, in
    eval mode, the modules' flags restored after) and return grads(view, x_leaf)."""
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
            return grads(plan.view(seen["output"]), x)
    finally:
        handle.remove()
        for m, training in flags:
            m.training = training


def _boxes_of(grad: torch.Tensor) -> list[Box | None]:
    """The bounding box of each row's non-zero input gradient; None where it is all zero."""
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
    batched_ok: dict[str, bool] = {}  # layer -> whether its backward could be batched
    for batch in loader:
        failed.update(batch.failed)
        if batch.x is None:
            continue
        x = batch.x.to(device, non_blocking=True)
        row_of = {int(i): r for r, i in enumerate(batch.indices)}
        size_of = {i: batch.sizes[r] for i, r in row_of.items()}
        for name, plan in plans.items():
            alone: list[Entry] = []  # entries alone on their image: batched across images
            for i, r in row_of.items():
                mine = [e for e in by_image[i] if e.layer == name]
                if len(mine) < 2 or not batched_ok.get(name, True):
                    alone.extend(mine)
                    continue
                for start in range(0, len(mine), batch_size):
                    part = mine[start : start + batch_size]
                    try:
                        found = image_boxes(model, plan, x[r : r + 1],
                                            torch.tensor([e.channel for e in part]),
                                            torch.tensor([e.position for e in part]))
                    except RuntimeError:  # no vmap rule for an op of this model
                        batched_ok[name] = False
                        alone.extend(mine[start:])
                        break
                    for e, box in zip(part, found):
                        boxes[e] = to_original(box, dataset.preprocess, size_of[e.index])
            for start in range(0, len(alone), batch_size):
                part = alone[start : start + batch_size]
                rows = torch.tensor([row_of[e.index] for e in part], device=device)
                found = input_boxes(
                    model, plan, x[rows],
                    torch.tensor([e.channel for e in part]),
                    torch.tensor([e.position for e in part]),
                )
                for e, box in zip(part, found):
                    boxes[e] = to_original(box, dataset.preprocess, size_of[e.index])
        if on_image is not None:
            on_image(len(batch))
    dataset.close()  # its video decoders, when it decoded here (no worker processes)
    return boxes, failed
