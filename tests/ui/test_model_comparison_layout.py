"""The Model comparison pane in the default 1440x900 layout: a docked tab beside the
Divergence pane (not a window floating over the module tree), and a matched pair's
mosaics and crops whole inside it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication
from test_compare_models_ui import _images
from test_main_window import TIMEOUT, wait_run  # noqa: F401 (a fixture)


def _rect_in(widget, ancestor) -> QRect:
    return QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())


def test_model_comparison_is_docked_beside_divergence_and_its_mosaics_are_whole(
        make_window, qtbot, tmp_path):
    window = make_window(images=_images(tmp_path, 6), size=(1440, 900))
    wait_run(qtbot, window)
    actions = window.compare_models
    actions.open_dialog()
    actions.dialog.out.setText(str(tmp_path / "cmp"))
    actions.dialog.run()
    qtbot.waitUntil(lambda: actions.view is not None and actions.view.doc is not None,
                    timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not actions.runner.running, timeout=TIMEOUT)
    dock = actions.dock
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    assert not dock.isFloating()
    assert window.dockWidgetArea(dock) == window.dockWidgetArea(window.docks["divergence"])
    assert window.docks["divergence"] in window.tabifiedDockWidgets(dock)
    tree = window.docks["tree"]
    assert not _rect_in(dock, window).intersects(_rect_in(tree, window))
    assert window.width() == 1440  # the pane did not widen the window

    view = actions.view
    doc = view.doc
    session_tree = window.control.session.tree
    row = next(i for i, n in enumerate(doc["layers_a"])
               if len(session_tree[n].output_shape or ()) == 4)
    view.select(row, row)
    qtbot.waitUntil(lambda: view.matches.table.rowCount() > 0, timeout=TIMEOUT)
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)
    panel = view.matches
    inside = panel.rect()
    for mosaic in (panel.mosaic_a, panel.mosaic_b):
        assert not mosaic.pixmap().isNull()
        room = _rect_in(mosaic, panel)
        assert inside.contains(room), (room, inside)  # its label is in the pane
        shown = mosaic.pixmap().size()
        assert shown.width() <= mosaic.width() and shown.height() <= mosaic.height(), (
            shown, mosaic.size())  # and the picture whole in its label
        assert mosaic.pixmap().height() > 0
    table = panel.table  # every column in view: no scrolling sideways to read r
    assert table.horizontalScrollBar().maximum() == 0
    assert all(table.item(0, c).toolTip() or table.horizontalHeaderItem(c).toolTip()
               for c in range(3))
