"""Left and Right step through the images from anywhere in the window, except in a focused
widget that moves with them: a slider (the attention block slider changed the image, not the
block), a spin box, a text field or a list keeps its arrow keys."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from test_main_window import wait_run, write_png  # noqa: F401 (fixture)


def test_a_focused_slider_keeps_its_arrows_and_elsewhere_they_step_the_images(
        make_window, qtbot, tmp_path):
    images = [write_png(tmp_path / f"{k}.png", color=(40 + 30 * k, 80, 160)) for k in range(3)]
    window = make_window(images=images)
    wait_run(qtbot, window)
    window.activateWindow()
    pane = window.images
    first = pane.current().path

    # Focus on the picture (no arrows of its own): Right steps to the next image.
    pane.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Right)
    qtbot.waitUntil(lambda: pane.current().path != first)
    second = pane.current().path

    # The CAM's opacity slider focused: Left moves the slider, the image stays.
    slider = window.views["cam"].controls.alpha_slider
    slider.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is slider)
    before = slider.value()
    qtbot.keyClick(slider, Qt.Key.Key_Left)
    qtbot.wait(50)
    assert slider.value() == before - slider.singleStep()
    assert pane.current().path == second
    window.shutdown()
