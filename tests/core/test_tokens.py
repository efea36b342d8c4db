"""Token and channels-last outputs read as spatial grids, and the default CAM layer."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from inspector.core.explain.cam.layer import cam_layers, default_target_layer
from inspector.core.models.tree import build_tree
from inspector.core.tokens import (
    NCHW,
    NHWC,
    TOKENS,
    detect_layout,
    spatialize,
    to_spatial,
    token_grid,
)


@pytest.mark.parametrize(
    ("shape", "input_hw", "kind", "grid", "extra"),
    [
        ((2, 197, 768), (224, 224), TOKENS, (14, 14), 1),  # ViT-B/16: class token + 14 x 14
        ((1, 50, 768), (224, 224), TOKENS, (7, 7), 1),  # ViT-B/32
        ((1, 261, 384), (224, 224), TOKENS, (16, 16), 5),  # DINOv2-style: class + 4 registers
        ((1, 196, 768), (224, 224), TOKENS, (14, 14), 0),  # no class token (pooled models)
        ((1, 281, 768), (224, 320), TOKENS, (14, 20), 1),  # a non-square input
        ((1, 7, 7, 768), (224, 224), NHWC, (7, 7), 0),  # Swin's last stage
        ((1, 56, 56, 96), (224, 224), NHWC, (56, 56), 0),  # Swin's first stage
        ((1, 28, 28, 24), (224, 224), NHWC, (28, 28), 0),  # channels < grid would fit both ways
        ((1, 64, 56, 56), (224, 224), NCHW, (56, 56), 0),  # resnet
        ((1, 512, 7, 10), (224, 320), NCHW, (7, 10), 0),
        ((1, 7, 7, 7), (224, 224), NCHW, (7, 7), 0),  # a tie stays PyTorch's convention
        # A non-square input: 96 channels at stride 4 (whole strides), though 96 x 128 at
        # strides 5.33 x 5.34 would agree a little better; and its channels-last twin.
        ((1, 96, 128, 170), (512, 683), NCHW, (128, 170), 0),
        ((1, 128, 170, 96), (512, 683), NHWC, (128, 170), 0),
        ((1, 64, 60, 80), (480, 640), NCHW, (60, 80), 0),
    ],
)
def test_layouts_from_shape(shape, input_hw, kind, grid, extra):
    layout = detect_layout(shape, input_hw, batch_size=shape[0])
    assert layout is not None
    assert (layout.kind, layout.grid, layout.extra) == (kind, grid, extra)


@pytest.mark.parametrize("shape", [(1, 1000), (1, 197), (1, 77, 512), (1, 3, 768), (2, 3, 4, 5, 6)])
def test_non_spatial_shapes_are_refused(shape):
    assert detect_layout(shape, (224, 224), batch_size=shape[0]) is None
    with pytest.raises(ValueError, match="not a spatial map"):
        spatialize(torch.zeros(shape), (224, 224), "head")


def test_one_cell_grids_are_not_cam_layers():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=4), nn.Conv2d(8, 8, 3, stride=4),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2)).eval()
    tree = build_tree(model, torch.zeros(1, 3, 48, 48))
    assert [tree[n].output_shape for n in ("1", "2")] == [(1, 8, 3, 3), (1, 8, 1, 1)]
    assert cam_layers(tree) == ["0", "1"]  # not the 1 x 1 pool, nor the flat outputs


def test_sequence_first_tokens():
    t = torch.randn(197, 2, 768)  # (N, B, D), as nn.MultiheadAttention without batch_first
    layout = detect_layout(tuple(t.shape), (224, 224), batch_size=2)
    assert layout.kind == TOKENS and layout.seq_first and layout.grid == (14, 14)
    grid = to_spatial(t, layout)
    assert grid.shape == (2, 768, 14, 14)
    torch.testing.assert_close(grid[1, :, 3, 5], t[1 + 3 * 14 + 5, 1])


def test_token_grid_prefers_fewest_extra_tokens():
    assert token_grid(197, (224, 224)) == (1, (14, 14))
    assert token_grid(196, (224, 224)) == (0, (14, 14))
    assert token_grid(1, (224, 224)) is None
    assert token_grid(77, (224, 224)) is None  # a text sequence: 8 x 9 + 5 has unequal strides


def _output_of(model, name, x):
    out = {}
    handle = dict(model.named_modules())[name].register_forward_hook(
        lambda m, a, o: out.setdefault("t", o.detach().clone())
    )
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    return out["t"]


@pytest.mark.slow
def test_vit_b_16_grid_and_default_layer():
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16().eval()
    x = torch.randn(1, 3, 224, 224)
    tree = build_tree(model, x)
    layer = default_target_layer(model, tree)
    assert layer == "encoder.layers.encoder_layer_11.ln_1"
    tokens = _output_of(model, layer, x)
    assert tokens.shape == (1, 197, 768)
    grid, layout = spatialize(tokens, (224, 224), layer, batch_size=1)
    assert (layout.kind, layout.grid, layout.extra) == (TOKENS, (14, 14), 1)
    # Patch token p sits at row p // 14, column p % 14 (conv_proj's flatten order).
    expected = tokens[:, 1:].reshape(1, 14, 14, 768).permute(0, 3, 1, 2)
    torch.testing.assert_close(grid, expected, rtol=0, atol=0)


@pytest.mark.slow
def test_swin_t_grid_and_default_layer():
    torch.manual_seed(0)
    model = torchvision.models.swin_t().eval()
    x = torch.randn(1, 3, 224, 224)
    tree = build_tree(model, x)
    layer = default_target_layer(model, tree)
    assert layer == "features.7.1.norm1"
    out = _output_of(model, layer, x)
    assert out.shape == (1, 7, 7, 768)  # channels last
    grid, layout = spatialize(out, (224, 224), layer, batch_size=1)
    assert (layout.kind, layout.grid) == (NHWC, (7, 7))
    torch.testing.assert_close(grid, out.permute(0, 3, 1, 2), rtol=0, atol=0)
    # Every stage of Swin is channels last; the permuted output before pooling is not.
    for name, expected in (("features.1", NHWC), ("features.5", NHWC), ("permute", NCHW)):
        shape = tree.modules[name].output_shape
        assert detect_layout(shape, (224, 224), 1).kind == expected, name


def test_resnet18_default_layer_is_layer4():
    model = torchvision.models.resnet18().eval()
    tree = build_tree(model, torch.zeros(1, 3, 64, 64))
    assert default_target_layer(model, tree) == "layer4"  # not the 1 x 1 avgpool after it
