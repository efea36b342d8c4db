"""Small models for the window tests, loaded through the app's "Python file" route
(`tiny_models.py:build_model`): fast to build and to run on a loaded 2-core machine."""

import torch
from torch import nn

CLASSES = ["circle", "square", "triangle", "star"]
PREPROCESS = {
    "crop_size": (64, 64),
    "resize_size": 72,
    "mean": (0.485, 0.456, 0.406),
    "std": (0.229, 0.224, 0.225),
}


class Boom(nn.Module):
    """Raises when the image's top-left pixel is white: lets a test make a run fail inside
    a named module, and the next (dark) image succeed."""

    def forward(self, x):
        if float(x[0, 0, 0, 0].detach()) > 2.0:
            raise RuntimeError("boom: this module refuses white pixels")
        return x


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.boom = Boom()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, len(CLASSES))

    def forward(self, x):
        x = self.boom(x)
        x = self.features(x)
        return self.head(torch.flatten(self.pool(x), 1))


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return Tiny().eval()
