"""Issue 32: Score every method's time left grew as it ran (4, 9, 14, 18, 22 s left) and
never named the method scored. The Forwarder plans the work in phases and judges each at
its own pace; the progress names what is done."""

from __future__ import annotations

import torch

from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.names import MetricOptions
from inspector.core.records.frames import ProgressFrame


def test_the_time_left_falls_as_slow_work_follows_fast_work():
    now = [0.0]
    seen = []
    forwarder = Forwarder(lambda b: torch.zeros(len(b)), torch.zeros(1, 1, 2, 2),
                          progress=lambda done, total, detail="", left=None:
                          seen.append((detail, left)),
                          total=20, phases={"slow": 10, "fast": 10}, clock=lambda: now[0])
    for k in range(10):  # a second a unit
        forwarder.begin("slow", f"scoring map {k + 1} (of 10)")
        now[0] += 1.0
        forwarder.advance(1)
    for _ in range(10):  # a tenth of that
        forwarder.begin("fast", "the rest")
        now[0] += 0.1
        forwarder.advance(1)
    lefts = [left for _, left in seen if left is not None]
    assert lefts and all(b <= a + 1e-9 for a, b in zip(lefts, lefts[1:], strict=False)), lefts
    assert lefts[-1] == 0.0
    assert seen[0][0] == "scoring map 1 (of 10)" and seen[-1][0] == "the rest"


def test_the_faithfulness_progress_names_the_maps(demo_session, demo_samples):
    s = demo_session
    options = MetricOptions(metrics=("deletion", "insertion", "road", "sanity"), steps=4,
                            road_percentiles=(50,))
    out = s.run(demo_samples[0], cams=(("gradcam", None), ("eigencam", None)), metrics=options)
    assert out.status == "ok", out.error
    details = [f.detail for f in s.channel.drain()
               if isinstance(f, ProgressFrame) and f.step == "Faithfulness"]
    assert "scoring Grad-CAM (1 of 2)" in details and "scoring EigenCAM (2 of 2)" in details
    assert any(d.startswith("sanity check of Grad-CAM") for d in details), details
