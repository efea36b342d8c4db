"""A small model whose middle modules output channels-last (B, H, W, C) maps, as the blocks of
ConvNeXt and Swin do, for the tests of previews, mosaics and edits of such outputs.

Channel k of `to_last` is about 10 * (k + 1) plus a faint picture of the input, so each
channel's map is told apart from the others by its level, and a tile cut along the wrong
axis (a row of the map, with a value per channel) would mix levels. Loaded by the window
through the "Python file" route (`channels_last_model.py:build_model`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

CHANNELS = 5
STRIDE = 8
CLASSES = ["a", "b", "c", "d"]
PREPROCESS = {
    "crop_size": (64, 64),
    "resize_size": None,
    "mean": (0.5, 0.5, 0.5),
    "std": (0.25, 0.25, 0.25),
}
FACTORY = f"{Path(__file__).resolve()}:build_model"
LAST = ("to_last", "mix")  # the modules whose outputs are (B, H, W, C)


class ToLast(nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 3, 1)


class ToFirst(nn.Module):
    def forward(self, x):
        return x.permute(0, 3, 1, 2)


class ChannelsLastNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, CHANNELS, STRIDE, stride=STRIDE)
        self.to_last = ToLast()
        self.mix = nn.Linear(CHANNELS, CHANNELS)  # per position, over channels (last dim)
        self.to_first = ToFirst()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(CHANNELS, len(CLASSES))
        with torch.no_grad():
            self.stem.weight.normal_(std=0.02)
            self.stem.bias.copy_(10.0 * torch.arange(1, CHANNELS + 1))
            self.mix.weight.copy_(torch.eye(CHANNELS) + 0.01)
            self.mix.bias.zero_()

    def forward(self, x):
        x = self.to_first(self.mix(self.to_last(self.stem(x))))
        return self.head(torch.flatten(self.pool(x), 1))


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return ChannelsLastNet().eval()
