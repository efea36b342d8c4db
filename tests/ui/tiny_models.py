"""Small models for the window tests, loaded through the app's "Python file" route
(`tiny_models.py:build_model`): fast to build and to run on a loaded 2-core machine."""

import threading

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


class ChannelPick(nn.Module):
    """Keeps its input's channels through torch.index_select, an ATen op. On a white image
    the index is shifted by one, past the last channel: the op itself raises (RuntimeError
    from C++, not a Python raise), midway through the forward."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("index", torch.arange(channels))

    def forward(self, x, bright):
        return torch.index_select(x, 1, self.index + bright.long())


class PickyTiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.pick = ChannelPick(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, len(CLASSES))

    def forward(self, x):
        bright = x[:, :, :1, :1].detach().amax() > 2.0  # a tensor: no Python branch
        x = self.pick(self.features(x), bright)
        return self.head(torch.flatten(self.pool(x), 1))


def build_picky_model() -> nn.Module:
    torch.manual_seed(0)
    return PickyTiny().eval()


class Gate(nn.Module):
    """Passes its input on. After `close(after=n)`, the (n+1)-th batched forward waits until
    `open()`: Score-CAM sends its masked inputs in batches (the image itself is a batch of
    one), so a test can look at the window while a run is inside its Score-CAM step."""

    def __init__(self) -> None:
        super().__init__()
        self.held = threading.Event()  # a forward is waiting
        self._opened = threading.Event()
        self._opened.set()
        self._pass = 0

    def close(self, after: int) -> None:
        self._pass = after
        self.held.clear()
        self._opened.clear()

    def open(self) -> None:
        self._opened.set()

    def forward(self, x):
        if x.shape[0] > 1 and not self._opened.is_set():
            if self._pass > 0:
                self._pass -= 1
            else:
                self.held.set()
                self._opened.wait(60)
        return x


class GatedTiny(nn.Module):
    """48 channels at the CAM layer: Score-CAM runs them in two batches (32 and 16)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 48, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(48, len(CLASSES))

    def forward(self, x):
        x = self.features(self.gate(x))
        return self.head(torch.flatten(self.pool(x), 1))


def build_gated_model() -> nn.Module:
    torch.manual_seed(0)
    return GatedTiny().eval()
