"""Occlusion sensitivity: where it looks, how it steps, that it stops, and that it needs no
backward pass."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch import nn

from inspector.core.explain.attributions import attribute, display_map
from inspector.core.explain.catalog import ATTRIBUTION_LAYER, AttributionOptions
from inspector.core.explain.occlusion import occlusion_sensitivity, patch_boxes
from inspector.core.hookset import RunCancelled, remaining_hooks
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import build_tree
from inspector.core.records.frames import CamFrame
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session

REGION = (slice(4, 8), slice(8, 12))  # rows 4..7, columns 8..11 of a 16 x 16 input


class RegionScore(nn.Module):
    """Class 0's logit is the sum of the input over REGION (all channels); class 1's is a
    constant. Nothing outside REGION moves any score. Records every forward's batch size."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.tensor([0.0, 1.0]))
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(len(x))
        region = x[:, :, REGION[0], REGION[1]].sum(dim=(1, 2, 3))
        return torch.stack([region, torch.zeros_like(region)], dim=1) + self.bias


def test_the_attribution_is_the_score_drop_exactly_where_the_score_looks():
    model = RegionScore()
    x = torch.rand(3, 16, 16) + 0.5  # positive: covering any of it lowers class 0's logit
    region_sum = float(x[:, REGION[0], REGION[1]].sum())
    # Patches of 4 every 4 pixels: REGION is exactly one patch.
    attr = attribute(model, x, 0, "occlusion",
                     AttributionOptions(occlusion_patch=4, occlusion_stride=4))
    assert attr.shape == (3, 16, 16) and attr.dtype == np.float32
    inside = np.zeros((16, 16), bool)
    inside[REGION] = True
    for c in range(3):  # a patch covers every channel: the same value in each
        np.testing.assert_allclose(attr[c][inside], region_sum, rtol=1e-5)
        assert np.abs(attr[c][~inside]).max() < 1e-5
    # Class 1 does not look at the input at all: nothing matters to it.
    assert np.abs(attribute(model, x, 1, "occlusion",
                            AttributionOptions(occlusion_patch=4, occlusion_stride=4))).max() < 1e-6
    # Counter-evidence is negative: covering negative inputs raises the score.
    neg = attribute(model, -x, 0, "occlusion",
                    AttributionOptions(occlusion_patch=4, occlusion_stride=4))
    np.testing.assert_allclose(neg[0][inside], -region_sum, rtol=1e-5)
    # The display map keeps the positive evidence only, scaled to [0, 1].
    shown = display_map("occlusion", torch.from_numpy(attr)[None])[0]
    assert shown[inside].min() > 0.99 and shown[~inside].max() < 1e-6
    assert display_map("occlusion", torch.from_numpy(neg)[None]).max() == 0.0


def test_overlapping_patches_average_the_drops_of_the_patches_covering_each_pixel():
    model = RegionScore()
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16)
    patch, stride = 5, 3
    attr, scores, targets = occlusion_sensitivity(model, x, 0, patch=patch, stride=stride,
                                                  batch_size=7)
    # The definition, one patch at a time.
    total, covers = torch.zeros(16, 16), torch.zeros(16, 16)
    starts = [0, 3, 6, 9, 11]  # every 3 pixels, and the last one flush with the edge (16 - 5)
    with torch.no_grad():
        base = float(model(x)[0, 0])
        for top in starts:
            for left in starts:
                occluded = x.clone()
                occluded[:, :, top : top + patch, left : left + patch] = 0.0
                drop = base - float(model(occluded)[0, 0])
                total[top : top + patch, left : left + patch] += drop
                covers[top : top + patch, left : left + patch] += 1
    assert covers.min() >= 1  # every pixel is covered
    torch.testing.assert_close(attr[0, 0], total / covers, rtol=1e-4, atol=1e-5)
    assert targets == [0] and abs(float(scores[0]) - base) < 1e-5
    # Far from REGION (no patch covering it reaches REGION): exactly nothing.
    assert attr[0, :, 12:, :3].abs().max() < 1e-5


@pytest.mark.parametrize(("patch", "stride", "per_axis"), [(4, 4, 4), (4, 2, 7), (6, 4, 4),
                                                           (16, 1, 1), (40, 8, 1)])
def test_patch_and_stride_set_the_number_of_forwards(patch, stride, per_axis):
    model = RegionScore()
    calls: list[tuple[int, int]] = []
    attribute(model, torch.rand(3, 16, 16), 0, "occlusion",
              AttributionOptions(occlusion_patch=patch, occlusion_stride=stride, batch_size=5),
              progress=lambda done, total: calls.append((done, total)))
    n = per_axis * per_axis
    batches = -(-n // 5)
    assert len(calls) == batches and all(total == n for _, total in calls)
    assert [done for done, _ in calls] == [min(n, 5 * (k + 1)) for k in range(batches)]
    # One forward on the clean input, then the occluded copies, at most 5 at a time.
    assert model.sizes[0] == 1 and sum(model.sizes[1:]) == n and max(model.sizes[1:]) <= 5
    assert len(patch_boxes(16, 16, patch, stride)) == n


def test_a_batch_of_images_is_explained_image_by_image():
    model = RegionScore()
    x = torch.rand(2, 3, 16, 16)
    opts = AttributionOptions(occlusion_patch=4, occlusion_stride=2)
    batch = attribute(model, x, 0, "occlusion", opts)
    assert batch.shape == (2, 3, 16, 16)
    for i in range(2):
        np.testing.assert_allclose(batch[i], attribute(model, x[i], 0, "occlusion", opts),
                                   rtol=1e-5, atol=1e-6)


def test_the_progress_callback_stops_it_between_batches_and_the_model_is_restored():
    model = RegionScore().train()
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 2:
            raise RunCancelled()

    with pytest.raises(RunCancelled):
        occlusion_sensitivity(model, torch.rand(1, 3, 16, 16), 0, patch=2, stride=2,
                              batch_size=4, progress=progress)
    assert calls == [4, 8]  # of 64 patches
    assert model.sizes == [1, 4, 4]  # no forward after the cancel
    assert model.training  # eval only for the run


def test_bad_patch_or_stride_is_a_clear_error():
    with pytest.raises(ValueError, match="occlusion-patch must be at least 1"):
        AttributionOptions(occlusion_patch=0)
    with pytest.raises(ValueError, match="occlusion-stride must be at least 1"):
        AttributionOptions(occlusion_stride=-2)
    with pytest.raises(ValueError, match="patch and stride must be at least 1"):
        occlusion_sensitivity(RegionScore(), torch.rand(1, 3, 8, 8), 0, patch=3, stride=0)


# -- through a Session run --------------------------------------------------------------------


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("this model's backward is broken")


class BrokenBackward(nn.Module):
    """A small CNN whose backward raises; optionally blocks in its `block_at`-th forward
    until `release` is set (to cancel a run at a known point, without timing)."""

    def __init__(self, block_at: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 4)
        self.block_at = block_at
        self.forwards = 0
        self.blocked = threading.Event()
        self.release = threading.Event()

    def forward(self, x):
        self.forwards += 1
        if self.forwards == self.block_at:
            self.blocked.set()
            assert self.release.wait(30), "the test never released the model"
        h = _NoBackward.apply(torch.relu(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


PRE = Preprocess(crop_size=(8, 8), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)
NO_GRADIENTS = CaptureSpec(modules={"conv": frozenset({"output"})})


def session_with(model: nn.Module) -> Session:
    s = Session()
    s.loaded = LoadedModel(model.eval(), "test", "test model", True, ["a", "b", "c", "d"], PRE,
                           torch.device("cpu"))
    s.tree = build_tree(model, torch.zeros(1, 3, 8, 8))
    model.forwards = 0
    return s


def test_a_model_whose_backward_fails_still_gets_an_occlusion_map():
    model = BrokenBackward()
    x = torch.rand(3, 8, 8)
    with pytest.raises(RuntimeError, match="backward is broken"):
        attribute(model, x, 0, "saliency")  # the gradient methods cannot explain it
    s = session_with(model)
    try:
        opts = AttributionOptions(occlusion_patch=2, occlusion_stride=2)
        out = s.run(x, capture=NO_GRADIENTS, gradients=False, attributions=("occlusion",),
                    attribution_options=opts, timeout=60)
        assert out.status == "ok", out.error
        signed = out.attributions["occlusion"]
        assert signed.shape == (3, 8, 8) and np.abs(signed).max() > 0
        np.testing.assert_allclose(signed, attribute(model, x[None], out.target, "occlusion",
                                                     opts)[0], rtol=1e-5, atol=1e-6)
        maps = [f for f in s.channel.drain() if isinstance(f, CamFrame)]
        assert [(f.method, f.layer) for f in maps] == [("occlusion", ATTRIBUTION_LAYER)]
        assert maps[0].cam.shape == (8, 8) and 0 <= maps[0].cam.min() <= maps[0].cam.max() <= 1
        assert not remaining_hooks(model)
    finally:
        s.close()


def test_cancelling_the_run_stops_occlusion_part_way():
    # Forward 1: the run's own; 2: the clean input's score; 3..: batches of 4 of 16 patches.
    model = BrokenBackward(block_at=4)
    s = session_with(model)
    try:
        opts = AttributionOptions(occlusion_patch=2, occlusion_stride=2, batch_size=4)
        from inspector.core.run.request import RunRequest

        run_id, future = s.submit_request(RunRequest(
            image=torch.rand(3, 8, 8), capture=NO_GRADIENTS, gradients=False,
            attributions=("occlusion",), attribution_options=opts))
        assert model.blocked.wait(30)  # inside the second batch of occluded copies
        s.cancel(run_id)
        model.release.set()
        out = future.result(timeout=30)
        assert out.status == "cancelled"
        assert "occlusion" not in out.attributions
        assert model.forwards == 4  # the progress call after that batch stopped it
        assert not remaining_hooks(model)
    finally:
        model.release.set()
        s.close()
