"""The window's run settings (ui.run.settings): one value, one setter, the request made from
it, the Compute gradients action that writes and follows it, and what is remembered."""

from __future__ import annotations

from inspector.core.records.kinds import GRAD_OUTPUT, OUTPUT
from inspector.ui.run.settings import RunSettings, RunSettingsModel, gradients_action
from inspector.ui.shell.app_settings import AppSettings


def test_an_update_says_which_fields_changed(qtbot):
    model = RunSettingsModel()
    seen = []
    model.changed.connect(lambda names, quiet: seen.append((set(names), quiet)))
    assert model.update(gradients=False, stretch=False) == {"gradients"}
    assert model.update(gradients=False) == frozenset()  # nothing changed: nothing said
    model.update(quiet=True, cam_layer="stage3")
    assert seen == [({"gradients"}, False), ({"cam_layer"}, True)]
    assert model.value == RunSettings(gradients=False, cam_layer="stage3")


def test_the_gradients_action_writes_and_follows_the_setting(qtbot):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    model = RunSettingsModel()
    action = gradients_action(model, parent)
    assert action.isCheckable() and action.isChecked()
    action.trigger()
    assert model.value.gradients is False
    action.setChecked(True)  # a program setting it counts as the user's choice too
    assert model.value.gradients is True
    model.update(gradients=False)
    assert not action.isChecked()


def test_the_request_encodes_gradients_once_and_live_runs_are_lean():
    capture = {"stage1": frozenset({OUTPUT, GRAD_OUTPUT}), "stage3": frozenset({OUTPUT})}
    off = RunSettings(gradients=False, capture=capture, selected="stage1")
    request = off.request("x.png", "x.png", None, "stage3")
    # The capture is the tree's; the request's one flag says no gradients.
    assert request.capture.modules == capture and request.gradients is False
    assert request.cams == ()  # a gradient CAM only for a class the user clicked
    clicked = RunSettings(gradients=False, capture=capture, target=2).request("x", "x", None, "s")
    assert clicked.cams == (("gradcam", None),) and clicked.target == 2
    live = RunSettings(capture=capture, selected="stage1", live=True).request("x", "x", None, "s")
    assert live.capture.modules == {"stage1": frozenset({OUTPUT})} and not live.gradients
    assert live.cams == (("gradcam", None),)  # the CAM stays live, its backward stops there
    occlusion = RunSettings(cam_method="occlusion", attribution_options="opts").request(
        "x", "x", None, "s")
    assert occlusion.attributions == ("occlusion",) and occlusion.cams == ()
    assert occlusion.attribution_options == "opts"


def test_gradients_and_the_cam_method_are_remembered(tmp_path):
    stored = AppSettings.in_file(str(tmp_path / "settings.ini"))
    model = RunSettingsModel()
    model.update(gradients=False, cam_method="eigencam")
    model.save(stored)
    again = RunSettingsModel()
    again.restore(stored)
    assert again.value.gradients is False and again.value.cam_method == "eigencam"
    stored.set_value("cam_method", "no-such-method")  # a bad value is the default
    again.restore(stored)
    assert again.value.cam_method == "gradcam"
