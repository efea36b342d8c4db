"""Each layer's input mean and std across depth, from the INPUT frames (forward pre-hooks).

Helps spot a wrongly normalised input (the first layer should see mean near 0 and std
near 1 after the usual ImageNet normalisation) and statistics that drift with depth.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QLabel, QWidget

from inspector.core.records.frames import TensorStats
from inspector.core.records.kinds import INPUT
from inspector.ui.views.base import FrameView, fmt, layer_ticks
from inspector.ui.views.depth_plot import DepthPlotFrame, depth_plot

MEAN_COLOR = "#4c9be8"
STD_COLOR = "#f0a030"


def looks_normalised(stats: TensorStats) -> bool:
    """The usual per-channel normalisation leaves mean near 0 and std near 1."""
    return abs(stats.mean) < 0.5 and 0.5 < stats.std < 2.0


class InputStatsView(FrameView):
    kinds = (INPUT,)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.layers: list[str] = []  # in arrival (forward) order for the run shown

        plot = depth_plot("layer, in forward order", "input value")
        plot.addItem(pg.InfiniteLine(pos=0, angle=0, movable=False,
                                     pen=pg.mkPen("#666", style=Qt.PenStyle.DashLine)))
        self.mean_curve = plot.plot(pen=pg.mkPen(MEAN_COLOR, width=1.5), symbol="o",
                                    symbolSize=5, symbolBrush=MEAN_COLOR, symbolPen=None,
)
        self.std_curve = plot.plot(pen=pg.mkPen(STD_COLOR, width=1.5), symbol="o",
                                   symbolSize=5, symbolBrush=STD_COLOR, symbolPen=None,
)
        frame = DepthPlotFrame(self, QLabel(), plot, "", self._hover)
        self.header, self.hover_label, self.plot = frame.header, frame.hover_label, plot
        self.cursor, self.empty, self.stack = frame.cursor, frame.empty, frame.stack

        # Every module's input: one point per layer.
        self.subscribe(self._input_stored, self.kinds)
        self.request_paint()

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """(means, stds) per layer, in the order the layers ran."""
        stats = self._stats()
        means = np.array([s.mean for s in stats.values()], dtype=float)
        stds = np.array([s.std for s in stats.values()], dtype=float)
        return means, stds

    def _input_stored(self, _frame) -> None:
        self.schedule_paint()  # many INPUT frames per drain: one redraw for all

    def run_changed(self, frame) -> None:
        if not self.layers or self.failed:  # the empty state's hint, or "the run failed"
            self.request_paint()

    def _stats(self) -> dict[tuple[str, int, str], TensorStats]:
        """(module, call, path) -> input statistics of the run shown, in arrival order."""
        frames = self.store.of_kind(self.kinds, self.shown_run)
        return {(f.module, f.call, f.path): f.stats for f in frames.values()}

    def _paint(self) -> None:
        stats = self._stats()
        self.layers = [
            # Path "0" is the usual single positional input: naming it is noise.
            (m or "(whole model)") + (f"#{c}" if c else "") + (f"[{p}]" if p not in ("", "0") else "")
            for m, c, p in stats
        ]
        if not self.layers:
            self.header.setText("")
            if self.failed:
                text = "The last run failed before any layer's input was seen: the status " \
                       "bar says why."
            elif self.store.current_run is not None:
                text = ("Each layer's input mean and std appear here after a run, for the "
                        "modules whose \u201cinput\u201d is captured in the module tree.")
            else:
                text = "Drop an image on the window to run the model."
            self.empty.setText(text)
            self.stack.setCurrentWidget(self.empty)
            return
        means, stds = self.values()
        x = np.arange(len(means))
        self.mean_curve.setData(x, means)
        self.std_curve.setData(x, stds)
        self.plot.setXRange(-0.5, len(means) - 0.5, padding=0.02)
        self.plot.getAxis("bottom").setTicks(layer_ticks(len(means)))
        first = next(iter(stats.values()))
        verdict = (
            "looks normalised"
            if looks_normalised(first)
            else "<span style='color:#e0a030'>unusual for a normalised input "
            "(expected mean \u2248 0, std \u2248 1): check the preprocessing</span>"
        )
        self.header.setText(
            f"<b>Input statistics</b> \u00b7 {len(means)} layer{'' if len(means) == 1 else 's'} \u00b7 "
            f"<span style='color:{MEAN_COLOR}'>\u25cf mean</span> "
            f"<span style='color:{STD_COLOR}'>\u25cf std</span><br>"
            f"The first layer, <b>{html.escape(self.layers[0])}</b>, sees mean {fmt(first.mean)} "
            f"and std {fmt(first.std)}: {verdict}"
        )
        self.stack.setCurrentWidget(self.plot)

    def _hover(self, scene_pos: QPointF) -> None:
        if not self.layers:
            return
        vb = self.plot.getPlotItem().vb
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        if not (vb.sceneBoundingRect().contains(scene_pos) and 0 <= i < len(self.layers)):
            self.cursor.hide()
            return
        # What is drawn: the store may hold a newer run that this view has not painted yet.
        means, stds = self.mean_curve.yData, self.std_curve.yData
        self.cursor.setPos(i)
        self.cursor.show()
        self.hover_label.setText(
            f"layer {i}: {self.layers[i]}   mean {fmt(means[i])}   std {fmt(stds[i])}"
        )
