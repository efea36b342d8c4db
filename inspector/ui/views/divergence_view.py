"""Where two runs part ways: per captured module, in forward order, the relative L2 distance
||B - A|| / ||A|| and the cosine similarity between the two runs' outputs (a DivergenceFrame,
sent by a run compared with the unedited run or with a pinned run A).

The relative L2 distance is on the left axis, the cosine on the right one (always -1..1),
each in its own colour. Hovering names the module under the cursor; clicking a point
selects that module (`moduleClicked`, which the window connects to the module tree).
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from inspector.core.records.frames import DivergenceFrame
from inspector.ui.views.base import FrameView, fmt
from inspector.ui.views.depth_plot import DepthPlotFrame, depth_plot
from inspector.ui.views.layer_axis import LayerAxis

L2_COLOR = "#f0a030"
COSINE_COLOR = "#4c9be8"
# Below this the two outputs are the same up to float rounding: not where the runs part.
SAME = 1e-6
EMPTY_TEXT = (
    "Where two runs part ways appears here, per module: pin a run as A (Compare \u25b8 Pin "
    "as A) and run another, or add an edit to compare with the unedited run."
)
NOT_COMPARED = "The last run was not compared with another run."
FAILED_TEXT = "The last run failed before it was compared: the status bar says why."


class DivergenceView(FrameView):
    """`moduleClicked(name)` when the user clicks a module's point."""

    moduleClicked = Signal(str)  # noqa: N815 (Qt signal naming)
    kinds = ("divergence",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.frame: DivergenceFrame | None = None  # what is drawn

        plot = depth_plot("", "relative L2 distance", color=L2_COLOR)
        self.x_axis = LayerAxis("bottom")  # module numbers that fit; names on hover
        plot.setAxisItems({"bottom": self.x_axis})
        self.x_axis.set_title("module, in forward order (input \u2192 output)")
        self.l2_curve = plot.plot(
            pen=pg.mkPen(L2_COLOR, width=1.5), symbol="o", symbolSize=6,
            symbolBrush=L2_COLOR, symbolPen=None, connect="finite",
        )
        # The cosine on its own axis, on the right: its own ViewBox, x linked to the plot's
        # (pyqtgraph's MultiplePlotAxes example).
        item = plot.getPlotItem()
        self.cosine_box = pg.ViewBox()
        self.cosine_box.setMenuEnabled(False)
        self.cosine_box.setMouseEnabled(x=False, y=False)
        item.showAxis("right")
        item.scene().addItem(self.cosine_box)
        item.getAxis("right").linkToView(self.cosine_box)
        item.getAxis("right").setLabel("cosine similarity", color=COSINE_COLOR)
        self.cosine_box.setXLink(item)
        self.cosine_box.setYRange(-1.05, 1.05, padding=0)
        self.cosine_curve = pg.PlotDataItem(
            pen=pg.mkPen(COSINE_COLOR, width=1.5), symbol="s", symbolSize=5,
            symbolBrush=COSINE_COLOR, symbolPen=None, connect="finite",
        )
        self.cosine_box.addItem(self.cosine_curve)
        item.vb.sigResized.connect(self._fit_cosine_box)
        plot.scene().sigMouseClicked.connect(self._clicked)
        frame = DepthPlotFrame(self, QLabel(), plot, EMPTY_TEXT, self._hover)
        self.header, self.hover_label, self.plot = frame.header, frame.hover_label, plot
        self.cursor, self.empty, self.stack = frame.cursor, frame.empty, frame.stack
        self.subscribe(self._divergence_stored, self.kinds)
        self.request_paint()

    # -- what is shown ------------------------------------------------------------------------
    def shown_frame(self) -> DivergenceFrame | None:
        """The divergence of the current run; until it arrives, the previous run's, unless
        the current run finished (or failed) without one: then there is none to show."""
        store = self.store
        run = self.shown_run
        if run is None or (run != store.current_run
                           and store.status(store.current_run) not in (None, "cancelled")):
            return None
        return store.get(("divergence",), run)

    def _divergence_stored(self, _frame: DivergenceFrame) -> None:
        self.request_paint()

    def _fit_cosine_box(self) -> None:
        item = self.plot.getPlotItem()
        self.cosine_box.setGeometry(item.vb.sceneBoundingRect())
        self.cosine_box.linkedViewChanged(item.vb, self.cosine_box.XAxis)

    def module_at(self, scene_pos: QPointF) -> int | None:
        """The index of the module whose point is nearest `scene_pos` in x, if inside the plot."""
        if self.frame is None:
            return None
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        return i if 0 <= i < len(self.frame.modules) else None

    # -- painting -----------------------------------------------------------------------------
    def _paint(self) -> None:
        frame = self.shown_frame()
        if frame is not self.frame:  # the line under the plot named the old frame's module
            self.hover_label.setText(" ")
        self.frame = frame
        if frame is None or not frame.modules:
            self.header.setText("")
            self.cursor.hide()
            if self.failed:
                text = FAILED_TEXT
            elif self.store.status(self.store.current_run) == "ok":
                text = f"{NOT_COMPARED} {EMPTY_TEXT}"
            else:
                text = EMPTY_TEXT
            self.empty.setText(text)
            self.stack.setCurrentWidget(self.empty)
            return
        n = len(frame.modules)
        x = np.arange(n, dtype=float)
        rel = np.asarray(frame.rel_l2, dtype=float)
        cosine = np.asarray(frame.cosine, dtype=float)
        self.l2_curve.setData(x, np.where(np.isfinite(rel), rel, np.nan))
        self.cosine_curve.setData(x, np.where(np.isfinite(cosine), cosine, np.nan))
        self.plot.setXRange(-0.5, n - 0.5, padding=0.02)
        self.x_axis.set_layers([str(i) for i in range(n)],
                               [m or "(whole model)" for m in frame.modules])
        self._fit_cosine_box()
        self.header.setText(self._header_text(frame, rel))
        self.stack.setCurrentWidget(self.plot)

    def _header_text(self, frame: DivergenceFrame, rel: np.ndarray) -> str:
        baseline = frame.reference_run == self.store.baseline_run
        names = ("before", "after") if baseline else ("A", "B")
        text = (
            f"<b>Divergence</b> \u00b7 {names[1]} (run {frame.run_id}) vs {names[0]} "
            f"(run {frame.reference_run}) \u00b7 {len(frame.modules)} modules \u00b7 "
            f"<span style='color:{L2_COLOR}'>\u25cf rel L2</span> "
            f"<span style='color:{COSINE_COLOR}'>\u25a0 cosine</span>"
        )
        apart = np.flatnonzero(~(rel <= SAME))  # NaN/Inf count as apart: ||A|| was 0
        if apart.size == 0:
            return text + " \u00b7 the two runs' outputs are the same in every module"
        first = frame.modules[apart[0]] or "(whole model)"
        finite = np.isfinite(rel)
        worst = int(np.argmax(np.where(finite, rel, -np.inf))) if finite.any() else int(apart[0])
        return text + (
            f"<br>They part at <b>{html.escape(first)}</b>; the largest distance is at "
            f"<b>{html.escape(frame.modules[worst] or '(whole model)')}</b> "
            f"({fmt(rel[worst])}). Click a point to select its module."
        )

    # -- the mouse ----------------------------------------------------------------------------
    def _hover(self, scene_pos: QPointF) -> None:
        i = self.module_at(scene_pos)
        if i is None:
            self.cursor.hide()
            return
        frame = self.frame
        self.cursor.setPos(i)
        self.cursor.show()
        name = frame.modules[i] or "(whole model)"
        self.hover_label.setText(
            f"module {i}: {name}   rel L2 {fmt(frame.rel_l2[i])}   cosine {fmt(frame.cosine[i])}"
        )

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        i = self.module_at(event.scenePos())
        if i is not None:
            event.accept()
            self.moduleClicked.emit(self.frame.modules[i])
