"""Axis text in the default 1440x900 layout: the divergence plot's, the patch sweep's and
the CKA heatmap's tick labels never run together, and an axis title too long for its axis
is elided with the whole title in its tooltip."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication
from test_compare_models_ui import _images
from test_main_window import TIMEOUT, wait_run  # noqa: F401 (a fixture)

from inspector.core.records.frames import DivergenceFrame


def _settle(qtbot):
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(20)


def drawn_texts(axis):
    """What `axis` draws: (rect, text) of each tick label, as pyqtgraph lays them out."""
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    font = axis.style["tickFont"]
    if font is not None:
        painter.setFont(font)
    try:
        _axis, _ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _flags, text in texts]


def assert_fits(axis, along: str) -> None:
    """The axis's tick labels are apart along the axis, each its label or that label
    elided (its whole name on hover), and its title no longer than the axis."""
    texts = drawn_texts(axis)
    assert len(texts) >= 2, (axis.orientation, axis.size())
    spans = sorted((r.left(), r.right()) if along == "x" else (r.top(), r.bottom())
                   for r, _ in texts)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, (axis.orientation, [t for _, t in texts])
    allowed = {axis._elided(s) for s in axis.labels}
    assert {t for _, t in texts} <= allowed
    length = axis.size().width() if along == "x" else axis.size().height()
    title = axis.label
    assert title.boundingRect().width() <= length, (title.toPlainText(), length)
    if title.toPlainText().strip() != axis.title:
        assert "\u2026" in title.toPlainText() and title.toolTip() == axis.title


class _Hover:
    """What pyqtgraph's scene hands an item's hoverEvent: where, in the item's coordinates."""

    def __init__(self, pos):
        self._pos = pos

    def isExit(self):  # noqa: N802 (pyqtgraph's name)
        return False

    def pos(self):
        return self._pos


def hover_names(axis, index: int) -> str:
    """The tooltip of `axis` hovered over layer `index`'s tick."""
    view = axis.linkedView()
    value = index + axis.offset
    point = QPointF(value, 0) if axis.orientation == "bottom" else QPointF(0, value)
    axis.hoverEvent(_Hover(axis.mapFromScene(view.mapViewToScene(point))))
    return axis.toolTip()


def test_layer_axes_never_run_their_labels_together_in_the_default_layout(make_window, qtbot,
                                                                         tmp_path):
    from inspector.core.compare.patch_sweep import PatchSweep

    window = make_window(images=_images(tmp_path, 1), size=(1440, 900))
    wait_run(qtbot, window)
    window.docks["divergence"].show()
    window.docks["divergence"].raise_()
    view = window.views["divergence"]
    store = window.router.store
    run = store.current_run
    names = tuple(f"backbone.stage{i // 10}.block{i % 10}.conv" for i in range(120))
    store.put(DivergenceFrame(run, run - 1, names, np.linspace(0, 1, 120),
                              np.linspace(1, 0, 120)))
    store.notify()
    _settle(qtbot)
    assert_fits(view.plot.getAxis("bottom"), "x")
    assert names[37] in hover_names(view.plot.getAxis("bottom"), 37)  # the whole name

    panel = window.compare.sweep.panel
    logit = tuple(float(v) for v in np.linspace(-1, 2, 120))
    panel.show_sweep(PatchSweep(names, logit, tuple(0.5 for _ in names), 1, 2.0, 0.8, -1.0,
                                0.1), "run 1", "run 2", "cat")
    _settle(qtbot)
    assert_fits(panel.plot.getAxis("bottom"), "x")

    actions = window.compare_models
    actions._ensure_dock()
    layers = [f"backbone.stage{i // 10}.block{i % 10}.attention.projection" for i in range(60)]
    cka = [[float(abs(np.cos(i - j))) for j in range(60)] for i in range(60)]
    actions.view.show_document({"cka": cka, "layers_a": layers, "layers_b": layers,
                                "model_a": "a_model_with_a_long_name",
                                "model_b": "b_model_with_a_long_name", "estimator": "exact",
                                "images": 64})
    actions.dock.show()
    actions.dock.raise_()
    _settle(qtbot)
    assert_fits(actions.view.plot.getAxis("left"), "y")
    assert hover_names(actions.view.plot.getAxis("left"), 41) == layers[41]
    assert_fits(actions.view.plot.getAxis("bottom"), "x")
    window.grab().save(str(tmp_path / "axes.png"))


def test_a_short_plots_value_labels_never_run_together(qtbot):
    """timm's vit_tiny drew four attention-distance labels (7.26 .. 7.32) into a 40 px axis:
    pyqtgraph counts ticks from the axis length alone."""
    from inspector.ui.views.attention_heads import DistancePlot

    plot = DistancePlot()
    widget = plot.plot
    qtbot.addWidget(widget)
    widget.resize(440, 70)  # its axis about 30 px, as in the Attention tab at 1440x900
    widget.show()
    qtbot.waitExposed(widget)
    rng = np.random.default_rng(0)
    plot.show(7.26 + 0.06 * rng.random((12, 3)), 11)
    _settle(qtbot)
    axis = widget.getAxis("left")
    texts = drawn_texts(axis)
    assert texts  # a 30 px axis has room for one label of this range
    spans = sorted((r.top(), r.bottom()) for r, _ in texts)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, [t for _, t in texts]
    widget.resize(440, 400)  # room for more: not thinned beyond need
    _settle(qtbot)
    assert len(drawn_texts(axis)) >= 3
