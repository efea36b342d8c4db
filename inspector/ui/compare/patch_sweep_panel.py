"""A/B compare's "Patch sweep from A", beside the divergence plot: for each module in forward
order, the run on image B with that module's output taken from the run on image A (pinned
run A's input), and the explained class's logit (core.compare.patch_sweep). Where the curve
reaches A's line, the information that decides B's class has been replaced by A's from that
module on. Hovering names the module; clicking a point selects it in the module tree.

The sweep runs on the session's worker (one batched forward per 64 modules, with run B's
edits), on the model loaded now: image A is run A's input, whichever weights A ran with.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.views.base import fmt
from inspector.ui.views.depth_plot import depth_plot
from inspector.ui.views.layer_axis import LayerAxis

A_COLOR, B_COLOR, CURVE_COLOR = "#2e7d32", "#ef6c00", "#4c9be8"
DEPTHS = (("leaf modules", None), ("depth 1", 1), ("depth 2", 2), ("depth 3", 3))
EMPTY_TEXT = ("Pin a run as A (Compare \u25b8 Pin as A), run another image (B), then "
              "<b>Patch sweep from A</b>: for each module, B's run with that module's output "
              "from A, and the class's logit.")


class PatchSweepPanel(QWidget):
    """The sweep's plot, its button and its depth; `moduleClicked(name)` on a click."""

    moduleClicked = Signal(str)  # noqa: N815 (Qt signal naming)
    sweepRequested = Signal(object)  # noqa: N815 - the depth (None: the leaves)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sweep = None
        self.button = QPushButton("Patch sweep from A")
        self.button.setToolTip("For each module in forward order, run B with that module's "
                               "output taken from A's run, and plot the explained class's logit")
        self.button.clicked.connect(lambda: self.sweepRequested.emit(self.depth.currentData()))
        self.depth = QComboBox()
        for text, depth in DEPTHS:
            self.depth.addItem(text, depth)
        self.depth.setToolTip("Which modules are patched: the leaves, or the modules at a depth "
                              "of the tree (1: the model's children)")
        self.header = QLabel(EMPTY_TEXT)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.header.setMinimumHeight(3 * self.header.fontMetrics().lineSpacing() + 4)
        self.plot = depth_plot("", "logit of the class")
        self.x_axis = LayerAxis("bottom")  # module numbers that fit; names on hover
        self.plot.setAxisItems({"bottom": self.x_axis})
        self.x_axis.set_title("patched module, in forward order")
        self.curve = self.plot.plot(pen=pg.mkPen(CURVE_COLOR, width=1.5), symbol="o",
                                    symbolSize=6, symbolBrush=CURVE_COLOR, symbolPen=None,
                                    connect="finite")
        self.line_a = pg.InfiniteLine(angle=0, pen=pg.mkPen(A_COLOR, style=Qt.PenStyle.DashLine),
                                      label="A", labelOpts={"color": A_COLOR, "position": 0.02})
        self.line_b = pg.InfiniteLine(angle=0, pen=pg.mkPen(B_COLOR, style=Qt.PenStyle.DashLine),
                                      label="B", labelOpts={"color": B_COLOR, "position": 0.02})
        for line in (self.line_a, self.line_b):
            line.hide()
            self.plot.addItem(line)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.plot.hide()
        self.hover_label = QLabel(" ")
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addWidget(self.depth)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.header)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.hover_label)

    def show_message(self, text: str) -> None:
        self.header.setText(html.escape(text))

    def clear(self) -> None:
        """Back to the empty panel: the sweep shown was of a run A that is gone."""
        self.sweep = None
        self.curve.setData([], [])
        for line in (self.line_a, self.line_b):
            line.hide()
        self.plot.hide()
        self.header.setText(EMPTY_TEXT)
        self.header.setToolTip("")
        self.hover_label.setText(" ")

    def show_sweep(self, sweep, label_a: str, label_b: str, class_label: str) -> None:
        """A core.compare.patch_sweep.PatchSweep of images A and B, for the class named."""
        self.sweep = sweep
        n = len(sweep.modules)
        logit = np.asarray(sweep.logit, dtype=float)
        self.curve.setData(np.arange(n, dtype=float), logit)
        self.line_a.setValue(sweep.clean_logit)
        self.line_b.setValue(sweep.corrupted_logit)
        self.line_a.show()
        self.line_b.show()
        self.plot.setXRange(-0.5, n - 0.5, padding=0.02)
        self.x_axis.set_layers([str(i) for i in range(n)], list(sweep.modules))
        self.plot.show()
        recovered = sweep.recovered()
        first = None if recovered is None else next(
            (m for m, r in zip(sweep.modules, recovered, strict=True) if abs(r - 1) <= 1e-3), None)
        where = ("" if first is None else
                 f"<br>From <b>{html.escape(first)}</b> on, B's run gives A's logit.")
        if recovered is None:
            where = "<br>A and B give this class about the same logit: the curve says little."
        notes = "".join(f"<br>{html.escape(n)}" for n in sweep.notes)
        self.header.setText(
            f"<b>Patch sweep</b> \u00b7 class {html.escape(class_label)} \u00b7 "
            f"<span style='color:{B_COLOR}'>B: {html.escape(label_b)}</span> with each "
            f"module's output from <span style='color:{A_COLOR}'>A: {html.escape(label_a)}"
            f"</span> \u00b7 {n} modules{where}{notes}")
        self.header.setToolTip("The logit of the class explained in run B, of B's run with "
                               "that one module's output replaced by its output on image A "
                               "(activation patching, one batched forward). Dashed lines: the "
                               "unpatched runs of A and B.")

    def module_at(self, scene_pos: QPointF) -> int | None:
        if self.sweep is None or not self.plot.isVisible():
            return None
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        i = int(round(vb.mapSceneToView(scene_pos).x()))
        return i if 0 <= i < len(self.sweep.modules) else None

    def _hover(self, scene_pos: QPointF) -> None:
        i = self.module_at(scene_pos)
        if i is None:
            self.hover_label.setText(" ")
            return
        s = self.sweep
        value = s.logit[i]
        shown = "not patched" if math.isnan(value) else (
            f"logit {fmt(value)}   probability {s.prob[i]:.3f}")
        self.hover_label.setText(f"module {i}: {s.modules[i]}   {shown}")

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        i = self.module_at(event.scenePos())
        if i is not None:
            event.accept()
            self.moduleClicked.emit(self.sweep.modules[i])


class PatchSweepControl(QObject):
    """Runs the sweep for the panel: image A from the pinned run's request (`pinned`: a
    callable giving it), image B and its edits from the current run's."""

    def __init__(self, ctx, panel: PatchSweepPanel, pinned) -> None:
        super().__init__(panel)
        self.ctx, self.panel, self.pinned = ctx, panel, pinned
        self.running = False
        # Counts resets: a sweep that finishes after its run A was unpinned (or its model
        # replaced) belongs to nothing shown, and is dropped.
        self.generation = 0
        panel.sweepRequested.connect(self.run)
        panel.moduleClicked.connect(ctx.tree.select_module)

    def run(self, depth) -> bool:
        from inspector.core.edits.patching import PatchFrom, ReplaceOutput
        from inspector.core.run.sweep_job import submit_patch_sweep

        control, store = self.ctx.control, self.ctx.store
        request_a, request_b = self.pinned(), control.last_request
        run_b = control.current_run
        if store.pinned_run is None or request_a is None:
            self.panel.show_message("Pin a run as A first (Compare \u25b8 Pin as A).")
            return False
        if request_b is None or run_b == store.pinned_run or store.status(run_b) != "ok":
            self.panel.show_message("Run another image (B) after pinning A, and wait for it "
                                    "to finish.")
            return False
        if self.running or control.session is None:
            return False
        predictions = store.get(("predictions",), run_b)
        target = getattr(predictions, "target", None)
        if target is None and predictions is not None and predictions.top:
            target = predictions.top[0].index
        edits = tuple(e for e in request_b.interventions
                      if not isinstance(e, (PatchFrom, ReplaceOutput)))
        try:
            future = submit_patch_sweep(control.session, request_a.image, request_b.image,
                                        depth=depth, target=target, edits=edits,
                                        stretch=request_b.stretch)
        except ValueError as e:
            self.panel.show_message(str(e))
            return False
        self.running = True
        self.panel.button.setEnabled(False)
        self.panel.show_message("Patching each module from A into B\u2026")
        labels = (self._label(store.pinned_run), self._label(run_b))
        generation = self.generation
        control.router.watch(future, lambda f: self._done(f, labels, generation))
        return True

    def reset(self) -> None:
        """Run A was unpinned or the model replaced: the sweep shown (or coming) is of runs
        that are gone."""
        self.generation += 1
        self.running = False
        self.panel.button.setEnabled(True)
        self.panel.clear()

    def _label(self, run_id) -> str:
        started = self.ctx.store.started(run_id)
        name = started.label if started is not None and started.label else ""
        return f"run {run_id}" + (f" ({name})" if name else "")

    def _done(self, future, labels, generation) -> None:
        if generation != self.generation:
            return
        self.running = False
        self.panel.button.setEnabled(True)
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            self.panel.show_message(f"The patch sweep failed: {error}" if error is not None
                                    else "The patch sweep was cancelled.")
            return
        sweep = future.result()
        loaded = self.ctx.control.loaded
        label = loaded.label(sweep.target) if loaded is not None else str(sweep.target)
        self.panel.show_sweep(sweep, *labels, label)


def install_sweep(ctx, divergence_view, pinned) -> PatchSweepControl | None:
    """The panel beside the divergence plot, in the Divergence pane (a splitter between
    them); `pinned()` gives run A's request."""
    dock = ctx.docks.get("divergence")
    if dock is None or divergence_view is None:
        return None
    panel = PatchSweepPanel()
    split = QSplitter(Qt.Orientation.Horizontal)
    split.addWidget(divergence_view)
    split.addWidget(panel)
    split.setSizes([500, 400])
    dock.setWidget(split)
    return PatchSweepControl(ctx, panel, pinned)
