"""Gradients: the selected module's gradient (diverging colours, symmetric about zero) and the
gradient flow over every layer whose gradient was captured in the run."""

from __future__ import annotations

import math

from PySide6.QtWidgets import QComboBox, QWidget

from inspector.core.records.frames import GradientFrame, TensorStats
from inspector.core.records.kinds import GRADIENT_KINDS, KIND_INFO
from inspector.ui.views.gradient_flow import FlowPoint, GradientFlowPlot
from inspector.ui.views.tensor_view import TensorView


def mean_abs(stats: TensorStats) -> tuple[float, bool]:
    """(mean |grad|, exact). Stats without `abs_mean` (None, or the field's default 0 while
    some value is non-zero, which a real mean |x| cannot be) get the RMS as a stand-in:
    sqrt(mean^2 + std^2) is at least the mean |grad| and moves with it."""
    value = getattr(stats, "abs_mean", None)
    if value is not None and (value != 0 or stats.abs_max == 0):
        return float(value), True
    return math.sqrt(stats.mean**2 + stats.std**2), False


class GradientView(TensorView):
    """Shows gradients: the output's by default, the other GRADIENT_KINDS by the kind combo."""

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        self._flow_dirty = True
        super().__init__(GRADIENT_KINDS, diverging=True, parent=parent, store=store)
        self.kind_combo = QComboBox()
        for kind in GRADIENT_KINDS:
            self.kind_combo.addItem(KIND_INFO[kind].symbol, kind)
        self.kind_combo.setToolTip(
            "Gradient of the target class score with respect to the module's output, or to "
            "its input (through this module only)"
        )
        self.kind_combo.currentIndexChanged.connect(
            lambda i: self.set_kind(self.kind_combo.itemData(i))
        )
        self.header_row.addWidget(self.kind_combo)
        self.flow = GradientFlowPlot()
        self.splitter.addWidget(self.flow)
        self.splitter.setSizes([600, 300])
        # The flow plot shows every layer: all modules' gradients, not just the selected one's.
        self.subscribe(self._flow_frame_stored, self.kinds, runs=False)

    def set_kind(self, kind: str) -> None:
        if kind in self.kinds and kind != self.kind:
            self._flow_dirty = True
            index = self.kind_combo.findData(kind)
            if index != self.kind_combo.currentIndex():
                self.kind_combo.blockSignals(True)
                self.kind_combo.setCurrentIndex(index)
                self.kind_combo.blockSignals(False)
        super().set_kind(kind)

    def _flow_frame_stored(self, frame: GradientFrame) -> None:
        if frame.kind == self.kind:
            self._flow_dirty = True
            self.schedule_paint()  # many gradient frames per drain: one redraw for all

    def run_changed(self, frame) -> None:
        if frame.run_id == self.shown_run and self.store.status(frame.run_id) == "error":
            self._flow_dirty = True  # the run failed before its gradients: an empty flow
        super().run_changed(frame)
        if self._flow_dirty:
            self.request_paint()

    def flow_points(self) -> tuple[list[FlowPoint], bool]:
        """The selected kind's layers in forward order, and whether mean |grad| is exact."""
        run = self.shown_run
        frames = list(self.store.of_kind((self.kind,), run).values())  # backward order
        forward = self.store.forward_order(run) if run is not None else {}
        if frames and all(f.module in forward for f in frames):
            frames.sort(key=lambda f: (forward[f.module], f.call, f.path))
        else:
            frames.reverse()  # backward order reversed is forward order, near enough
        points, exact = [], True
        for f in frames:
            module, call, path, s = f.module, f.call, f.path, f.stats
            mean, ok = mean_abs(s)
            exact &= ok
            name = (module or "(whole model)") + (f"#{call}" if call else "")
            name += f"[{path}]" if path else ""
            points.append(FlowPoint(name, mean, s.abs_max, nonfinite=s.nonfinite > 0))
        return points, exact

    def cleared(self) -> None:
        self._flow_dirty = True
        super().cleared()

    def _paint(self) -> None:
        if self._panel_dirty:
            super()._paint()
        if self._flow_dirty:
            self._flow_dirty = False
            points, exact = self.flow_points()
            title = self.kind_combo.currentText()
            label = "mean |grad|" if exact else "RMS grad (\u2265 mean |grad|)"
            self.flow.set_points(points, title, label)
