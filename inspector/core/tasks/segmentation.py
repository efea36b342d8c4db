"""Semantic segmentation models (torchvision DeepLabV3, FCN, LR-ASPP).

Their output is an OrderedDict: "out" (B, classes, H, W) at the input's size, and "aux" when
the model has an auxiliary head. The mask is the argmax over classes; the score a CAM explains
is Seg-Grad-CAM's: class c's logit summed over the pixels predicted as c.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from inspector.core.records.frames import Prediction


def is_segmentation_model(model: nn.Module) -> bool:
    from torchvision.models.segmentation.deeplabv3 import DeepLabV3
    from torchvision.models.segmentation.fcn import FCN
    from torchvision.models.segmentation.lraspp import LRASPP

    return isinstance(model, (FCN, DeepLabV3, LRASPP))


def logits(output) -> torch.Tensor:
    """The (B, classes, H, W) class scores: "out", never the auxiliary head's."""
    out = output["out"] if isinstance(output, dict) else output
    if not isinstance(out, torch.Tensor) or out.ndim != 4:
        raise ValueError("a segmentation model must return (B, classes, H, W) scores as 'out'")
    return out


def mask(out: torch.Tensor) -> torch.Tensor:
    """The first image's predicted class per pixel, (H, W) int64 at the model input's size."""
    return out[0].detach().argmax(0)


def default_class(predicted: torch.Tensor) -> int:
    """The class a run explains when none is named: the one covering the most pixels,
    background (class 0) excepted when any other class is predicted."""
    counts = torch.bincount(predicted.flatten().cpu())
    if counts.numel() > 1 and counts[1:].sum() > 0:
        return int(counts[1:].argmax()) + 1
    return int(counts.argmax())


def score(out: torch.Tensor, predicted: torch.Tensor, index: int,
          categories: Sequence[str]) -> torch.Tensor:
    """Seg-Grad-CAM's score: class `index`'s logit summed over its predicted pixels."""
    n = out.shape[1]
    if not 0 <= index < n:
        raise ValueError(f"seg:{index}: class out of range 0..{n - 1}")
    where = predicted == index
    if not bool(where.any()):
        raise ValueError(f"seg:{index}: no pixel of this image is predicted as "
                         f"'{_label(categories, index)}'")
    return (out[0, index] * where).sum()


def predictions(out: torch.Tensor, predicted: torch.Tensor, categories: Sequence[str],
                topk: int) -> tuple[Prediction, ...]:
    """The classes present, largest area first: prob is the fraction of pixels, logit the
    class's mean score over its pixels."""
    counts = torch.bincount(predicted.flatten().cpu(), minlength=out.shape[1]).float()
    total = float(counts.sum())
    rows = []
    scores = out[0].detach().float().cpu()
    flat = predicted.cpu()
    for c in torch.argsort(counts, descending=True, stable=True).tolist()[:topk]:
        if counts[c] == 0:
            break
        mean = float(scores[c][flat == c].mean())
        rows.append(Prediction(c, _label(categories, c), float(counts[c]) / total, mean))
    return tuple(rows)


def legend(predicted: torch.Tensor, categories: Sequence[str]) -> tuple[tuple[int, str], ...]:
    """(class, label) of every class predicted somewhere, by class index."""
    return tuple((c, _label(categories, c)) for c in torch.unique(predicted.cpu()).tolist())


def to_original(predicted: np.ndarray, pre, original_size: tuple[int, int]) -> np.ndarray:
    """The mask over the model input as a mask of the original (width, height) image, nearest
    neighbour (classes are not interpolated); -1 where the crop left the picture out."""
    predicted = np.asarray(predicted)
    w, h = original_size
    rw, rh = pre.resized_size(original_size)
    left, top = pre.crop_offset(original_size)
    ch, cw = pre.crop_size
    cols, inside_x = _nearest(w, rw, left, cw, predicted.shape[1])
    rows, inside_y = _nearest(h, rh, top, ch, predicted.shape[0])
    out = predicted[rows[:, None], cols[None, :]].astype(np.int16)
    out[~(inside_y[:, None] & inside_x[None, :])] = -1
    return out


def _nearest(n_out: int, n_resized: int, start: int, n_crop: int, n_map: int):
    crop_coord = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_resized / n_out) - start
    inside = (crop_coord >= 0.0) & (crop_coord < n_crop)
    idx = np.clip(np.floor(crop_coord * (n_map / n_crop)), 0, n_map - 1).astype(np.intp)
    return idx, inside


def _label(categories: Sequence[str], index: int) -> str:
    return categories[index] if 0 <= index < len(categories) else f"class {index}"
