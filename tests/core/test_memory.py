"""Nothing of a run outlives it: RSS after 500 runs is what it was after 20."""

from __future__ import annotations

import gc

import psutil
import pytest
import torch
import torchvision

from inspector.core.hookset import remaining_hooks
from inspector.core.inputs.preprocess import Preprocess
from inspector.core.models.base import LoadedModel
from inspector.core.models.tree import build_tree
from inspector.core.records.kinds import KINDS
from inspector.core.run.capture_spec import CaptureSpec
from inspector.core.run.session import Session


@pytest.mark.slow
def test_rss_flat_over_500_runs_of_resnet18_with_every_module_captured():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    size = 64  # small input: 500 forward+backward runs stay quick on 2 cores
    pre = Preprocess(crop_size=(size, size), resize_size=None, mean=(0.5,) * 3, std=(0.5,) * 3)
    s = Session()
    s.loaded = LoadedModel(model, "resnet18", "", False, [str(i) for i in range(1000)], pre,
                           torch.device("cpu"))
    s.tree = build_tree(model, torch.zeros(1, 3, size, size))
    names = [n for n, _ in model.named_modules()]
    capture = CaptureSpec.for_modules(names, KINDS, preview=frozenset(names[:6]),
                                      keep=frozenset({"layer4"}))
    proc = psutil.Process()
    x = torch.rand(3, size, size)
    frames = 0

    def runs(n):
        nonlocal frames
        for _ in range(n):
            out = s.run(x, timeout=60, capture=capture)
            assert out.status == "ok", out.error
            frames += len(s.channel.drain())

    try:
        runs(20)
        gc.collect()
        rss_20 = proc.memory_info().rss
        runs(480)
        gc.collect()
        rss_500 = proc.memory_info().rss
    finally:
        s.close()
    assert frames > 500 * 200  # every module, several kinds, was really captured
    assert not remaining_hooks(model)
    grown = (rss_500 - rss_20) / 2**20
    print(f"RSS after 20 runs {rss_20 / 2**20:.1f} MiB, after 500 {rss_500 / 2**20:.1f} MiB")
    assert grown < 50, f"RSS grew by {grown:.1f} MiB between run 20 and run 500"
