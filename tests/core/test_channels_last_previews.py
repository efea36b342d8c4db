"""Channels-last (B, H, W, C) outputs, as ConvNeXt's and Swin's blocks make them, are
previewed as C pictures of H x W (one mosaic tile per channel), with statistics per
channel, the same channel numbers that the edits use (core.edits.spec.check_edits), and the
same as the analyse mosaic PNG's (core.export.files.as_channels)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from channels_last_model import CHANNELS, LAST, STRIDE, build_model

from inspector.core.edits.interventions import ZeroChannels
from inspector.core.edits.spec import check_edits
from inspector.core.export.files import as_channels, mosaic
from inspector.core.models.tree import build_tree
from inspector.core.records.frames import GradientFrame
from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.tokens import image_size, is_channels_last

H, W = 48, 64  # not square: a channels-last map read the wrong way round does not fit
GRID = (H // STRIDE, W // STRIDE)


def run(model, x, names, kinds=(OUTPUT,), interventions=(), **spec):
    """Frames of one forward (and backward, for gradients) of `model`, by (module, kind)."""
    frames = {}
    capture = CaptureSpec.for_modules(names, kinds, preview=frozenset(names),
                                      full=frozenset(names), **spec)
    x = x.clone().requires_grad_(GRAD_OUTPUT in kinds)
    with Capture(model, capture, lambda f: frames.__setitem__((f.module, f.kind), f),
                 interventions=interventions):
        out = model(x)
        if GRAD_OUTPUT in kinds:
            out[0, 0].backward()
    return frames


def test_the_layout_needs_the_input_size_and_finds_it_in_the_models_arguments():
    assert is_channels_last((1, 6, 8, 5), (48, 64))
    assert not is_channels_last((1, 5, 6, 8), (48, 64))
    # (1, 32, 30, 40) of a 240 x 320 image is 32 channels of 30 x 40; without the image's
    # size it could read as a 32 x 30 grid of 40 channels: channels first then.
    assert not is_channels_last((1, 32, 30, 40), (240, 320))
    assert not is_channels_last((1, 32, 30, 40), None)
    assert not is_channels_last((1, 6, 8), (48, 64))
    batch = torch.zeros(2, 3, 48, 64)
    assert image_size(((batch,), {})) == (48, 64)
    assert image_size((([torch.zeros(3, 40, 50)],), {})) == (40, 50)  # detection's images
    assert image_size(((), {"pixel_values": batch})) == (48, 64)  # Hugging Face's keyword
    assert image_size(((torch.zeros(2, 7, dtype=torch.long),), {})) is None


def test_a_channels_last_output_is_previewed_as_one_tile_per_channel():
    model = build_model()
    frames = run(model, torch.rand(1, 3, H, W), ["stem", *LAST], (OUTPUT, GRAD_OUTPUT))
    for name in LAST:
        for kind in (OUTPUT, GRAD_OUTPUT):
            frame = frames[(name, kind)]
            whole = frame.full  # the tensor in its own layout
            assert frame.channels_last and frame.shape == (1, *GRID, CHANNELS) == whole.shape
            assert frame.item_shape == (CHANNELS, *GRID)
            assert frame.preview.shape == (CHANNELS, *GRID)
            for k in range(CHANNELS):
                np.testing.assert_allclose(frame.preview[k], whole[0, :, :, k], rtol=1e-6)
            # Statistics per channel too: what the mosaic sorts by, and the dead channels.
            np.testing.assert_allclose(frame.stats.channel_mean, whole.mean(axis=(0, 1, 2)),
                                       rtol=1e-5)
            np.testing.assert_allclose(frame.stats.channel_max, whole.max(axis=(0, 1, 2)),
                                       rtol=1e-6)
            assert frame.stats.mean == pytest.approx(float(whole.mean()), rel=1e-5)
    # Channel k of to_last is about 10 (k + 1): a tile is one channel, not a row of all.
    levels = frames[("to_last", OUTPUT)].preview.mean(axis=(1, 2))
    np.testing.assert_allclose(levels, 10.0 * np.arange(1, CHANNELS + 1), atol=0.5)
    assert isinstance(frames[("to_last", GRAD_OUTPUT)], GradientFrame)
    stem = frames[("stem", OUTPUT)]  # a convolution's (B, C, H, W): as it always was
    assert not stem.channels_last and stem.shape == (1, CHANNELS, *GRID)
    np.testing.assert_array_equal(stem.preview, stem.full[0])
    np.testing.assert_allclose(frames[("to_last", OUTPUT)].preview, stem.preview, rtol=1e-6)


def test_a_pooled_channels_last_preview_averages_each_channels_map():
    model = build_model()
    frames = run(model, torch.rand(1, 3, H, W), ["to_last"], preview_size=4)
    frame = frames[("to_last", OUTPUT)]
    maps = torch.from_numpy(frame.full).permute(0, 3, 1, 2)
    expected = F.avg_pool2d(maps, 2, ceil_mode=True, count_include_pad=False)[0].numpy()
    assert frame.preview.shape == (CHANNELS, 3, 4) and frame.preview.flags.c_contiguous
    np.testing.assert_allclose(frame.preview, expected, rtol=1e-5)


def test_a_channel_edit_checked_like_the_windows_zeroes_that_channels_tile():
    """The mosaic's channel k and the edit's channel k are the same channel: check_edits
    (what the mosaic's right-click menu goes through) puts it on the last dim."""
    model = build_model()
    x = torch.rand(1, 3, H, W)
    tree = build_tree(model, x)
    (zero,) = check_edits((ZeroChannels("to_last", (2,)),), tree, (H, W))
    assert zero.dim == -1
    plain = run(model, x, ["to_last"])[("to_last", OUTPUT)].preview
    edited = run(model, x, ["to_last"], interventions=(zero,))[("to_last", OUTPUT)].preview
    assert not edited[2].any()
    others = [k for k in range(CHANNELS) if k != 2]
    np.testing.assert_array_equal(edited[others], plain[others])


def test_the_analyse_mosaic_png_tiles_a_channels_last_output_by_channel():
    """analyse's PNG reads the whole tensor (export.as_channels), not the preview: the same
    C tiles of H x W."""
    frame = run(build_model(), torch.rand(1, 3, H, W), ["to_last"])[("to_last", OUTPUT)]
    channels = as_channels(frame.full, (H, W))
    assert tuple(channels.shape) == (CHANNELS, *GRID)
    np.testing.assert_allclose(channels.numpy(), frame.preview, rtol=1e-6)
    grid = mosaic(channels)  # 5 tiles: 2 rows of 3 (make_grid), one pixel apart
    h, w = GRID
    assert grid.shape == (2 * (h + 1) + 1, 3 * (w + 1) + 1)
    for k in range(CHANNELS):
        r, c = divmod(k, 3)
        tile = grid[1 + r * (h + 1): 1 + r * (h + 1) + h, 1 + c * (w + 1): 1 + c * (w + 1) + w]
        m = frame.preview[k]
        np.testing.assert_allclose(tile, np.round(255 * (m - m.min()) / (m.max() - m.min())),
                                   atol=1)


def test_the_atlas_ranks_the_same_channels_as_the_mosaic_shows():
    """The Dataset dock shows the atlas's images of the channel clicked in the mosaic: the
    atlas reads a channels-last layer's channels from its last dim too (batch.probe)."""
    from inspector.batch.probe import plan_layers

    model = build_model()
    x = torch.rand(1, 3, H, W)
    plan = plan_layers(build_tree(model, x), ["to_last"], (H, W))["to_last"]
    assert plan.channels == CHANNELS and plan.channels_last
    frame = run(model, x, ["to_last"])[("to_last", OUTPUT)]
    per_channel = plan.view(torch.from_numpy(frame.full))[0].reshape(CHANNELS, *GRID)
    np.testing.assert_allclose(per_channel.numpy(), frame.preview, rtol=1e-6)


def test_timm_convnext_blocks_channels_last_outputs_preview_one_tile_per_channel(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # random weights: nothing to download
    timm = pytest.importorskip("timm")
    # convnext_atto's own config runs its MLPs as 1x1 convolutions (conv_mlp=True, channels
    # first); with conv_mlp=False, as convnext_tiny and larger do, each block permutes to
    # (B, H, W, C) for its LayerNorm and MLP.
    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False, conv_mlp=False).eval()
    x = torch.rand(1, 3, 64, 64)
    tree = build_tree(model, x)
    leaves = [n for n, info in tree.modules.items()
              if n.startswith("stages.1.blocks.0.") and info.output_shape is not None
              and len(info.output_shape) == 4]
    frames = run(model, x, leaves)
    last = {n for n in leaves if frames[(n, OUTPUT)].channels_last}
    assert {"stages.1.blocks.0.norm", "stages.1.blocks.0.mlp.fc1",
            "stages.1.blocks.0.mlp.fc2"} <= last
    assert "stages.1.blocks.0.conv_dw" not in last  # the depthwise conv is channels first
    norm = frames[("stages.1.blocks.0.norm", OUTPUT)]
    assert norm.shape == (1, 8, 8, 80) and norm.preview.shape == (80, 8, 8)
    for k in (0, 41, 79):
        np.testing.assert_allclose(norm.preview[k], norm.full[0, :, :, k], rtol=1e-6)
    # Each module's mosaic and its channel edits agree on which dim holds the channels.
    for name in leaves:
        (edit,) = check_edits((ZeroChannels(name, (0,)),), tree, (64, 64))
        assert (edit.dim == -1) == (name in last), name
