"""File ▸ New atlas… and File ▸ Compare with model… start from what the user has: the atlas
from the window's loaded images, both from the choices of their last Run (kept in the
settings, so a new window has them), and their output folders default to a folder under the
user's data folder, never a shared temporary one."""

from __future__ import annotations

import tempfile
from pathlib import Path

from test_compare_models_ui import NET_B, _images
from test_main_window import TIMEOUT, wait_run  # noqa: F401 (a fixture)

from inspector.ui.shell.data_folder import data_folder


def _under(path: str | Path, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def test_new_atlas_starts_with_the_loaded_images_and_remembers_its_folder(
        make_window, qtbot, tmp_path):
    images = _images(tmp_path, 3)
    window = make_window(images=images)
    wait_run(qtbot, window)
    dialog = window.atlas.new_dialog()
    assert dialog.input_paths() == [str(p) for p in images]
    assert Path(dialog._start_dir) == images[0].parent  # Add folder… starts beside them
    default = dialog.out.text()
    assert _under(default, data_folder()) and not _under(default, Path(tempfile.gettempdir()))
    dialog.layers.setText("features.3")
    assert dialog.out.text() != default and "features.3" in dialog.out.text()
    chosen = tmp_path / "my_atlas"
    dialog.out.setText(str(chosen))
    dialog.layers.setText("features.0")
    dialog.device.setCurrentText("cpu")
    dialog.run()
    qtbot.waitUntil(lambda: not window.atlas.runner.running, timeout=TIMEOUT)
    assert (chosen / "atlas.json").exists(), dialog.status.text()
    window.settings.sync()
    again = make_window(images=images[:1])  # the same settings file: a restart
    wait_run(qtbot, again)
    dialog = again.atlas.new_dialog()
    assert dialog.out.text() == str(chosen) and dialog.input_paths() == [str(images[0])]


def test_compare_with_model_remembers_model_b_and_its_output_folder(
        make_window, qtbot, tmp_path):
    images = _images(tmp_path, 4)
    window = make_window(images=images)
    wait_run(qtbot, window)
    actions = window.compare_models
    actions.open_dialog()
    dialog = actions.dialog
    default = dialog.out.text()
    assert _under(default, data_folder()) and not _under(default, Path(tempfile.gettempdir()))
    (tmp_path / "net.py").write_text(NET_B)
    model_b = f"{tmp_path / 'net.py'}:build"
    dialog.model_b.setCurrentText(model_b)
    assert dialog.out.text() != default and "net.build" in dialog.out.text()  # per pair
    chosen = tmp_path / "cmp"
    dialog.out.setText(str(chosen))
    dialog.run()
    qtbot.waitUntil(lambda: actions.view is not None and actions.view.doc is not None,
                    timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    window.settings.sync()
    again = make_window(images=images)
    wait_run(qtbot, again)
    again.compare_models.open_dialog()
    dialog = again.compare_models.dialog
    assert dialog.model_b.currentText() == model_b and dialog.out.text() == str(chosen)
    assert dialog.spec_b() is not None and dialog.spec_b().factory == model_b
