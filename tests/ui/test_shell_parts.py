"""The window's parts on their own: module tree model, image pane, model dialog,
error reporter, settings and command line. Fed by hand-made frames and trees where that is
enough; the full window with the real engine is in test_main_window.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QMainWindow

from inspector.core.records.frames import ActivationFrame, GradientFrame, TensorStats
from inspector.core.records.kinds import GRAD_INPUT, GRAD_OUTPUT, INPUT, OUTPUT


def stats(values) -> TensorStats:
    x = np.asarray(values, dtype=np.float64).reshape(1, -1, 1)
    channel = x[0].reshape(x.shape[1], -1)
    finite = np.isfinite(x)
    return TensorStats(
        mean=float(np.nanmean(x)), std=float(np.nanstd(x)), min=float(np.nanmin(x)),
        max=float(np.nanmax(x)), zero_fraction=float((x == 0).mean()), numel=x.size,
        channel_mean=channel.mean(1), channel_std=channel.std(1), channel_min=channel.min(1),
        channel_max=channel.max(1), channel_zero_fraction=(channel == 0).mean(1),
        nonfinite=int((~finite).sum()),
    )


def activation(run_id, module, values, kind=OUTPUT, call=0):
    return ActivationFrame(run_id, module, call, kind, "", (1, len(values)), "float32",
                           stats(values))


@pytest.fixture
def tree():
    """A small ModuleTree with shapes and hazards, from core's probe."""
    import torch
    from torch import nn

    from inspector.core.models.tree import build_tree

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True))
            self.shared = nn.Identity()
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            x = self.shared(self.shared(self.body(x)))
            return self.head(x.mean((2, 3)))

    return build_tree(Net().eval(), torch.zeros(1, 3, 8, 8))


# -- module tree ------------------------------------------------------------------------------


def test_tree_model_rows_shapes_hazards_and_default_kinds(qtbot, tree):
    from inspector.ui.module_tree.cells import COL_NAME, COL_SHAPE, COL_TYPE, COLUMN_OF_KIND
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    widget = ModuleTreeWidget()
    qtbot.addWidget(widget)
    widget.set_tree(tree, "net")
    model = widget.model
    root = model.index(0, 0)
    assert model.rowCount() == 1 and model.data(root) == "net"
    assert [model.data(model.index(r, 0, root)) for r in range(model.rowCount(root))] == [
        "body", "shared", "head"]
    conv = model.index_of("body.0")
    assert model.parent(conv) == model.index_of("body")
    assert model.data(model.index_of("body.0", COL_TYPE)) == "Conv2d"
    assert model.data(model.index_of("body.0", COL_SHAPE)) == "4×6×6"
    # Hazards: an icon and a tooltip in words.
    assert model.data(model.index_of("shared", COL_NAME), Qt.ItemDataRole.DecorationRole)
    # Each hazard once, in core.models.tree's words (not "in-place: modifies its input in place").
    def hazard_lines(name):
        tip = model.data(model.index_of(name), Qt.ItemDataRole.ToolTipRole)
        return [line for line in tip.split("<br>") if line.startswith("•")]

    assert hazard_lines("shared") == ["• called more than once per forward: one capture per call"]
    assert hazard_lines("body.1") == ["• modifies its input in place"]
    # Hooks: inputs, outputs and output gradients of every module, the model itself too.
    assert model.kinds[""] == model.kinds["head"] == {INPUT, OUTPUT, GRAD_OUTPUT}
    grad_in = model.index_of("head", COLUMN_OF_KIND[GRAD_INPUT])
    assert model.data(grad_in, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert model.flags(grad_in) & Qt.ItemFlag.ItemIsUserCheckable


def test_tree_columns_fit_resnet18_and_common_types_and_tooltips_hold_the_rest(qtbot):
    """At their default widths the Module and Type columns hold every name and type of
    resnet18, expanded all the way (no "BatchNor…", no "down…"), and AdaptiveAvgPool2d; a
    cell that is elided anyway has its whole text in its tooltip."""
    import torch
    import torchvision

    from inspector.core.models.tree import build_tree
    from inspector.ui.module_tree.cells import COL_NAME, COL_TYPE
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    widget = ModuleTreeWidget()
    qtbot.addWidget(widget)
    widget.resize(600, 3000)  # every row on screen: Qt sizes columns by the rows it shows
    widget.show()
    widget.set_tree(build_tree(torchvision.models.resnet18().eval(),
                               torch.zeros(1, 3, 64, 64)), "resnet18")
    widget.view.expandAll()
    header = widget.view.header()
    for col in (COL_NAME, COL_TYPE):
        assert widget.view.sizeHintForColumn(col) <= header.sectionSize(col), col
    metrics = widget.view.fontMetrics()
    assert metrics.horizontalAdvance("AdaptiveAvgPool2d") < header.sectionSize(COL_TYPE)
    model = widget.model
    index = model.index_of("layer2.0.downsample.1", COL_TYPE)
    assert model.data(index, Qt.ItemDataRole.ToolTipRole) == "BatchNorm2d"
    name_tip = model.data(model.index_of("layer2.0.downsample"), Qt.ItemDataRole.ToolTipRole)
    assert name_tip.startswith("<b>layer2.0.downsample</b>")


def test_tree_checkbox_and_subtree_actions_change_the_capture(qtbot, tree):
    from inspector.ui.module_tree.cells import COLUMN_OF_KIND
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    widget = ModuleTreeWidget()
    qtbot.addWidget(widget)
    widget.set_tree(tree, "net")
    model = widget.model
    with qtbot.waitSignal(model.captureChanged):
        model.setData(model.index_of("head", COLUMN_OF_KIND[OUTPUT]),
                      Qt.CheckState.Unchecked.value, Qt.ItemDataRole.CheckStateRole)
    assert OUTPUT not in model.capture_modules()["head"]
    model.set_kind(model.descendants("body"), GRAD_INPUT, True)
    assert all(GRAD_INPUT in model.kinds[n] for n in ("body", "body.0", "body.1"))
    assert GRAD_INPUT not in model.kinds["shared"]
    menu = widget._build_menu("body")  # the context menu offers the same, in words
    texts = [a.text() for a in menu.actions()]
    assert "Input gradient" in texts and "Use as the CAM layer" in texts


def test_tree_statistics_badges_and_stale_rows(qtbot, tree):
    from inspector.ui.module_tree.cells import COL_HEALTH, COL_MEAN, COL_ZEROS
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    widget = ModuleTreeWidget()
    qtbot.addWidget(widget)
    widget.set_tree(tree, "net")
    model = widget.model
    widget.model.store.put(activation(1, "body.0", [1.0, -1.0, 3.0, 1.0]))
    widget.model.store.put(activation(1, "body.1", [0.0, 0.0, 0.0, 0.0]))
    widget.model.store.put(activation(1, "head", [1.0, float("nan")]))
    widget.model.store.put(GradientFrame(1, "shared", 0, GRAD_OUTPUT, "", (1, 2), "float32",
                                      stats([5e3, 1.0])))
    widget.model.store.put(activation(1, "body.0", [9.0, 9.0], kind=INPUT))  # not a column
    with qtbot.waitSignal(model.dataChanged):
        model.flush(force=True)
    assert model.data(model.index_of("body.0", COL_MEAN)) == "1"
    assert model.data(model.index_of("body.1", COL_ZEROS)) == "100 %"
    assert model.data(model.index_of("body.1", COL_HEALTH)) == "dead"
    assert model.data(model.index_of("head", COL_HEALTH)) == "NaN/Inf"
    assert model.data(model.index_of("shared", COL_HEALTH)) == "∇ exploding"
    assert model.data(model.index_of("body.0", COL_HEALTH)) == ""
    badge = model.data(model.index_of("body.1", COL_HEALTH), Qt.ItemDataRole.BackgroundRole)
    assert badge is not None
    # A later run that did not capture body.1: its numbers stay, shown as stale (grey).
    widget.model.store.put(activation(2, "body.0", [2.0, 2.0]))
    stale = model.data(model.index_of("body.1", COL_MEAN), Qt.ItemDataRole.ForegroundRole)
    fresh = model.data(model.index_of("body.0", COL_MEAN), Qt.ItemDataRole.ForegroundRole)
    assert stale is not None and fresh is None
    assert "earlier run" in model.data(model.index_of("body.1", COL_MEAN),
                                       Qt.ItemDataRole.ToolTipRole)


def test_tree_filter_keeps_matches_and_their_parents(qtbot, tree):
    from inspector.ui.module_tree.widget import ModuleTreeWidget

    widget = ModuleTreeWidget()
    qtbot.addWidget(widget)
    widget.set_tree(tree, "net")

    def shown() -> list[str]:
        return sorted(n for n in tree.modules if n and not widget.is_filtered_out(n))

    widget.filter.setText("relu")  # by type, case-insensitive
    assert shown() == ["body", "body.1"]  # body stays, as the parent of a match
    widget.filter.setText("HEAD")  # by name
    assert shown() == ["head"]
    widget.set_tree(tree, "net")  # a new model keeps the filter
    assert shown() == ["head"]
    with qtbot.waitSignal(widget.moduleSelected) as signal:
        assert widget.select_module("body.0")  # clears a filter that hides it
    assert signal.args == ["body.0"] and widget.filter.text() == ""
    assert shown() == ["body", "body.0", "body.1", "head", "shared"]


def test_the_startup_freezer_freezes_once_per_model_and_lets_old_models_go():
    import gc
    import weakref

    import torch

    from inspector.ui.window.gc_freeze import StartupFreezer

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 1, 1)
            self.me = self  # a reference cycle: only the cycle collector can free it

    old = Model()
    gone = weakref.ref(old)
    freezer = StartupFreezer()
    try:
        assert freezer.after_run(1)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert not freezer.after_run(1)  # later runs of the same model: nothing
        assert gc.get_freeze_count() == frozen
        del old  # the user loads another model; the old one sits frozen in its cycle
        gc.collect()
        assert gone() is not None  # frozen objects are not collected...
        assert freezer.after_run(2)
        assert gone() is None  # ...until the next model's freeze gives them back
    finally:
        gc.unfreeze()

# -- image pane -----------------------------------------------------------------------------------


def test_image_pane_folders_paste_steps_and_the_two_views(qtbot, tmp_path):
    from inspector.ui.image.pane import MODEL_INPUT, ImagePane

    pane = ImagePane()
    qtbot.addWidget(pane)
    pane.show()
    folder = tmp_path / "imgs"
    (folder / "sub").mkdir(parents=True)
    for name in ("img10.png", "img2.png", "sub/img1.png"):
        Image.new("RGB", (40, 30), (200, 10, 10)).save(folder / name)
    (folder / "readme.md").write_text("x")
    selected = []
    pane.imageSelected.connect(selected.append)
    assert pane.add_paths([folder]) == 3
    qtbot.waitUntil(lambda: not pane.list.loading)
    assert [e.name for e in pane.list.entries()] == ["img2.png", "img10.png", "img1.png"]
    assert selected[0].name == "img2.png"
    assert pane.step(1) and pane.current().name == "img10.png"
    assert pane.step(1) and not pane.step(1)  # stops at the end
    original = pane.canvas.image
    assert original is not None and original.width() == 40

    qimage = QImage(16, 8, QImage.Format.Format_RGB32)
    qimage.fill(Qt.GlobalColor.green)
    entry = pane.list.add_qimage(qimage)
    assert entry.path is None and entry.image.size == (16, 8)
    assert pane.current() is entry and entry.source is entry.image
    assert entry.image.getpixel((3, 3)) == (0, 255, 0)
    # Names the list or the caption may cut off are whole in their tooltips.
    assert pane.list.currentItem().toolTip().startswith(f"{entry.name}, pasted")
    assert pane.caption.toolTip() == f"{entry.name}\n16 × 8 pixels"

    pane.set_mode(MODEL_INPUT)
    assert pane.canvas.image is None  # no run yet for this image
    pane.set_model_input(np.full((12, 12, 3), 128, np.uint8))
    assert pane.canvas.image.width() == 12
    pane.toggle_mode()
    assert pane.canvas.image.width() == 16


def test_image_pane_reports_bad_and_unknown_files_together(qtbot, tmp_path):
    from inspector.ui.image.pane import ImagePane

    pane = ImagePane()
    qtbot.addWidget(pane)
    good = tmp_path / "good.png"
    Image.new("RGB", (10, 10)).save(good)
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("hello")
    with qtbot.waitSignal(pane.failed) as signal:
        pane.add_paths([good, tmp_path / "empty.png", tmp_path / "notes.txt",
                        tmp_path / "missing.jpg"])
    message, details = signal.args
    assert "and 2 more" in message
    assert "empty.png" in details and "notes.txt" in details and "missing.jpg" in details
    assert [e.name for e in pane.list.entries()] == ["good.png"]


# -- model dialog -----------------------------------------------------------------------------------


def test_model_dialog_search_and_the_pickle_needs_trust(qtbot, tmp_path):
    from inspector.ui.open_model import dialog as model_dialog
    from inspector.ui.shell.app_settings import AppSettings

    settings = AppSettings.in_file(str(tmp_path / "s.ini"))
    dialog = model_dialog.ModelDialog(catalog=["demo_shapes", "resnet18", "resnet50", "vit_b_16"],
                                      devices=["cpu"], settings=settings)
    qtbot.addWidget(dialog)
    open_button = dialog.buttons.button(dialog.buttons.StandardButton.Open)
    dialog.search.setText("vit")
    assert dialog._current_catalog_name() == "vit_b_16"
    assert "random weights" in dialog.catalog.currentItem().text()
    assert dialog.spec().name == "vit_b_16" and dialog.spec().device is None

    pickled = tmp_path / "whole_model.pt"
    pickled.write_bytes(b"whatever")
    dialog.tabs.setCurrentIndex(model_dialog.PICKLE)
    dialog.pickle_file.edit.setText(str(pickled))
    assert not open_button.isEnabled()
    assert "trust" in open_button.toolTip()
    dialog.trust.setChecked(True)
    assert open_button.isEnabled()
    spec = dialog.spec()
    assert spec.pickle == str(pickled) and spec.trust_pickle
    assert model_dialog.spec_label(spec) == "whole_model.pt (trusted pickle)"

    dialog.tabs.setCurrentIndex(model_dialog.FACTORY)
    dialog.factory_file.edit.setText(str(pickled))
    dialog.factory_function.setText("not an identifier")
    assert not open_button.isEnabled()
    dialog.factory_function.setText("make")
    assert dialog.spec().factory == f"{pickled}:make"
    dialog.accept()
    assert settings.value("model_dialog/tab", 0) == model_dialog.FACTORY


def test_the_model_dialog_reopens_on_its_last_tab_timm_and_hugging_face_too(qtbot, tmp_path):
    # The stored tab was capped at 3 (from when the dialog had four tabs): a dialog last
    # closed on the timm or Hugging Face tab reopened on the catalog, with a note.
    from inspector.ui.open_model import dialog as model_dialog
    from inspector.ui.shell.app_settings import AppSettings

    settings = AppSettings.in_file(str(tmp_path / "s.ini"))
    for tab in (model_dialog.TIMM, model_dialog.HF, model_dialog.PICKLE):
        settings.set_value("model_dialog/tab", tab)
        dialog = model_dialog.ModelDialog(catalog=["demo_shapes"], devices=["cpu"],
                                          settings=settings)
        qtbot.addWidget(dialog)
        assert dialog.tabs.currentIndex() == tab, model_dialog.TAB_NAMES[tab]
    assert settings.problems == []
    settings.set_value("model_dialog/tab", len(model_dialog.TAB_NAMES))
    dialog = model_dialog.ModelDialog(catalog=["demo_shapes"], devices=["cpu"], settings=settings)
    qtbot.addWidget(dialog)
    assert dialog.tabs.currentIndex() == model_dialog.CATALOG and len(settings.problems) == 1


# -- errors, settings, command line ----------------------------------------------------------------


def test_error_reporter_status_line_and_details(qtbot):
    from inspector.ui.window.errors import ErrorReporter

    window = QMainWindow()
    qtbot.addWidget(window)
    reporter = ErrorReporter(window.statusBar(), window)
    window.show()
    reporter.info("Loaded resnet18")
    assert not reporter.details_button.isVisible()
    reporter.report("Could not open x.png:\n  file is empty", "Traceback ...")
    assert reporter.label.text() == "Could not open x.png: file is empty"
    assert reporter.details_button.isVisible()
    reporter.show_details()
    assert reporter._dialog.isVisible()
    assert reporter._dialog.details.toPlainText() == "Traceback ..."
    with qtbot.waitSignal(reporter.reported):
        reporter.report_from_any_thread("from a worker", "")
    assert reporter.last_message == "from a worker"
    reporter.stop()


def test_a_later_success_clears_the_failure_from_the_status_line(qtbot):
    """A failure stays while it is fresh (ERROR_HOLD_S) even when a run succeeds just after
    it, then goes; one that was on screen longer goes at once. Its details stay a click
    away until they were read."""
    from inspector.ui.window.errors import ERROR_HOLD_S, ErrorReporter

    window = QMainWindow()
    qtbot.addWidget(window)
    reporter = ErrorReporter(window.statusBar(), window)
    window.show()
    reporter.report("Could not open x.png: file is empty", "Traceback ...")
    reporter.resolved()  # a run finished a moment later
    assert reporter.showing_error() and reporter.label.text().startswith("Could not open")
    reporter._clear_info()  # what the hold timer calls when ERROR_HOLD_S is over
    assert not reporter.showing_error()
    assert reporter.label.text() == "" and reporter.label.toolTip() == ""
    assert reporter.details_button.isVisible()
    assert reporter.details_button.text() == "Last error…"

    reporter.report("Could not load model: no such file", "")
    reporter._error_time -= ERROR_HOLD_S + 1  # on screen longer than the hold
    assert reporter.showing_error()
    reporter.resolved()
    assert not reporter.showing_error() and reporter.label.text() == ""
    reporter.show_details()  # read: the button goes
    assert not reporter.details_button.isVisible()
    reporter.stop()


def test_a_hover_tip_is_not_drawn_over_the_details_button(qtbot):
    """A toolbar's status tip shown while a failure came (or news with an unread one) had
    the red button drawn over its text; the button waits until the tip goes."""
    from inspector.ui.window.errors import ErrorReporter

    window = QMainWindow()
    qtbot.addWidget(window)
    reporter = ErrorReporter(window.statusBar(), window)
    window.show()
    window.statusBar().showMessage("Run the current image again and keep it as run A")
    reporter.report("Could not open x.png: file is empty", "Traceback ...")
    assert not reporter.details_button.isVisible()
    window.statusBar().clearMessage()
    assert reporter.details_button.isVisible()
    window.statusBar().showMessage("a tip")
    assert not reporter.details_button.isVisible()  # Qt hides the bar's widgets for a tip
    reporter._error_time -= 100  # an old failure: news replaces it, its button stays
    reporter.info("Loaded resnet18")
    window.statusBar().clearMessage()
    assert reporter.details_button.isVisible() and reporter.details_button.text() == "Last error…"
    window.statusBar().showMessage("a tip")
    reporter.show_details()  # read: the button goes, and does not come back with the tip
    window.statusBar().clearMessage()
    assert not reporter.details_button.isVisible()
    reporter.stop()


def test_status_labels_elide_long_names_and_keep_them_whole_in_their_tooltips(qtbot):
    """A long model, weights file or image name is elided in the middle, so the message at
    the left keeps room; its tooltip has the whole text. Short ones are left as they are."""
    from inspector.core.records.frames import ModelLoaded, RunFinished
    from inspector.ui.shell.status_panel import LABEL_MAX, StatusPanel

    window = QMainWindow()
    qtbot.addWidget(window)
    status = StatusPanel(window.statusBar())
    window.show()
    name = "vit_base_patch16_224.augreg2_in21k_ft_in1k_with_a_name_longer_than_any_bar"
    source = "/data/checkpoints/" + "finetuned_on_the_whole_of_our_photo_archive_" * 2 + ".pth"
    status.show_model(ModelLoaded(name, f"{name} (from a file)", True, "cpu", None,
                                  source=source))
    for label, whole in ((status.model, name), (status.weights, f"weights from {source[18:]}")):
        assert "\u2026" in label.text() and label.text() != whole
        assert label.fontMetrics().horizontalAdvance(label.text()) <= LABEL_MAX
        assert label.toolTip().startswith(whole)
    assert source in status.weights.toolTip() and "(from a file)" in status.model.toolTip()
    image = "holiday_photo_" * 8 + ".jpg"
    status.show_running(image)
    assert "\u2026" in status.run.text() and image in status.run.toolTip()
    status.show_run(RunFinished(1, "ok", timings={"total": 0.05, "forward": 0.03}))
    assert status.run.text() == "last run 50 ms"  # short: whole, with the timings as its tip
    assert status.run.toolTip() == "total 50.0 ms, forward 30.0 ms"


def test_settings_round_trip(qtbot, tmp_path):
    from inspector.ui.shell.app_settings import MAX_RECENT, AppSettings

    settings = AppSettings.in_file(str(tmp_path / "s.ini"))
    for i in range(MAX_RECENT + 3):
        settings.add_recent_images([f"/img/{i}.png"])
    settings.add_recent_images(["/img/3.png"])
    settings.add_recent_model({"name": "resnet18", "device": None})
    settings.add_recent_model({"name": "demo_shapes", "device": "cpu"})
    settings.add_recent_model({"name": "resnet18", "device": None})
    settings.set_value("backward", False)
    settings.set_value("tab", 2)
    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(640, 480)
    settings.save_window(window)
    settings.sync()

    again = AppSettings.in_file(str(tmp_path / "s.ini"))
    images = again.recent_images()
    assert len(images) == MAX_RECENT and images[0] == "/img/3.png" and images.count("/img/3.png") == 1
    assert [m["name"] for m in again.recent_models()] == ["resnet18", "demo_shapes"]
    assert again.value("backward", True) is False and again.value("tab", 0) == 2
    other = QMainWindow()
    qtbot.addWidget(other)
    assert again.restore_window(other)
    assert other.size().width() == 640


def test_a_layout_saved_with_other_docks_is_not_restored(qtbot, tmp_path):
    """The docks' names are in the layout's version: four docks came with issues 24-27 and
    the hand-bumped version did not change, so the old layout was put back around them."""
    from PySide6.QtWidgets import QDockWidget

    from inspector.ui.shell.app_settings import AppSettings

    def window_with(*names: str) -> QMainWindow:
        window = QMainWindow()
        qtbot.addWidget(window)
        for name in names:
            dock = QDockWidget(name, window)
            dock.setObjectName(f"dock_{name}")
            window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        return window

    settings = AppSettings.in_file(str(tmp_path / "s.ini"))
    saved = window_with("tree", "cam")
    saved.resizeDocks([saved.findChild(QDockWidget, "dock_cam")], [111], Qt.Orientation.Vertical)
    settings.save_window(saved)
    settings.sync()
    assert AppSettings.in_file(str(tmp_path / "s.ini")).restore_window(window_with("cam", "tree"))
    assert not AppSettings.in_file(str(tmp_path / "s.ini")).restore_window(
        window_with("tree", "cam", "faithfulness"))
    # A dock made later, on demand (Compare with model…), does not change the version.
    later = window_with("tree", "cam")
    again = AppSettings.in_file(str(tmp_path / "s.ini"))
    assert again.restore_window(later)
    extra = QDockWidget("Model comparison", later)
    extra.setObjectName("dock_compare_models")
    later.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, extra)
    again.save_window(later)
    again.sync()
    assert AppSettings.in_file(str(tmp_path / "s.ini")).restore_window(window_with("tree", "cam"))


def test_command_line_arguments():
    from inspector.app import model_fields, parse_args, startup_images

    args = parse_args(["a.png", "folder", "--model", "resnet50", "--device", "cpu"])
    assert args.images == ["a.png", "folder"]
    assert model_fields(args) == {"name": "resnet50", "device": "cpu"}
    assert startup_images(args) == ["a.png", "folder"]
    args = parse_args(["--model", "resnet18", "--weights", "w.pth"])
    assert model_fields(args) == {"name": "resnet18", "checkpoint": "w.pth"}
    assert startup_images(args) == []
    args = parse_args(["--model", "nets/mine.py:build"])
    assert model_fields(args) == {"name": None, "factory": "nets/mine.py:build"}
    plain = parse_args([])
    assert model_fields(plain) == {}  # the demo model, the ModelSpec default
    assert all(Path(p).suffix == ".png" for p in startup_images(plain))  # its samples, if any
