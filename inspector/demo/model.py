"""The demo CNN: small enough to train on a laptop CPU, plain enough to read in the inspector.

Layout, for a 128 x 128 input::

    stem    conv 4x4 /2, BN, ReLU              16 x 64 x 64
    stage1  conv 4x4 /2, conv 3x3 (+BN, ReLU)   32 x 32 x 32
    stage2  conv 4x4 /2, conv 3x3 (+BN, ReLU)   64 x 16 x 16
    stage3  2 x (conv 3x3, BN, ReLU)            96 x 16 x 16   <- Grad-CAM layer
    pool    global average pooling              96
    head    linear                              n_classes

stage3 keeps the 16 x 16 grid (8 input pixels a cell) so that class activation maps can
tell a small shape from its neighbour (receptive field 78 pixels). Its second conv was
dilated once, to see more context; that spread the main shape's evidence against other
classes over the smaller shape beside it and pushed the smaller shape's Grad-CAM peak off
it: the distractor pointing game went from 62% to 95.5% just by removing the dilation from
the trained weights.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

ARCH = "shapes_cnn_v1"
CAM_LAYER = "stage3"  # the last conv stage: the layer Grad-CAM should read


class ConvBNReLU(nn.Sequential):
    """conv -> batch norm -> ReLU, with readable child names (conv, bn, relu).

    Downsampling convs are 4x4 with stride 2 (padding 1): their output cell j is centred
    on input cells 2j and 2j+1, where bilinear upsampling of a CAM puts it. A 3x3 stride-2
    conv is centred on cell 2j instead; three of them shifted every Grad-CAM map by 3.5
    input pixels up and left, enough to miss a small shape's box.
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"ConvBNReLU: stride must be 1 or 2, got {stride}")
        kernel = 4 if stride == 2 else 3
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        # In-place like most real CNNs, so the inspector's in-place handling is exercised.
        self.relu = nn.ReLU(inplace=True)


class ShapesCNN(nn.Module):
    def __init__(self, num_classes: int, widths: tuple[int, int, int, int] = (16, 32, 64, 96)):
        super().__init__()
        w0, w1, w2, w3 = widths
        self.stem = ConvBNReLU(3, w0, stride=2)
        self.stage1 = nn.Sequential(ConvBNReLU(w0, w1, stride=2), ConvBNReLU(w1, w1))
        self.stage2 = nn.Sequential(ConvBNReLU(w1, w2, stride=2), ConvBNReLU(w2, w2))
        self.stage3 = nn.Sequential(ConvBNReLU(w2, w3), ConvBNReLU(w3, w3))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(w3, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Start the stem as edge detectors: zero-mean kernels give no response to a flat
        # background, whatever its colour. With random kernels, the background colour
        # dominated the pooled features and training sat at chance for hundreds of steps.
        with torch.no_grad():
            w = self.stem.conv.weight
            w -= w.mean(dim=(2, 3), keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        x = self.stage1(x)
        x = self.stage2(x)
        x = self.stage3(x)
        return self.head(self.flatten(self.pool(x)))


def build_model(num_classes: int, widths=(16, 32, 64, 96)) -> ShapesCNN:
    return ShapesCNN(num_classes, tuple(widths))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
