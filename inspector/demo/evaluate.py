"""The demo model's inputs and score: its normalisation, and its accuracy on drawn images
(the trainer's validation; tests/core/test_demo.py also plays the Grad-CAM pointing game)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from inspector.core.hookset import ModelState

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def normalize(images_uint8: Tensor, mean=MEAN, std=STD) -> Tensor:
    """(B, 3, H, W) uint8 -> float, normalised as the shipped preprocessing does."""
    m = torch.tensor(mean, device=images_uint8.device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=images_uint8.device).view(1, 3, 1, 1)
    return (images_uint8.float() / 255 - m) / s


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
