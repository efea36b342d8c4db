"""Opening a model while the old model's long run (a Score-CAM) is going: the run is
cancelled and the new model is loaded at once, not after the run."""

from __future__ import annotations

import time

from test_main_window import TIMEOUT, write_png  # noqa: F401 (fixture)

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


def test_opening_a_model_cancels_the_old_models_score_cam(make_window, qtbot, tmp_path):
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


def scorecam_window(qtbot, tmp_path, model, answer):
    """A window whose remembered method is Score-CAM, loading `model`; `answer`: what the
    user says when asked (the questions asked are in window.asked)."""
    from inspector.core.run.session import Session
    from inspector.ui.run.settings import CAM_METHOD_KEY
    from inspector.ui.shell.app_settings import AppSettings
    from inspector.ui.window.main_window import MainWindow

    settings = AppSettings.in_file(str(tmp_path / "settings.ini"))
    settings.set_value(CAM_METHOD_KEY, "scorecam")
    window = MainWindow(settings)
    qtbot.addWidget(window)
    window.asked = []
    window.expensive.confirm = lambda question: window.asked.append(question) or answer
    window.build_views()
    window.show()
    window.start([write_png(tmp_path / "x.png")], model, session=Session())
    qtbot.waitUntil(lambda: window.model_name != "", timeout=TIMEOUT)
    return window


def slow_model(tmp_path, sleep_s):
    factory = tmp_path / "slow.py"
    factory.write_text(SLOW.replace("time.sleep(1.0)", f"time.sleep({sleep_s})"))
    return {"name": None, "factory": f"{factory}:build"}


def test_score_cam_over_30_s_on_the_new_model_asks_first_and_no_keeps_the_default(
        qtbot, tmp_path):
    window = scorecam_window(qtbot, tmp_path, slow_model(tmp_path, 0.2), answer=False)
    qtbot.waitUntil(lambda: bool(window.asked), timeout=TIMEOUT)
    # 256 masks at about 0.2 s a forward: about 51 s.
    assert "256 masks" in window.asked[0] and "Score-CAM" in window.asked[0]
    seconds = float(window.asked[0].split("about ")[1].split(" s")[0])
    assert seconds > 30
    assert window.run_settings.value.cam_method == "gradcam"
    assert "Score-CAM was not started" in window.reporter.label.text()
    qtbot.wait(300)
    assert "scorecam" not in [m for m, _ in window.control.last_request.cams]
    window.shutdown()


def test_score_cam_asked_and_accepted_runs(qtbot, tmp_path):
    window = scorecam_window(qtbot, tmp_path, slow_model(tmp_path, 0.2), answer=True)
    qtbot.waitUntil(lambda: bool(window.asked), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: window.control.last_request.cams == (
        ("scorecam", window.run_settings.value.cam_layer),), timeout=TIMEOUT)
    assert window.views["cam"].method == "scorecam"
    window.shutdown()


def test_a_quick_score_cam_starts_without_asking(qtbot, tmp_path):
    from test_main_window import TINY

    window = scorecam_window(qtbot, tmp_path, dict(TINY), answer=False)
    qtbot.waitUntil(lambda: window.control.last_request is not None and any(
        m == "scorecam" for m, _ in window.control.last_request.cams), timeout=TIMEOUT)
    assert window.asked == []
    window.shutdown()
