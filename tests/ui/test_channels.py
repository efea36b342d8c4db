"""Every channel of a layer: paging, sorting, jumping, the absolute channel under the mouse,
run A / B / B - A, the "edited" mark, saving a view as PNG and copying a plot."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QGuiApplication
from view_frames import (
    act,
    copy_action,
    grad,
    make_stats,
    mosaic_tile,
    paint_pending,
    shown,
    started,
)

from inspector.core.records.frames import RunStarted
from inspector.ui.export.save_view import NothingToSave, save_view_png
from inspector.ui.views import colormaps
from inspector.ui.views.activation_view import ActivationView
from inspector.ui.views.channel_bar import SORT_CHANGE, SORT_MAX, SORT_MEAN
from inspector.ui.views.gradient_view import GradientView
from inspector.ui.views.mosaic import PAGE_SIZE, ChannelPages, sorted_order
from inspector.ui.views.tensor_panel import MOSAIC, ZOOM
from inspector.ui.views.tensor_view import SHOW_A, SHOW_B, SHOW_DIFF

RNG = np.random.default_rng(7)


def layer(channels=512, side=7, run=1, data=None):
    """A frame of a (channels, side, side) output whose channel k holds about k / 100."""
    if data is None:
        data = (np.arange(channels, dtype=np.float32)[:, None, None] / 100
                + RNG.normal(scale=0.01, size=(channels, side, side)).astype(np.float32))
    return act(run, "layer4", data), data


def view_with(qtbot, frame):
    view = shown(qtbot, ActivationView())
    view.set_module("layer4")
    view.store.put(frame)
    return view


def tile_center(panel, k: int) -> QPointF:
    """The widget position of tile k of the page shown."""
    y0, x0 = panel.mosaic_view.mosaic.origin(k)
    scene = panel.mosaic_view.item.mapToScene(QPointF(x0 + panel.mosaic_view.mosaic.width / 2,
                                                 y0 + panel.mosaic_view.mosaic.height / 2))
    return QPointF(panel.mosaic_view.mapFromScene(scene))


def channel_under(panel, pos: QPointF) -> int | None:
    """The layer's channel that a hover or a click at widget position `pos` names."""
    hit = panel.mosaic_view.locate_scene(panel.mosaic_view.mapToScene(pos.toPoint()))
    return None if hit is None else hit[0]


def numbers_shown(numbers) -> list[str]:
    """The channel numbers drawn over the tiles, in tile order."""
    return [item.textItem.toPlainText() for item in numbers.items if item.isVisible()]


def show(view, what: str) -> None:
    """Choose B, A or B - A in a tensor view's compare selector."""
    view.compare_combo.setCurrentIndex(view.compare_combo.findData(what))


# -- pages and order (no Qt) -----------------------------------------------------------------


def test_channel_pages_cut_an_order_into_pages():
    pages = ChannelPages(page_size=64)
    pages.set_order(np.arange(512))
    assert pages.page_count == 8 and pages.natural()
    pages.go(4)
    np.testing.assert_array_equal(pages.channels(), np.arange(256, 320))
    assert pages.page_of(300) == 4 and pages.page_of(600) is None
    pages.go(99)
    assert pages.page == 7
    pages.set_order(np.arange(10))  # a smaller layer: the page stays in range
    assert pages.page == 0 and pages.page_count == 1


def test_sorted_order_is_largest_first_with_nan_last_and_missing_keys_in_order():
    keys = np.array([0.5, np.nan, 2.0, 0.5, -1.0])
    np.testing.assert_array_equal(sorted_order(keys, 5), [2, 0, 3, 4, 1])
    np.testing.assert_array_equal(sorted_order(np.array([1.0, 3.0]), 4), [1, 0, 2, 3])
    np.testing.assert_array_equal(sorted_order(None, 3), [0, 1, 2])


# -- the panel ----------------------------------------------------------------------------------


def test_a_512_channel_layer_pages_to_channel_300_and_the_zoom_names_it_of_0_to_511(qtbot):
    frame, data = layer()
    view = view_with(qtbot, frame)
    panel = view.panel
    assert panel.mode == MOSAIC and panel.mosaic_view.mosaic.channels == PAGE_SIZE
    assert panel.channel_bar.page_label.text() == "0\u201363 (0\u2013511)"
    assert panel.channel_bar.page_label.toolTip().startswith("Page 1 of 8")
    for _ in range(4):
        panel.channel_bar.next_button.click()
    assert panel.channel_bar.page_label.text() == "256\u2013319 (0\u2013511)"
    assert panel.channel_bar.page_label.toolTip().startswith("Page 5 of 8")
    k = 300 - 256
    np.testing.assert_array_equal(panel.mosaic_view.channels, np.arange(256, 320))
    # The tile shows channel 300's values (scaled per channel), not the page's 44th of 64.
    lo, hi = data[300].min(), data[300].max()
    y0, x0 = panel.mosaic_view.mosaic.origin(k)
    np.testing.assert_allclose(panel.mosaic_view.item.image[y0:y0 + 7, x0:x0 + 7],
                               (data[300] - lo) / (hi - lo), atol=1e-5)
    pos = tile_center(panel, k)
    assert channel_under(panel, pos) == 300
    # What the edits' right-click menu reads (image coordinates of the mosaic) agrees.
    y0, x0 = panel.mosaic_view.mosaic.origin(k)
    assert panel.mosaic_view.mosaic.channel_at(x0 + 1, y0 + 1) == 300
    panel._mosaic_clicked(channel_under(panel, pos))
    assert panel.mode == ZOOM and panel.zoomed == 300
    assert panel.zoom_page.plot.titleLabel.text == "channel 300 (0\u2013511)"
    np.testing.assert_array_equal(panel.zoom_page.item.image, data[300])
    panel.channel_bar.next_button.click()  # in the zoom: the next channel in the mosaic's order
    assert panel.zoomed == 301
    panel.controls.back_button.click()
    assert panel.mode == MOSAIC and panel.pages_of_channels.page == 4
    panel.channel_bar.prev_button.click()
    assert panel.pages_of_channels.page == 3


def test_sort_by_mean_orders_the_tiles_by_channel_mean(qtbot):
    data = RNG.normal(size=(100, 4, 4)).astype(np.float32)
    frame, _ = layer(data=data)
    view = view_with(qtbot, frame)
    panel = view.panel
    panel.channel_bar.sort_combo.setCurrentIndex(panel.channel_bar.sort_combo.findData(SORT_MEAN))
    means = frame.stats.channel_mean
    order = np.argsort(-means, kind="stable")
    np.testing.assert_array_equal(panel.mosaic_view.channels, order[:PAGE_SIZE])
    assert np.all(np.diff(means[panel.mosaic_view.channels]) <= 0)
    # Tile 0 is the channel with the highest mean, and the position maps back to it.
    top = int(order[0])
    lo, hi = data[top].min(), data[top].max()
    np.testing.assert_allclose(mosaic_tile(panel.mosaic_view.mosaic, 0), (data[top] - lo) / (hi - lo),
                               atol=1e-5)
    assert channel_under(panel, tile_center(panel, 0)) == top
    panel.channel_bar.next_button.click()  # page 2 of the sorted order
    np.testing.assert_array_equal(panel.mosaic_view.channels, order[PAGE_SIZE:])
    assert channel_under(panel, tile_center(panel, 3)) == int(order[PAGE_SIZE + 3])
    panel.channel_bar.sort_combo.setCurrentIndex(panel.channel_bar.sort_combo.findData(SORT_MAX))
    maxes = frame.stats.channel_max
    assert maxes[panel.mosaic_view.channels[0]] >= maxes[panel.mosaic_view.channels[-1]]
    # "By change" needs a run A: not offered, and not kept when chosen without one.
    sort_combo = panel.channel_bar.sort_combo
    assert not sort_combo.model().item(sort_combo.findData(SORT_CHANGE)).isEnabled()


def test_sorted_tiles_carry_their_channel_numbers_and_every_place_names_them_alike(qtbot):
    """Sorted, a tile says which channel it is: its number in its corner (while the tile
    is big enough on screen to keep most of it visible) and in its tooltip; the zoom, the
    bar and "go to" use the same 0-based numbers with the layer's range, and a place in
    the sorted order is a 1-based rank."""
    data = np.random.default_rng(11).normal(size=(100, 4, 4)).astype(np.float32)
    frame, _ = layer(data=data)
    view = view_with(qtbot, frame)
    view.resize(1000, 1000)
    qtbot.waitUntil(lambda: view.panel.mosaic_view.width() > 800)
    panel = view.panel
    numbers = panel.mosaic_view.numbers
    assert numbers_shown(numbers) == [str(c) for c in range(PAGE_SIZE)]
    assert panel.channel_bar.page_label.text() == "0\u201363 (0\u201399)"
    panel.channel_bar.sort_combo.setCurrentIndex(panel.channel_bar.sort_combo.findData(SORT_MEAN))
    order = np.argsort(-frame.stats.channel_mean, kind="stable")
    assert numbers_shown(numbers) == [str(c) for c in order[:PAGE_SIZE]]
    assert numbers.visible and all(item.isVisible() for item in numbers.items[:PAGE_SIZE])
    assert panel.channel_bar.page_label.text() == "#1\u201364 of 100"
    top = int(order[0])
    scene = panel.mosaic_view.mapToScene(tile_center(panel, 0).toPoint())
    panel.mosaic_view.hover(scene)
    assert panel.mosaic_view.item.toolTip().startswith(f"channel {top} (0\u201399)")
    panel.channel_bar.next_button.click()
    assert numbers_shown(numbers) == [str(c) for c in order[PAGE_SIZE:]]
    assert not any(item.isVisible() for item in numbers.items[100 - PAGE_SIZE:])
    panel.channel_bar.prev_button.click()
    panel._mosaic_clicked(top)
    assert panel.zoom_page.plot.titleLabel.text == f"channel {top} (0\u201399)"
    assert panel.channel_bar.page_label.text() == "#1 of 100"
    jump = panel.channel_bar.jump_spin
    assert jump.value() == top and jump.suffix() == " (0\u201399)"
    panel.controls.back_button.click()
    # Tiles too small on screen for a number to leave them visible: no numbers.
    view.resize(260, 220)
    qtbot.waitUntil(lambda: not numbers.visible)
    assert not any(item.isVisible() for item in numbers.items)


def test_jump_to_a_channel_by_number_and_back_to_its_page(qtbot):
    frame, data = layer()
    view = view_with(qtbot, frame)
    panel = view.panel
    panel.channel_bar.jump_spin.setValue(300)  # typing 300 and Enter (no keyboard tracking)
    assert panel.mode == ZOOM and panel.zoomed == 300
    assert panel.zoom_page.plot.titleLabel.text == "channel 300 (0\u2013511)"
    panel.unzoom()
    assert panel.pages_of_channels.page == 300 // PAGE_SIZE
    assert 300 in panel.mosaic_view.channels
    # Another module starts at its first page.
    view.store.put(act(1, "conv", RNG.normal(size=(3, 4, 4))))
    view.set_module("conv")
    assert panel.pages_of_channels.page == 0 and panel.zoomed is None


def test_channel_at_is_none_off_the_tiles(qtbot):
    frame, _ = layer(channels=70, side=5)  # page 2 holds 6 tiles of a wider grid
    view = view_with(qtbot, frame)
    panel = view.panel
    panel.channel_bar.next_button.click()
    np.testing.assert_array_equal(panel.mosaic_view.channels, np.arange(64, 70))
    assert channel_under(panel, tile_center(panel, 5)) == 69
    assert channel_under(panel, QPointF(-50, -50)) is None


# -- A, B, B - A and "edited" ---------------------------------------------------------------------


def two_runs(view, a, b, edits=("layer4: zero channels 3",)):
    store = view.store
    store.put(started(1))
    store.put(act(1, "layer4", a))
    store.set_baseline(1)
    store.put(RunStarted(run_id=2, label="img.png", model="m", device="cpu", edits=edits))
    store.put(act(2, "layer4", b))


def test_b_minus_a_shows_the_difference_of_two_runs_previews_in_diverging_colours(qtbot):
    view = shown(qtbot, ActivationView())
    view.set_module("layer4")
    a = RNG.normal(size=(8, 5, 5)).astype(np.float32)
    b = a.copy()
    b[3] = 0.0  # the edit zeroed channel 3
    b[5] += 0.1
    two_runs(view, a, b)
    view.request_paint()  # as the compare actions ask when run A changes
    assert view.compare_combo.isVisible() and view.compare == SHOW_B
    assert view.compare_combo.itemText(2) == "after \u2212 before"
    assert view.edited_label.isVisible() and "zero channels 3" in view.edited_label.toolTip()
    panel = view.panel
    assert not panel.diverging
    show(view, SHOW_DIFF)
    assert panel.diverging
    assert panel.controls.cmap_combo.currentText() == colormaps.DEFAULT_DIVERGING
    np.testing.assert_allclose(panel.data, b - a)
    lo, hi = panel.mosaic_view.mosaic.levels
    assert lo == -hi  # centred at 0
    assert "2 of 8 channels changed" in view.header.text()
    # Sorting by change puts the zeroed channel first, the nudged one second.
    panel.channel_bar.sort_combo.setCurrentIndex(panel.channel_bar.sort_combo.findData(SORT_CHANGE))
    assert list(panel.mosaic_view.channels[:2]) == [3, 5]
    show(view, SHOW_A)
    np.testing.assert_array_equal(panel.data, a)
    assert not panel.diverging and not view.edited_label.isVisible()  # run A had no edits
    assert "<b>before</b> (run 1)" in view.header.text()  # the unedited run's name
    show(view, SHOW_B)
    np.testing.assert_array_equal(panel.data, b)


def test_no_selector_without_a_reference_and_b_minus_a_needs_equal_shapes(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("layer4")
    view.store.put(grad(1, "layer4", RNG.normal(size=(4, 3, 3))))
    assert not view.compare_combo.isVisible() and not view.edited_label.isVisible()
    view.store.set_baseline(1)
    view.store.put(RunStarted(run_id=2, label="x", model="m", device="cpu", edits=("e",)))
    view.store.put(grad(2, "layer4", RNG.normal(size=(4, 6, 6))))
    show(view, SHOW_DIFF)
    assert view.panel.mode == "message" and "same shape" in view.panel.message.text()


def test_pinning_run_a_shows_the_selector_when_the_compare_actions_ask_for_a_paint(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("layer4")
    a, b = RNG.normal(size=(2, 4, 3, 3))
    view.store.put(grad(1, "layer4", a))
    view.store.put(grad(2, "layer4", b))
    assert not view.compare_combo.isVisible()
    view.store.pin(1)  # no frame arrives: Compare ▸ Pin as A asks every view to paint
    view.request_paint()
    assert view.compare_combo.isVisible() and view.compare_combo.itemText(1) == "A"
    show(view, SHOW_DIFF)
    np.testing.assert_allclose(view.panel.data, b - a, rtol=1e-6)
    view.store.pin(None)
    view.request_paint()
    assert not view.compare_combo.isVisible() and view.compare == SHOW_B


# -- saving and copying ---------------------------------------------------------------------------


def test_save_png_writes_the_header_and_the_mosaic(qtbot, tmp_path):
    from PySide6.QtGui import QImage

    frame, _ = layer()
    view = view_with(qtbot, frame)
    path = save_view_png(view, tmp_path / "mosaic.png")
    image = QImage(str(path))
    assert not image.isNull()
    parts = [view.header_bar, view.panel.pages.currentWidget()]
    ratio = view.devicePixelRatioF()
    assert image.width() == round(max(p.width() for p in parts) * ratio)
    assert image.height() == round(sum(p.height() for p in parts) * ratio)
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 20  # the mosaic's colours, not an empty widget
    empty = shown(qtbot, ActivationView())
    with pytest.raises(NothingToSave):
        save_view_png(empty, tmp_path / "empty.png")
    with pytest.raises(OSError):
        save_view_png(view, tmp_path / "no such folder" / "x.png")


def test_copy_to_clipboard_is_in_the_gradient_flow_plots_menu(qtbot):
    view = shown(qtbot, GradientView())
    view.set_module("layer4")
    for run_module in ("a", "b", "layer4"):
        frame = grad(1, run_module, RNG.normal(size=(4, 3, 3)))
        view.store.put(frame)
    paint_pending()
    box = view.flow.plot.getPlotItem().getViewBox()
    menu_texts = [a.text() for a in box.menu.actions()]
    assert "View All" in menu_texts  # pyqtgraph's own menu is kept
    action = copy_action(view.flow.plot)
    QGuiApplication.clipboard().clear()
    action.trigger()
    image = QGuiApplication.clipboard().image()
    assert not image.isNull()
    assert image.width() == round(view.flow.plot.width() * view.devicePixelRatioF())


def test_the_zoom_and_its_levels_histogram_offer_copy_too(qtbot):
    frame, _ = layer(channels=4, side=6)
    view = view_with(qtbot, frame)
    view.panel.zoom(2)
    for plot in (view.panel.zoom_page.plot, view.panel.zoom_page.hist.plot):
        assert copy_action(plot) is not None
    QGuiApplication.clipboard().clear()
    copy_action(view.panel.zoom_page.hist.plot).trigger()
    assert not QGuiApplication.clipboard().image().isNull()


def test_stats_keys_cover_every_channel_even_when_a_preview_is_cut():
    from inspector.ui.views.tensor_view import channel_keys

    data = RNG.normal(size=(1, 10, 3, 3)).astype(np.float32)
    frame = act(1, "m", data[0, :4], stats=make_stats(data))  # a preview of 4 of 10
    keys = channel_keys(frame, None)
    assert keys[SORT_MEAN].shape == (10,) and SORT_CHANGE not in keys
