"""A small model for the Dataset dock's tests, loaded through the app's "Python file" route
(`atlas_models.py:build_model`) by the window and by `network-inspector atlas` alike. Two
channels of its second convolution can never fire (a bias far below anything the weights
can reach), so an atlas of it has known dead channels."""

import torch
from torch import nn

DEAD = (2, 5)  # the dead channels of features.3 (its ReLU output)


class DeadChannels(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(6, 8, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def build_model() -> nn.Module:
    torch.manual_seed(0)
    model = DeadChannels().eval()
    with torch.no_grad():
        model.features[2].bias[list(DEAD)] = -1e4
    return model
