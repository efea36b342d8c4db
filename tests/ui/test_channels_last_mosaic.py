"""The Activations mosaic of a channels-last (B, H, W, C) output, in the window running core's
real Session: one tile per channel, numbered, sorted, zoomed and edited by the channel's own
index (tests/channels_last_model.py: channel k holds about 10 (k + 1))."""

from __future__ import annotations

import numpy as np
from channels_last_model import CHANNELS, FACTORY
from PySide6.QtWidgets import QApplication
from test_edits import action, record_submissions, right_click_tile
from test_main_window import TIMEOUT, wait_run, write_png  # noqa: F401

from inspector.ui.views.channel_bar import SORT_MEAN
from inspector.ui.views.tensor_panel import MOSAIC, ZOOM

MODEL = {"name": None, "factory": FACTORY}
GRID = (8, 8)  # the 64 x 64 input over the stem's stride of 8


def test_a_channels_last_output_shows_one_tile_per_channel_and_edits_that_channel(
    make_window, qtbot, tmp_path, monkeypatch
):
    from inspector.core.edits.interventions import ZeroChannels

    window = make_window(MODEL, images=[write_png(tmp_path / "x.png")])
    wait_run(qtbot, window)
    view = window.views["activation"]
    assert window.tree.select_module("to_last")
    panel = view.panel
    qtbot.waitUntil(lambda: view.module == "to_last" and panel.mode == MOSAIC
                    and panel.data is not None, timeout=TIMEOUT)
    frame = view.current_frame()
    assert frame.shape == (1, *GRID, CHANNELS) and frame.channels_last
    assert panel.mosaic_view.mosaic.channels == CHANNELS
    assert (panel.mosaic_view.mosaic.height, panel.mosaic_view.mosaic.width) == GRID
    assert panel.channel_bar.page_label.text() == f"0\u2013{CHANNELS - 1} (0\u2013{CHANNELS - 1})"
    assert "one tile per channel" in view.header.text()
    levels = panel.data.mean(axis=(1, 2))
    np.testing.assert_allclose(levels, 10.0 * np.arange(1, CHANNELS + 1), atol=0.5)

    # Sorted by mean: the last channel (the highest level) first, and found under its tile.
    panel.channel_bar.sort_combo.setCurrentIndex(panel.channel_bar.sort_combo.findData(SORT_MEAN))
    np.testing.assert_array_equal(panel.mosaic_view.channels, np.arange(CHANNELS)[::-1])
    y0, x0 = panel.mosaic_view.mosaic.origin(0)
    assert panel.mosaic_view.mosaic.channel_at(x0 + 1, y0 + 1) == CHANNELS - 1
    panel.channel_bar.sort_combo.setCurrentIndex(0)  # the channels' own order again
    np.testing.assert_array_equal(panel.mosaic_view.channels, np.arange(CHANNELS))

    panel._mosaic_clicked(2)  # a click on tile 2 zooms to channel 2
    assert panel.mode == ZOOM
    assert panel.zoom_page.plot.titleLabel.text == f"channel 2 (0\u2013{CHANNELS - 1})"
    np.testing.assert_array_equal(panel.zoom_page.item.image, panel.data[2])
    panel.controls.back_button.click()

    # Right-click on channel 2's tile, Zero: the edit zeroes the last dim's channel 2.
    submitted = record_submissions(window, monkeypatch)
    right_click_tile(panel, 2)
    menu = QApplication.activePopupWidget()  # the channel's context menu, shown
    assert menu is not None and menu.isVisible()
    action(menu, "Zero this channel").trigger()
    menu.close()
    edited = wait_run(qtbot, window)
    assert submitted[-1].interventions == (ZeroChannels("to_last", (2,), dim=-1),)
    qtbot.waitUntil(lambda: view.current_frame() is not None
                    and view.current_frame().run_id == edited.run_id, timeout=TIMEOUT)
    data = view.current_frame().preview
    assert not data[2].any()
    assert all(data[k].mean() > 5 for k in range(CHANNELS) if k != 2)
