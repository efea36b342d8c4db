"""What the window says about the images it is given: one status line for an image decoded
reduced (core.inputs.images), and the same message for a bad image named on the command line as
for one dropped on the window."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from test_main_window import TIMEOUT, TINY, drop  # noqa: F401 (a fixture)

from inspector.core.inputs import images
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.window.main_window import MainWindow


def test_a_large_image_is_listed_reduced_with_one_status_line(
        make_window, qtbot, tmp_path, monkeypatch):
    # The app's limits (89 and 179 megapixels), 22,000 times smaller: it reduces above 4,000
    # pixels and refuses above 8,000 (tests/core/test_large_images.py: Pillow's warning).
    monkeypatch.setattr(images, "MAX_PIXELS", 8_000)
    monkeypatch.setattr(images, "LARGE_PIXELS", 4_000, raising=False)
    window = make_window()
    path = tmp_path / "panorama.png"
    Image.fromarray(np.full((60, 100, 3), 120, np.uint8)).save(path)
    assert drop(window, [path]) == (True, True)
    qtbot.waitUntil(lambda: "panorama.png was decoded" in window.reporter.label.text(),
                    timeout=TIMEOUT)
    line = window.reporter.label.text()
    assert line == ("panorama.png was decoded at 1/2 scale: the file is 100 x 60 (0.006 "
                    "megapixels), more than the model input and the screen need.")
    assert window.reporter.count == 0  # news, not a failure
    assert window.images.current().size == (50, 30)


@pytest.mark.parametrize("name, reason", [
    ("bad.png", "not an image file (looks like text)"),
    ("missing.png", "no such file or folder"),
])
def test_a_bad_image_on_the_command_line_is_the_message_a_dropped_one_gives(
        qtbot, tmp_path, name, reason):
    from inspector.app import model_fields, parse_args, startup_images
    from inspector.core.run.session import Session

    (tmp_path / "bad.png").write_text("not an image")
    args = parse_args([str(tmp_path / name)])
    # In the order inspector.app._run uses: shown, started, then the views built.
    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.show()
    window.start(startup_images(args), {**model_fields(args), **TINY}, session=Session())
    window.build_views()
    qtbot.waitUntil(lambda: window.reporter.count > 0 and window.model_name != "",
                    timeout=TIMEOUT)
    assert window.reporter.last_message == f"Could not open {name}: {reason}"
    assert window.images.list.count() == 0


def test_a_large_image_given_at_launch_keeps_its_note_beside_the_loaded_line(
        make_window, qtbot, tmp_path, monkeypatch):
    """Listed before the model loaded, its note was replaced by "Loaded …" before it could
    be read."""

    monkeypatch.setattr(images, "MAX_PIXELS", 8_000)
    monkeypatch.setattr(images, "LARGE_PIXELS", 4_000, raising=False)
    path = tmp_path / "panorama.png"
    Image.fromarray(np.full((60, 100, 3), 120, np.uint8)).save(path)
    window = make_window(images=[str(path)])
    line = window.reporter.label.text()
    assert line.startswith("Loaded ") and "panorama.png was decoded at 1/2 scale" in line, line
    caption = window.images.caption.text()
    assert "50 × 30 (decoded from 100 × 60)" in caption, caption
