"""The Depth tab: how a ViT's prediction forms across its blocks (the logit lens, a
LensFrame). After each block, its tokens go through the model's own final norm and head;
the plot shows the explained class's probability after each block, and the table the top 3
classes there. The last block's is the model's own prediction.

Runs read the blocks' outputs only while this tab is shown (ui.attention.wiring); that
needs no change to the attention: the fused kernels keep running.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.core.records.frames import LensFrame
from inspector.ui.views.base import FrameView, hint_label, layer_ticks
from inspector.ui.views.depth_plot import depth_plot

CURVE_COLOR = "#4c9be8"
EMPTY_TEXT = ("How a vision transformer's prediction forms across its blocks appears here "
              "(the logit lens): open a ViT and drop an image on the window.")
FAILED_TEXT = "The last run failed before its logit lens was made: the status bar says why."


class LensView(FrameView):
    kinds = ("lens",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.frame: LensFrame | None = None
        self.refusal = ""  # why the lens is off for the model loaded
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.plot = depth_plot("block, in forward order (input \u2192 output)",
                               "p(class)")
        self.plot.setToolTip("The explained class's probability after each block: the softmax "
                             "of the model's final norm and head on that block's tokens")
        self.curve = self.plot.plot(pen=pg.mkPen(CURVE_COLOR, width=1.5), symbol="o",
                                    symbolSize=6, symbolBrush=CURVE_COLOR, symbolPen=None)
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#888", width=1))
        self.cursor.hide()
        self.plot.addItem(self.cursor, ignoreBounds=True)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["block", "1st", "2nd", "3rd"])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setToolTip("The 3 most probable classes after each block: the softmax of "
                              "the model's head on that block's tokens")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setSizes([1, 1])  # the table's rows as visible as the plot
        self.empty = hint_label(EMPTY_TEXT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(split)
        self.hover_label = QLabel(" ")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.hover_label)
        self.subscribe(lambda _f: self.request_paint(), self.kinds)
        self.request_paint()

    def set_refusal(self, why: str) -> None:
        """Why the model loaded has no logit lens ("" when it has one)."""
        self.refusal = why
        self.request_paint()

    def shown_frame(self) -> LensFrame | None:
        run = self.shown_run
        return None if run is None else self.store.get(("lens",), run)

    def _paint(self) -> None:
        frame = self.frame = self.shown_frame()
        if frame is None or not frame.blocks:
            self.header.setText("")
            self.cursor.hide()
            self.empty.setText(self.refusal or (FAILED_TEXT if self.failed else EMPTY_TEXT))
            self.stack.setCurrentWidget(self.empty)
            return
        n = len(frame.blocks)
        self.curve.setData(np.arange(n, dtype=float), np.asarray(frame.target_probs, float))
        self.plot.setXRange(-0.5, n - 0.5, padding=0.02)
        # From 0, to just above the largest probability: a flat curve of an untrained model
        # still shows its steps.
        self.plot.setYRange(0, min(1.0, max(0.01, 1.1 * float(np.max(frame.target_probs)))),
                            padding=0)
        self.plot.getAxis("bottom").setTicks(layer_ticks(n))
        self._fill_table(frame)
        label = frame.target_label or f"class {frame.target}"
        final = float(frame.target_probs[-1])
        self.header.setText(
            f"<b>Logit lens</b> \u00b7 <span style='color:{CURVE_COLOR}'>\u25cf</span> "
            f"p(\u201c{html.escape(label)}\u201d) after each of {n} blocks, "
            f"{final:.1%} after the last (the model's own) \u00b7 "
            f"<i>{html.escape(frame.how)}</i>")
        self.stack.setCurrentIndex(1)

    def _fill_table(self, frame: LensFrame) -> None:
        table = self.table
        table.setRowCount(len(frame.blocks))
        for row, (block, top) in enumerate(zip(frame.blocks, frame.top, strict=True)):
            table.setItem(row, 0, QTableWidgetItem(block))
            for col in range(3):
                text = f"{top[col].label} {top[col].prob:.1%}" if col < len(top) else ""
                item = QTableWidgetItem(text)
                if col < len(top) and top[col].index == frame.target:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                table.setItem(row, col + 1, item)
        table.resizeColumnsToContents()

    def _hover(self, scene_pos: QPointF) -> None:
        frame = self.frame
        vb = self.plot.getPlotItem().vb
        if frame is None or not vb.sceneBoundingRect().contains(scene_pos):
            self.cursor.hide()
            return
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        if not 0 <= i < len(frame.blocks):
            self.cursor.hide()
            return
        self.cursor.setPos(i)
        self.cursor.show()
        top = ", ".join(f"{p.label} {p.prob:.1%}" for p in frame.top[i])
        self.hover_label.setText(f"block {i}: {frame.blocks[i]}   p = "
                                 f"{float(frame.target_probs[i]):.4f}   top: {top}")
