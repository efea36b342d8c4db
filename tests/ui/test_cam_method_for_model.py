"""The CAM method remembered from the last model, on a model that cannot make it: the pane
falls back to the default CAM and the status bar says why, instead of showing no map."""

from __future__ import annotations

import pytest
from test_main_window import TIMEOUT, TINY, wait_run, write_png

from inspector.core.explain.catalog import DEFAULT_CAM
from inspector.ui.run.settings import CAM_METHOD_KEY
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow


@pytest.mark.parametrize("remembered", ["legrad", "rollout"])
def test_a_remembered_attention_map_falls_back_to_the_default_cam_on_a_cnn(
        qtbot, tmp_path, remembered):
    from inspector.core.run.session import Session

    settings = AppSettings.in_file(str(tmp_path / "settings.ini"))
    settings.set_value(CAM_METHOD_KEY, remembered)  # chosen on a ViT last time
    window = MainWindow(settings)
    qtbot.addWidget(window)
    window.build_views()
    window.show()
    window.start([write_png(tmp_path / "x.png")], dict(TINY), session=Session())
    qtbot.waitUntil(lambda: window.model_name != "", timeout=TIMEOUT)
    wait_run(qtbot, window)
    cam = window.views["cam"]
    assert window.run_settings.value.cam_method == DEFAULT_CAM
    assert cam.method == DEFAULT_CAM
    qtbot.waitUntil(lambda: cam.choice()[0] is not None, timeout=TIMEOUT)
    assert cam.choice()[0].method == DEFAULT_CAM
    assert "needs gradients" not in cam.header.text()
    message = window.reporter.label.text()  # the status bar's message
    assert "lacks" in message and "Grad-CAM" in message, message
    window.shutdown()


def test_a_method_the_model_can_make_is_kept(qtbot):
    from inspector.ui.run.settings import RunSettingsModel

    model = RunSettingsModel()
    model.update(cam_method="legrad")
    assert model.fit_model("") == ""  # a ViT: LeGrad applies
    assert model.value.cam_method == "legrad"
    model.update(cam_method="scorecam")
    assert model.fit_model("the model has no self-attention") == ""
    assert model.value.cam_method == "scorecam"
