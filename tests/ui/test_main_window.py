"""The main window with the real engine: drops, runs, module selection, failures, models.

The window runs core's real Session (its worker thread, hooks and channel) on a tiny model
loaded through the app's "Python file" route, so that each test takes about a second once
torch is imported. The demo model has its own end-to-end test below.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

HERE = Path(__file__).resolve().parent
TINY = {"name": None, "factory": f"{HERE / 'tiny_models.py'}:build_model"}
TIMEOUT = 60_000  # ms: the first test also imports torch on a busy machine


def write_png(path: Path, color=(40, 80, 160), size=(96, 80)) -> Path:
    """A dark image with a bright square (dark top-left corner: tiny_models.Boom lets it run)."""
    array = np.zeros((size[1], size[0], 3), np.uint8)
    array[:] = color
    array[size[1] // 4: size[1] // 2, size[0] // 3: size[0] // 2] = (250, 220, 40)
    Image.fromarray(array).save(path)
    return path


def drop(widget, paths) -> tuple[bool, bool]:
    """A real drag-enter and drop of file URLs on `widget`; whether each was accepted.

    QApplication.sendEvent propagates drag events to the parents of a widget that does not
    accept drops, as a real drag does."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    with warnings.catch_warnings():
        # PySide marks this constructor deprecated, yet it is the only one QDragEnterEvent has.
        warnings.simplefilter("ignore", DeprecationWarning)
        enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    dropped = QDropEvent(pos, Qt.DropAction.CopyAction, mime,
                         Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, dropped)
    return enter.isAccepted(), dropped.isAccepted()


def wait_run(qtbot, window, status="ok", timeout=TIMEOUT):
    """Wait for the window's current run to reach the views; return its RunFinished."""
    qtbot.waitUntil(
        lambda: window.last_run is not None
        and window.last_run.run_id == window.control.current_run
        and not window.control.running,
        timeout=timeout,
    )
    assert window.last_run.status == status, window.reporter.last_message
    return window.last_run


def test_dropping_a_png_and_a_folder_lists_them_and_the_run_reaches_the_views(
    make_window, qtbot, tmp_path
):
    window = make_window()
    png = write_png(tmp_path / "one.png")
    folder = tmp_path / "folder"
    folder.mkdir()
    write_png(folder / "a.png", (20, 60, 20))
    write_png(folder / "b.png", (60, 20, 20))
    (folder / "notes.txt").write_text("not an image, skipped inside a folder")

    assert drop(window, [png]) == (True, True)
    qtbot.waitUntil(lambda: window.images.list.count() == 1, timeout=TIMEOUT)
    assert window.images.current().path == png
    run = wait_run(qtbot, window)
    activation = window.views["activation"]
    shown = activation.current_frame()
    assert shown is not None and shown.run_id == run.run_id
    assert shown.module == window.tree.current_module() == "features.0"
    assert window.images.canvas.image is not None

    # A folder dropped on a view deep inside a dock: the drop reaches the window's handler.
    target = window.views["gradient"]
    assert drop(target, [folder]) == (True, True)
    qtbot.waitUntil(lambda: window.images.list.count() == 3, timeout=TIMEOUT)
    assert [e.name for e in window.images.list.entries()] == ["one.png", "a.png", "b.png"]
    assert window.images.current().name == "a.png"  # the first new image runs at once
    run = wait_run(qtbot, window)
    assert activation.current_frame().run_id == run.run_id
    assert window.router.frames_shown > 0
    assert "tensors handed to the views so far" in window.status.run.toolTip()


def test_statistics_on_the_slower_path_are_said_in_the_status_bar(
    make_window, qtbot, monkeypatch
):
    from inspector.core.stats import fused as fused_stats

    monkeypatch.setattr(fused_stats, "_failure", "the compiled statistics kernel is missing")
    window = make_window()
    qtbot.waitUntil(lambda: "Statistics use torch reductions" in window.reporter.label.text(),
                    timeout=TIMEOUT)
    assert "the compiled statistics kernel is missing" in window.reporter.label.text()


def test_selecting_a_module_changes_what_the_views_show(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    activation, gradient = window.views["activation"], window.views["gradient"]
    assert activation.current_frame().shape == (1, 8, 64, 64)

    assert window.tree.select_module("features.3")
    assert activation.module == gradient.module == "features.3"
    qtbot.waitUntil(lambda: activation.current_frame() is not None
                    and activation.current_frame().module == "features.3", timeout=TIMEOUT)
    assert activation.current_frame().shape == (1, 16, 32, 32)
    qtbot.waitUntil(lambda: gradient.current_frame() is not None, timeout=TIMEOUT)
    assert gradient.current_frame().module == "features.3"


def test_tree_shows_the_run_statistics_and_its_checkboxes_drive_the_capture(
    make_window, qtbot, tmp_path
):
    from inspector.core.records.kinds import GRAD_INPUT, OUTPUT
    from inspector.ui.module_tree.cells import COL_MEAN, COLUMN_OF_KIND

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    model = window.tree.model
    index = model.index_of("features.2", COL_MEAN)
    assert model.data(index) not in (None, "")  # ReLU output mean, from the last run
    stats = model.cells.stats_of("features.2")
    assert stats is not None and stats.min >= 0.0

    # Ticking "input gradient" for a module makes the next run capture it.
    check = model.index_of("features.3", COLUMN_OF_KIND[GRAD_INPUT])
    assert model.data(check, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    model.setData(check, Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    assert GRAD_INPUT in window.runs.request().capture.kinds_for("features.3")
    qtbot.waitUntil(lambda: window.control.last_request.capture.kinds_for("features.3")
                    >= {GRAD_INPUT, OUTPUT}, timeout=TIMEOUT)


def test_a_corrupt_file_is_a_message_and_the_previous_image_stays(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "good.png")])
    wait_run(qtbot, window)
    before = window.images.current()
    shown = window.views["activation"].current_frame()
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"this is text, not a PNG")
    errors = window.reporter.count

    assert drop(window, [bad]) == (True, True)
    qtbot.waitUntil(lambda: window.reporter.count > errors, timeout=TIMEOUT)
    assert "broken.png" in window.reporter.last_message
    assert window.reporter.details_button.isVisibleTo(window)
    assert window.images.list.count() == 1
    assert window.images.current() is before
    assert window.views["activation"].current_frame() is shown
    window.runs.rerun()  # F5: the app still works
    wait_run(qtbot, window)


def test_a_module_that_raises_is_a_message_and_the_next_run_works(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "dark.png")])
    wait_run(qtbot, window)
    white = tmp_path / "white.png"
    Image.new("RGB", (80, 80), (255, 255, 255)).save(white)
    window.images.add_paths([white])
    qtbot.waitUntil(lambda: window.images.list.count() == 2, timeout=TIMEOUT)
    wait_run(qtbot, window, status="error")
    assert "boom" in window.reporter.last_message
    assert "refuses white pixels" in window.reporter.last_details
    assert window.model_name == "build_model"  # the model stays loaded

    window.images.step(-1)
    wait_run(qtbot, window, status="ok")


def test_the_model_dialog_loads_a_checkpoint(make_window, qtbot, tmp_path, monkeypatch):
    import torch
    import torchvision

    from inspector.ui.open_model import dialog as model_dialog

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    torch.manual_seed(0)
    net = torchvision.models.mobilenet_v3_small(num_classes=5)
    checkpoint = tmp_path / "small.pth"
    torch.save(net.state_dict(), checkpoint)

    def fill_and_accept(dialog):
        dialog.tabs.setCurrentIndex(model_dialog.CHECKPOINT)
        dialog.arch.setCurrentText("mobilenet_v3_small")
        dialog.checkpoint.edit.setText(str(checkpoint))
        assert dialog.buttons.button(dialog.buttons.StandardButton.Open).isEnabled()
        dialog.accept()
        return model_dialog.ModelDialog.DialogCode.Accepted

    monkeypatch.setattr(model_dialog.ModelDialog, "exec", fill_and_accept)
    window.model_loads.open_dialog()
    qtbot.waitUntil(lambda: window.model_name == "mobilenet_v3_small", timeout=TIMEOUT)
    # A random-init checkpoint: its file is named, its weights are not called trained.
    assert window.status.weights.text() == "weights from small.pth"
    assert str(checkpoint) in window.status.weights.toolTip()
    assert "small.pth" in window.status.model.toolTip()
    assert window.tree.model.tree.root.type_name == "MobileNetV3"
    run = wait_run(qtbot, window)
    assert window.views["predictions"].frame.run_id == run.run_id
    assert len(window.views["predictions"].frame.top) == 5
    recent = window.settings.recent_models()[0]
    assert recent["checkpoint"] == str(checkpoint)


def test_a_checkpoint_that_does_not_fit_is_a_message_and_the_model_stays(
    make_window, qtbot, tmp_path
):
    import torch

    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    bad = tmp_path / "other.pt"
    torch.save({"conv.weight": torch.zeros(3, 3)}, bad)
    errors = window.reporter.count
    window.control.load_model(window.control.make_spec(name="resnet18", checkpoint=str(bad)))
    qtbot.waitUntil(lambda: window.reporter.count > errors and not window.control.loading,
                    timeout=TIMEOUT)
    assert "other.pt" in window.reporter.last_message
    assert "missing" in window.reporter.last_message
    assert window.model_name == "build_model"
    window.runs.rerun()
    wait_run(qtbot, window)


def test_a_text_file_opened_as_a_checkpoint_is_a_sentence_and_the_model_stays(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.ui.open_model import dialog as model_dialog

    window = make_window(images=[write_png(tmp_path / "x.png")])
    first = wait_run(qtbot, window)
    notes = tmp_path / "notes.pt"
    notes.write_text("epoch 1: loss 0.31\nepoch 2: loss 0.22\n")

    def fill_and_accept(dialog):
        dialog.tabs.setCurrentIndex(model_dialog.CHECKPOINT)
        dialog.arch.setCurrentText("demo_shapes")
        dialog.checkpoint.edit.setText(str(notes))
        dialog.accept()
        return model_dialog.ModelDialog.DialogCode.Accepted

    monkeypatch.setattr(model_dialog.ModelDialog, "exec", fill_and_accept)
    errors = window.reporter.count
    window.model_loads.open_dialog()
    qtbot.waitUntil(lambda: window.reporter.count > errors and not window.control.loading,
                    timeout=TIMEOUT)
    message = window.reporter.last_message
    assert message == ("Could not load weights for demo_shapes: notes.pt is a text file, not a "
                       "PyTorch checkpoint (a state_dict saved with torch.save, or a "
                       ".safetensors file)")
    assert "Traceback" not in window.reporter.last_details
    dialog = window.reporter._dialog  # a model load the user waits on opens its details
    assert dialog is not None and dialog.isVisible() and "notes.pt" in dialog.message.text()
    assert window.model_name == "build_model"
    assert window.control.model_spec.factory == TINY["factory"]
    window.runs.rerun()  # the previous model still runs
    assert wait_run(qtbot, window).run_id > first.run_id


def test_stretch_levels_is_a_visible_choice_that_reaches_the_run(make_window, qtbot, tmp_path):
    from inspector.ui.image.canvas import pil_from_qimage
    from inspector.ui.image.pane import MODEL_INPUT, ORIGINAL

    ramp = np.tile(np.linspace(1000, 4000, 96).round().astype(np.uint16), (80, 1))
    Image.fromarray(ramp).save(tmp_path / "sensor16.png")  # a dim 12-bit image in 16 bits
    window = make_window(images=[tmp_path / "sensor16.png"])
    first = wait_run(qtbot, window)
    pane = window.images

    def shown(mode) -> np.ndarray:
        pane.set_mode(mode)
        return np.asarray(pil_from_qimage(pane.canvas.image))

    assert not pane.stretch_button.isChecked() and pane.stretch_button.isVisibleTo(window)
    assert shown(MODEL_INPUT).max() <= 16 and shown(ORIGINAL).max() <= 16  # 4000 / 257
    pane.stretch_button.click()
    assert window.control.last_request.stretch is True
    qtbot.waitUntil(lambda: window.control.current_run != first.run_id, timeout=TIMEOUT)
    wait_run(qtbot, window)
    assert shown(MODEL_INPUT).max() > 150 and shown(ORIGINAL).max() == 255
    pane.stretch_button.click()  # and back
    assert window.control.last_request.stretch is False
    wait_run(qtbot, window)
    assert shown(MODEL_INPUT).max() <= 16


def test_closing_the_window_stops_the_worker_and_the_router(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    session = window.control.session
    window.close()
    assert not session.worker.is_alive()
    assert session.channel.on_finished is None  # nothing can wake the router any more
    # (and the autouse fixture fails the test if the router's timer still runs)


@pytest.mark.slow
def test_the_demo_model_end_to_end(make_window, qtbot, demo_samples):
    """What `make run` shows: the demo model with its sample images."""
    from inspector import demo

    samples = demo_samples
    window = make_window(model={}, images=samples[:3])
    assert window.model_name == "demo_shapes"
    assert window.status.weights.text() == "weights from shapes_cnn.safetensors"
    run = wait_run(qtbot, window)
    predictions = window.views["predictions"].frame
    assert predictions.run_id == run.run_id
    assert predictions.top[0].label in demo.demo_config()["classes"]
    assert window.views["activation"].current_frame() is not None


def test_the_window_opens_before_torch_is_imported(tmp_path):
    code = textwrap.dedent(
        """
        import os, sys
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        from PySide6.QtWidgets import QApplication
        import inspector.app
        from inspector.ui.window.main_window import MainWindow
        from inspector.ui.shell.app_settings import AppSettings
        app = QApplication([])
        window = MainWindow(AppSettings.in_file(sys.argv[1]))
        window.show()
        app.processEvents()
        assert window.isVisible()
        heavy = sorted(m for m in ("torch", "torchvision", "pyqtgraph") if m in sys.modules)
        print("heavy:", heavy)
        window.shutdown()
        """
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.ini")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "heavy: []" in result.stdout


def test_an_input_attribution_is_chosen_beside_the_cams_and_shown(make_window, qtbot, tmp_path):
    from inspector.core.explain.catalog import ATTRIBUTION_LAYER

    window = make_window(images=[write_png(tmp_path / "one.png")])
    wait_run(qtbot, window)
    cam = window.views["cam"]
    assert cam.controls.layer_combo.isEnabled()
    methods = cam.controls.method_combo
    methods.setCurrentIndex(methods.findData("saliency"))  # as a user would
    assert not cam.controls.layer_combo.isEnabled()  # an attribution is at the model input
    request = window.control.last_request
    assert request.attributions == ("saliency",) and request.cams == ()
    run = wait_run(qtbot, window)
    qtbot.waitUntil(lambda: cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id,
                    timeout=TIMEOUT)
    shown = cam.choice()[0]  # the map shown over the image
    assert (shown.method, shown.layer) == ("saliency", ATTRIBUTION_LAYER)
    assert 0.0 <= shown.cam.min() and shown.cam.max() <= 1.0
    assert "Saliency" in cam.header.text()
    methods.setCurrentIndex(methods.findData("gradcam"))  # back to a CAM
    assert cam.controls.layer_combo.isEnabled() and window.control.last_request.attributions == ()


def test_occlusion_takes_its_patch_and_stride_from_the_cam_pane(make_window, qtbot, tmp_path):
    window = make_window(images=[write_png(tmp_path / "one.png")])
    wait_run(qtbot, window)
    cam = window.views["cam"]
    assert not cam.occlusion.isVisible()
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("occlusion"))
    assert cam.occlusion.isVisible() and not cam.controls.layer_combo.isVisible()
    run = wait_run(qtbot, window)
    first = window.control.last_request
    assert first.attributions == ("occlusion",) and first.attribution_options.occlusion_patch == 32
    cam.occlusion.patch.setValue(8)
    cam.occlusion.stride.setValue(4)  # two steps: one run, after the pause
    qtbot.waitUntil(lambda: window.control.last_request is not first, timeout=TIMEOUT)
    options = window.control.last_request.attribution_options
    assert (options.occlusion_patch, options.occlusion_stride) == (8, 4)
    run = wait_run(qtbot, window)
    qtbot.waitUntil(lambda: cam.choice()[0] is not None and cam.choice()[0].run_id == run.run_id,
                    timeout=TIMEOUT)
    shown = cam.choice()[0]
    assert shown.method == "occlusion" and shown.cam.max() <= 1.0
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("gradcam"))
    assert not cam.occlusion.isVisible() and cam.controls.layer_combo.isVisible()
    assert window.control.last_request.attribution_options is None
