"""Opening a model while the old model's long run (a Score-CAM) is going: the run is
cancelled and the new model is loaded at once, not after the run."""

from __future__ import annotations

import time

from test_main_window import TIMEOUT, make_window, write_png  # noqa: F401 (fixture)

SLOW = """
import time
import torch
from torch import nn


class Slow(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 256, 3, padding=1)
        self.head = nn.Linear(256, 4)

    def forward(self, x):
        time.sleep(1.0)  # each forward of Score-CAM's 256 masks (32 a batch): 8 s in all
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


def build():
    return Slow()
"""


def test_opening_a_model_cancels_the_old_models_score_cam(make_window, qtbot, tmp_path):  # noqa: F811
    factory = tmp_path / "slow.py"
    factory.write_text(SLOW)
    window = make_window(model={"name": None, "factory": f"{factory}:build"},
                         images=[write_png(tmp_path / "x.png")])
    qtbot.waitUntil(lambda: not window.control.running, timeout=TIMEOUT)
    cam = window.views["cam"]
    methods = cam.controls.method_combo
    methods.setCurrentIndex(methods.findData("scorecam"))  # 256 masks, 8 forwards
    qtbot.waitUntil(lambda: window.run_settings.value.cam_method == "scorecam", timeout=TIMEOUT)
    window.runs.rerun()
    run = window.control.current_run
    qtbot.waitUntil(lambda: window.router.store.started(run) is not None, timeout=TIMEOUT)
    generation = window._model_generation
    start = time.monotonic()
    window.control.load_model(window.control.make_spec(name="demo_shapes"))
    qtbot.waitUntil(lambda: window._model_generation > generation, timeout=TIMEOUT)
    took = time.monotonic() - start
    assert took < 5.0, took
    window.shutdown()
