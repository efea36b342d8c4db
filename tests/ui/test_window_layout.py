"""The default layout at the window's default size: controls that appear fit the space their
pane has (the docks around it keep their widths), and no control is squashed to nothing."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication, QLabel
from test_main_window import TIMEOUT, TINY, wait_run, write_png

from inspector.ui.shell import docks
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.shell.docks import DEFAULT_SIZE
from inspector.ui.window.main_window import MainWindow

# The window's default size, and the screen of the walk that found these (1440x900, Xvfb).
SIZES = sorted({DEFAULT_SIZE, (1440, 900)})
WALK_SCREEN = QRect(0, 0, 1440, 900)


@pytest.fixture
def walk_screen(monkeypatch):
    """The room the window has on its screen is the walk's 1440x900 (the offscreen platform's
    one screen is 800x800, narrower than the default window)."""
    monkeypatch.setattr(docks, "screen_room", lambda *_args: QRect(WALK_SCREEN))


@pytest.fixture
def window_at(make_window, qtbot, tmp_path):
    """A window first shown at `size` (the default layout is sized then), a model (the tiny
    one) loaded and an image run."""
    def make(size, model=TINY) -> MainWindow:
        window = make_window(model, [write_png(tmp_path / "x.png")], size=size)
        wait_run(qtbot, window)
        return window

    return make


def opened(qtbot, settings: str) -> MainWindow:
    """The window as a start with `settings` shows it: views built, nothing loaded."""
    w = MainWindow(AppSettings.in_file(settings))
    qtbot.addWidget(w)
    w.build_views()
    w.show()
    qtbot.waitExposed(w)
    settle(qtbot)
    return w


def settle(qtbot) -> None:
    """Let Qt carry out the layout requests a change posted (dock areas relayout later)."""
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)


def widths(window) -> dict[str, int]:
    return {key: dock.width() for key, dock in window.docks.items() if dock.isVisible()
            and not dock.visibleRegion().isEmpty()}


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_choosing_occlusion_and_back_leaves_every_dock_as_wide_as_it_was(window_at, qtbot, size):
    """Occlusion's patch and stride boxes widened the CAM pane, the right-hand docks with it,
    and the Modules dock shrank to about 290 pixels (its statistics columns out of sight);
    choosing Grad-CAM again did not give the width back, and the layout was saved so."""
    window = window_at(size)
    cam = window.views["cam"]
    settle(qtbot)
    before = widths(window)
    assert {"tree", "cam", "images", "activation"} <= set(before)
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("occlusion"))
    settle(qtbot)
    assert cam.occlusion.isVisible()
    assert cam.minimumSizeHint().width() <= cam.width()  # the controls fit the pane
    assert widths(window) == before
    run = wait_run(qtbot, window)
    assert window.control.last_request.attributions == ("occlusion",), run
    cam.controls.method_combo.setCurrentIndex(cam.controls.method_combo.findData("gradcam"))
    settle(qtbot)
    assert not cam.occlusion.isVisible() and cam.controls.layer_combo.isVisible()
    assert cam.minimumSizeHint().width() <= cam.width()
    assert widths(window) == before
    wait_run(qtbot, window)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_overlay_opacity_slider_is_a_slider_at_the_default_layout(window_at, qtbot, size):
    """It was squashed to its handle (15 pixels) and read as an unchecked checkbox."""
    window = window_at(size)
    cam = window.views["cam"]
    settle(qtbot)
    slider = cam.controls.alpha_slider
    assert slider.isVisible() and slider.width() >= 80, slider.width()
    assert "opacity" in slider.toolTip().lower()
    labels = [w for w in cam.findChildren(QLabel) if w.isVisible() and w.text() == "opacity"]
    assert labels and labels[0].geometry().right() < slider.geometry().left()
    # The percentage beside it does not widen the row when it reaches 100%.
    row = cam.minimumSizeHint().width()
    slider.setValue(100)
    assert cam.controls.alpha_label.text() == "100%" and cam.minimumSizeHint().width() == row



def test_a_layout_saved_while_occlusion_squeezed_the_tree_is_not_restored(qtbot, tmp_path,
                                                                           walk_screen):
    """Layouts saved by the versions whose Occlusion controls squeezed the Modules dock (their
    layout version, 3) kept it squeezed at every later start: they are dropped once; a layout
    saved now is restored. (Seen by the tab in front, which the default sizes do not touch.)"""
    path = str(tmp_path / "settings.ini")

    def window() -> MainWindow:
        return opened(qtbot, path)

    def in_front(w: MainWindow, key: str) -> bool:
        return not w.docks[key].widget().visibleRegion().isEmpty()

    first = window()
    assert in_front(first, "activation")  # the default
    first.docks["gradient"].raise_()
    settle(qtbot)
    assert in_front(first, "gradient")
    stored = AppSettings.in_file(path)
    stored.qs.setValue("window/geometry", first.saveGeometry())
    stored.qs.setValue("window/state", first.saveState(3))  # as those versions saved it
    stored.sync()
    second = window()
    assert in_front(second, "activation")
    first.saved.save()  # this version's layout
    third = window()
    assert in_front(third, "gradient")


def test_each_tab_group_has_one_tab_bar_in_view(window_at, qtbot):
    """Qt made a second "Predictions | Dataset" bar where the group first sat, over the
    status bar; only the bar along the group's current dock stays shown."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTabBar

    window = window_at(DEFAULT_SIZE)
    settle(qtbot)
    bars = [b for b in window.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly)
            if b.isVisible() and b.count() > 0]
    groups: dict[tuple, int] = {}
    for bar in bars:
        tabs = tuple(bar.tabText(i) for i in range(bar.count()))
        groups[tabs] = groups.get(tabs, 0) + 1
    assert ("Predictions", "Dataset") in groups, groups
    assert all(n == 1 for n in groups.values()), groups
    status = window.statusBar().geometry()
    assert not any(b.geometry().intersects(status) for b in bars)


def test_module_and_type_columns_fit_each_model_until_the_user_sizes_them(window_at, qtbot):
    """A small model's names are shown whole and its statistics stay in view; a column the
    user dragged keeps its width when another model loads."""
    from PySide6.QtGui import QFontMetrics

    from inspector.ui.module_tree.cells import COL_HEALTH, COL_NAME, COL_TYPE
    from inspector.ui.module_tree.widget import CELL_PADDING

    window = window_at(DEFAULT_SIZE)
    tree = window.tree
    header = tree.view.header()
    metrics = QFontMetrics(tree.view.font())
    infos = list(window.control.session.tree.modules.values())
    widest_type = max(metrics.horizontalAdvance(i.type_name) for i in infos)
    assert widest_type <= header.sectionSize(COL_TYPE) <= widest_type + 2 * CELL_PADDING
    bold = tree.view.font()
    bold.setBold(True)
    indent = tree.view.indentation()
    widest_name = max((i.depth + 1) * indent + CELL_PADDING + (
        QFontMetrics(bold).horizontalAdvance(window.model_name) if i.name == ""
        else metrics.horizontalAdvance(i.name.rsplit(".", 1)[-1])) for i in infos)
    assert widest_name <= header.sectionSize(COL_NAME) <= widest_name + CELL_PADDING
    # Fitted to the tiny model, not to a resnet's names: its statistics are all in view.
    health_end = header.sectionPosition(COL_HEALTH) + header.sectionSize(COL_HEALTH)
    assert health_end <= tree.view.viewport().width(), (health_end, tree.view.viewport().width())
    header.resizeSection(COL_NAME, 333)  # the user drags it
    generation = window._model_generation
    window.control.load_model(window.control.make_spec(name="demo_shapes"))
    qtbot.waitUntil(lambda: window._model_generation > generation, timeout=TIMEOUT)
    assert header.sectionSize(COL_NAME) == 333


# -- what a layout the attention readout had broken left behind --------------------------------


@pytest.fixture
def vit_12_heads(tmp_path):
    """A ViT with as many heads and blocks as vit_b_16 (small, random weights)."""
    from tests.attention_models import vit_factory

    factory = tmp_path / "vit12.py"
    factory.write_text(vit_factory(layers=12, heads=12))
    return {"name": None, "factory": f"{factory}:build"}


def test_a_long_attention_readout_neither_widens_the_window_nor_squeezes_a_dock(
        window_at, qtbot, vit_12_heads):
    """On vit_b_16 the line "patch (3, 3): mean over heads … per head: …" (12 values) set the
    Attention dock's minimum width: the Modules dock shrank to about 60 pixels and the window
    grew past the screen. The line is elided and the tooltip has all of it."""
    window = window_at((1440, 900), vit_12_heads)
    window.docks["attention"].raise_()
    view = window.views["attention"]
    qtbot.waitUntil(lambda: view.maps is not None and view.isVisible(), timeout=TIMEOUT)
    wait_run(qtbot, window)
    settle(qtbot)
    before = widths(window)
    assert {"tree", "attention", "images", "cam"} <= set(before), before
    # The mouse over patch (1, 2) of the large map: the fused value and the 12 heads'.
    view._hover(view.box.mapViewToScene(view.box.viewRect().center()))
    settle(qtbot)
    text = view.hover_label.text()
    assert "per head" in text and len(text.split("per head: ")[1].split(", ")) == 12, text
    assert window.width() == 1440
    assert widths(window) == before
    assert view.hover_label.elided, "the 12 values fit: the test no longer tests elision"
    assert text in view.hover_label.toolTip()
    assert view.hover_label.shown_text().endswith("\u2026")


def test_reset_layout_brings_back_the_default_window_and_docks(window_at, qtbot, walk_screen):
    """Reset layout restored the dock state taken before the window was first shown: a window
    grown to 1493 pixels stayed so, and so did the squeezed Modules dock."""
    window = window_at((1440, 900))
    settle(qtbot)
    default = widths(window)
    window.resize(1493, 900)
    window.resizeDocks([window.docks["tree"], window.docks["images"]], [200, 1200],
                       Qt.Orientation.Horizontal)
    window.docks["cam"].setFloating(True)
    settle(qtbot)
    assert window.docks["tree"].width() < default["tree"] - 100  # the layout is broken
    window.reset_layout()  # View ▸ Reset layout
    settle(qtbot)
    assert window.width() == 1440 and not window.docks["cam"].isFloating()
    assert widths(window) == default


def test_a_saved_layout_wider_than_the_screen_is_not_restored(qtbot, tmp_path, walk_screen):
    """The window the readout had grown to 1493 pixels saved its squeezed docks, restored at
    every start since: it is dropped for the default layout, and the status bar says why."""
    path = str(tmp_path / "settings.ini")

    def window() -> MainWindow:
        return opened(qtbot, path)

    first = window()
    default = widths(first)
    first.resize(1493, 900)
    first.resizeDocks([first.docks["tree"], first.docks["images"]], [200, 1200],
                      Qt.Orientation.Horizontal)
    settle(qtbot)
    assert first.docks["tree"].width() < default["tree"] - 100
    first.saved.save()
    second = window()
    assert second.width() == 1440 and widths(second) == default
    message = second.reporter.label.text()
    assert "wider than the screen (1493 pixels on 1440)" in message, message
    assert second.reporter.count == 0  # news, not a failure
    # (A layout that fits the screen is restored: the Occlusion test above.)
