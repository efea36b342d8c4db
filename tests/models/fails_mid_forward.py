"""A model whose forward fails inside an ATen op on a real image, for the tests and the
frozen app's smoke test (packaging/build.sh): `path/to/fails_mid_forward.py:build`."""

import torch
from torch import nn


class Mixer(nn.Module):
    """Passes the all-zero probe through (a constant map per channel after the conv); on a
    real image its mm gets mismatched shapes and ATen raises mid-forward."""

    def forward(self, h):
        if h[:, 0].amax() > h[:, 0].amin():
            return torch.mm(h.flatten(1), torch.ones(3, 3))
        return h


class FailsOnRealInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.mixer = Mixer()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.mixer(self.conv(x)).mean((2, 3)))


def build():
    return FailsOnRealInput()
