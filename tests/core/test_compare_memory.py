"""What File ▸ Compare with model… says a comparison costs before model B loads
(batch.compare_models.memory): B's weights and activations from a build and a forward on PyTorch's
meta device, the larger forward's outputs plus both sides' Gram matrices per batch, and
"unknown" where B cannot be told before it loads."""

from __future__ import annotations

import torch
import torchvision

from inspector.batch.compare_models.memory import (
    MB,
    MemoryCost,
    batch_bytes,
    model_bytes,
    spec_output_sizes,
    spec_weights_bytes,
)
from inspector.core.models.base import ModelSpec


def test_a_torchvision_model_is_measured_on_the_meta_device():
    spec = ModelSpec(name="resnet18")
    sizes = spec_output_sizes(spec)
    model = torchvision.models.resnet18(weights=None).eval()
    real: list[int] = []
    for m in model.modules():
        if not list(m.children()):
            m.register_forward_hook(lambda _m, _i, o: real.append(o[0].numel()))
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    assert sizes == real  # the same leaves, the same sizes, without computing anything
    assert max(sizes) == 64 * 112 * 112
    assert spec_weights_bytes(spec) == model_bytes(model)
    assert spec_output_sizes(ModelSpec(name="demo_shapes")) is None  # not torchvision's
    assert spec_output_sizes(ModelSpec(name=None, factory="net.py:build")) is None


def test_a_batch_counts_the_larger_forward_and_both_sides_grams():
    small, large = [10, 20, 30, 40], [1000, 5, 5, 5, 5]
    grams = 3 * 8 * (4 + 5) * 8 * 8
    assert batch_bytes(8, small, 4, large, 5) == 4 * 8 * 1010 + grams
    assert batch_bytes(8, large, 5, small, 4) == 4 * 8 * 1010 + grams
    assert batch_bytes(8, small, 4) == 4 * 8 * 90 + 3 * 8 * 4 * 64  # B is A: Grams shared
    resnet = spec_output_sizes(ModelSpec(name="resnet34"))
    assert batch_bytes(32, small, 4, resnet, len(resnet)) > 200 * MB


def test_what_cannot_be_told_is_said():
    cost = MemoryCost(weights_a=MB, weights_b=2 * MB, batch=MB, available=100 * MB,
                      batch_b_known=False)
    assert cost.total is None and cost.fits is None
    text = MemoryCost(MB, None, MB, 100 * MB, batch_b_known=False).describe("net.py:build", 32)
    assert "weights of a size unknown until it loads" in text
    assert "model B's part, unknown until B loads" in text
    known = MemoryCost(weights_a=MB, weights_b=2 * MB, batch=MB, available=100 * MB)
    assert known.total == 4 * MB and known.fits
    tight = MemoryCost(weights_a=MB, weights_b=2 * MB, batch=MB, available=3 * MB)
    assert "more than is free" in tight.describe("resnet34", 32)
