"""Gradients: the selected module's gradient (diverging colours, symmetric about zero) and the
gradient flow over every layer whose gradient was captured in the run."""

from __future__ import annotations

import math

from PySide6.QtWidgets import QComboBox, QWidget

from inspector.core.frames import (
    GRAD_INPUT,
    GRAD_OUTPUT,
    ActivationFrame,
    GradientFrame,
    TensorStats,
)
from inspector.ui.views.gradient_flow import FlowPoint, GradientFlowPlot
from inspector.ui.views.tensor_view import TensorView

FlowKey = tuple[str, int, str]  # (module, call, path)


def mean_abs(stats: TensorStats) -> tuple[float, bool]:
    """(mean |grad|, exact). Stats without `abs_mean` (None, or the field's default 0 while
    some value is non-zero, which a real mean |x| cannot be) get the RMS as a stand-in:
    sqrt(mean^2 + std^2) is at least the mean |grad| and moves with it."""
    value = getattr(stats, "abs_mean", None)
    if value is not None and (value != 0 or stats.abs_max == 0):
        return float(value), True
    return math.sqrt(stats.mean**2 + stats.std**2), False


class GradientView(TensorView):
    """Shows GradientFrames: GRAD_OUTPUT by default, GRAD_INPUT by the kind combo."""

    frame_type = GradientFrame

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        # Per-run gradient statistics for the flow plot, by kind, in arrival (backward) order.
        self._flow: dict[str, dict[FlowKey, TensorStats]] = {}
        self._flow_dirty = True
        super().__init__((GRAD_OUTPUT, GRAD_INPUT), diverging=True, parent=parent, store=store)
        self.kind_combo = QComboBox()
        self.kind_combo.addItem("\u2202score/\u2202output", GRAD_OUTPUT)
        self.kind_combo.addItem("\u2202score/\u2202input", GRAD_INPUT)
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

    def set_kind(self, kind: str) -> None:
        if kind in self.kinds and kind != self.kind:
            self._flow_dirty = True
            index = self.kind_combo.findData(kind)
            if index != self.kind_combo.currentIndex():
                self.kind_combo.blockSignals(True)
                self.kind_combo.setCurrentIndex(index)
                self.kind_combo.blockSignals(False)
        super().set_kind(kind)

    def handle_frame(self, frame: object) -> None:
        if isinstance(frame, ActivationFrame):
            # The run store keeps the forward order for the flow plot (gradients arrive in
            # backward order).
            self.keep(frame)
            return
        super().handle_frame(frame)
        if (
            isinstance(frame, GradientFrame)
            and frame.kind in self.kinds
            and frame.run_id == self._run_id
        ):
            self._flow.setdefault(frame.kind, {})[(frame.module, frame.call, frame.path)] = (
                frame.stats
            )
            if frame.kind == self.kind:
                self._flow_dirty = True
                self.schedule_paint()  # many gradient frames per drain: one redraw for all

    def flow_points(self) -> tuple[list[FlowPoint], bool]:
        """The selected kind's layers in forward order, and whether mean |grad| is exact."""
        stats = self._flow.get(self.kind, {})
        keys = list(stats)
        forward = self.store.forward_order(self._run_id) if self._run_id is not None else {}
        if keys and all(module in forward for module, _, _ in keys):
            keys.sort(key=lambda k: (forward[k[0]], k[1], k[2]))
        else:
            keys.reverse()  # backward order reversed is forward order, near enough
        points, exact = [], True
        for module, call, path in keys:
            s = stats[(module, call, path)]
            mean, ok = mean_abs(s)
            exact &= ok
            name = (module or "(whole model)") + (f"#{call}" if call else "")
            name += f"[{path}]" if path else ""
            points.append(FlowPoint(name, mean, s.abs_max, nonfinite=s.nonfinite > 0))
        return points, exact

    def _reset_run(self) -> None:
        super()._reset_run()
        self._flow = {}
        self._flow_dirty = True

    def clear(self) -> None:
        self._flow_dirty = True
        super().clear()

    def _paint(self) -> None:
        if self._panel_dirty:
            super()._paint()
        if self._flow_dirty:
            self._flow_dirty = False
            points, exact = self.flow_points()
            title = self.kind_combo.currentText()
            label = "mean |grad|" if exact else "RMS grad (\u2265 mean |grad|)"
            self.flow.set_points(points, title, label)
