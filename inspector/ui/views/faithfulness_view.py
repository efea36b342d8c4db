"""The Faithfulness tab, beside the class activation map: should the map shown be believed?

For the image shown it holds the faithfulness scores of each method scored so far
(core.run.metrics_cache: kept while the image, class and edits stay, so that looking at
another method keeps them; cleared when one of them changes or a model loads). It shows,
for the method the CAM pane shows, its numbers in the header and its curves
(faithfulness_plots), and for every method scored a table, best first by the column
chosen, with a plain sentence when the metrics disagree on the best method
(faithfulness_table, core.explain.metrics.ranking). Every number's tooltip says how it was
computed.

"Score <method>" and "Score every method" ask the window for a run of the image shown
with the metrics on (ui.faithfulness.actions submits it: the scores come back as
MetricsFrames); its progress shows here, and Cancel stops the scoring, keeping the methods
scored so far ("3 of 12 methods scored; scoring cancelled").
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.core.explain.catalog import DEFAULT_CAM, METHODS
from inspector.core.explain.metrics.names import (
    AVGDROP,
    BASELINES,
    DELETION,
    INSERTION,
    MAX_STEPS,
    ROAD,
    SANITY,
    MetricOptions,
)
from inspector.core.explain.metrics.ranking import disagreement
from inspector.core.records.frames import MetricsFrame, RunFinished, RunStarted
from inspector.core.run.metrics_cache import MetricsCache
from inspector.ui.views.base import FrameView, hint_label
from inspector.ui.views.faithfulness_plots import FaithfulnessPlots
from inspector.ui.views.faithfulness_table import TABLE_MIN_HEIGHT, ScoreTable, method_title
from inspector.ui.views.readout_label import ReadoutLabel

EMPTY_TEXT = ("Score the map shown to see whether to believe it: deletion and insertion "
              "curves, Average Drop, ROAD and the sanity check, on this image with its edits. "
              "Score every method to compare them all.")
DISAGREE_STYLE = "color: #ef6c00; font-weight: 600;"
RISE = "RISE (to zero, from blur)"
BASELINE_TIP = "What deletion puts in and insertion starts from: "
# (the entry, its tooltip, MetricOptions.baseline)
BASELINE_ENTRIES = ((RISE, "RISE's: deletion puts zero in, insertion starts from a blur",
                     None),) + tuple(
    (f"{name} (both curves)", f"{name} for both: deletion puts it in, insertion starts "
     f"from it", name) for name in BASELINES)
ALL_METHODS = "All methods"
DISAGREE_MARK = " \u26a0"  # on the table's tab while the metrics disagree
SPACING = 3  # pixels between the rows: the curves need the height (PLOT_MIN_HEIGHT)


class FaithfulnessView(FrameView):
    scoreRequested = Signal(bool)  # noqa: N815 - True: every method, False: the one shown
    cancelRequested = Signal()  # noqa: N815
    scoresChanged = Signal()  # noqa: N815 - the cache changed: captions follow
    methodActivated = Signal(str)  # noqa: N815 - a table row double-clicked: show it

    kinds = ("metrics",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.cache = MetricsCache()
        self.method, self.layer = DEFAULT_CAM, None  # what the CAM pane shows
        self.scoring_run: int | None = None
        self._stopping = False  # Cancel clicked: the scoring stops at its next check
        self._build()
        self.subscribe(self._metrics_stored, self.kinds)
        self.request_paint()

    def _build(self) -> None:
        self.score_button = QPushButton()
        self.score_button.clicked.connect(lambda: self.scoreRequested.emit(False))
        self.every_button = QPushButton("Score every method")
        self.every_button.setToolTip("Run this image again with every CAM and attribution, "
                                     "and score each map (with the edits on)")
        self.every_button.clicked.connect(lambda: self.scoreRequested.emit(True))
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._cancel)
        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)  # what MetricOptions accepts
        self.steps.setValue(MetricOptions().steps)
        self.steps.setPrefix("steps ")
        self.steps.setToolTip("Deletion and insertion perturb ceil(P / steps) pixels a step")
        self.baseline = QComboBox()
        for text, tip, data in BASELINE_ENTRIES:
            self.baseline.addItem(text, data)
            self.baseline.setItemData(self.baseline.count() - 1, tip,
                                      Qt.ItemDataRole.ToolTipRole)
        # Entries short enough for the right-hand column the CAM pane sets, each shown whole.
        self.baseline.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.baseline.currentIndexChanged.connect(self._baseline_tip)
        self._baseline_tip()
        self.road_box = QCheckBox("ROAD")
        self.road_box.setChecked(True)
        self.road_box.setToolTip("ROAD's imputations solve a sparse system per percentile: "
                                 "the slowest metric on a CPU")
        self.sanity_box = QCheckBox("Sanity")
        self.sanity_box.setChecked(True)
        self.sanity_box.setToolTip("Make each map again as a copy of the model is randomised "
                                   "from the top down")
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(10)
        self.progress_bar.setMinimumWidth(30)
        # "3 of 12 methods scored; scoring cancelled" is wider than the room beside the
        # buttons at 1440 x 900: it ends in "…" there, whole in its tooltip.
        self.progress_label = ReadoutLabel()
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.flag = QLabel()
        self.flag.setWordWrap(True)
        self.flag.setStyleSheet(DISAGREE_STYLE)
        self.plots = FaithfulnessPlots()
        self.table = ScoreTable()
        self.table.setMinimumHeight(TABLE_MIN_HEIGHT)
        self.table.methodActivated.connect(lambda key: self.methodActivated.emit(key[0]))
        # One tab per plot and one for the table, with the flag (it compares the methods):
        # each gets the pane's whole height below the header.
        self.table_page = QWidget()
        page = QVBoxLayout(self.table_page)
        page.setContentsMargins(0, 2, 0, 0)
        page.setSpacing(SPACING)
        page.addWidget(self.flag)
        page.addWidget(self.table, 1)
        self.plots.addTab(self.table_page, ALL_METHODS)
        self.body = self.plots
        self.empty = hint_label(EMPTY_TEXT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.body)
        # Its minimum, not the table's wish for 480 pixels, is what the scroll area (below)
        # asks of the pane: the curves and table get whatever height it has beyond that.
        self.stack.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        buttons = QHBoxLayout()
        for w in (self.score_button, self.every_button, self.cancel_button):
            buttons.addWidget(w)
        buttons.addWidget(self.progress_bar, 1)
        buttons.addWidget(self.progress_label, 1)
        options = QHBoxLayout()
        for w in (self.steps, self.baseline, self.road_box, self.sanity_box):
            options.addWidget(w)
        options.addStretch(1)
        # A pane shorter than its rows and readable curves scrolls rather than squeeze them.
        self.content = QWidget()
        layout = QVBoxLayout(self.content)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(SPACING)
        buttons.setSpacing(SPACING * 2)
        options.setSpacing(SPACING * 2)
        layout.addLayout(buttons)
        layout.addLayout(options)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.content)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        self._show_running(False)
        self._name_button()

    # -- API ----------------------------------------------------------------------------------
    def set_shown(self, method: str, layer: str | None) -> None:
        """The CAM pane shows `method` at `layer`: its scores are the ones drawn."""
        self.method, self.layer = method, layer
        self._name_button()
        self.request_paint()

    def options(self) -> MetricOptions:
        """The metrics the next scoring run computes, as the controls say."""
        metrics = [DELETION, INSERTION, AVGDROP]
        metrics += [ROAD] if self.road_box.isChecked() else []
        metrics += [SANITY] if self.sanity_box.isChecked() else []
        return MetricOptions(metrics=tuple(metrics), steps=self.steps.value(),
                             baseline=self.baseline.currentData())

    def start_scoring(self, run_id: int | None) -> None:
        """The window submitted the scoring run `run_id` (None: it could not)."""
        self.scoring_run, self._stopping = run_id, False
        self.progress_label.setText("" if run_id is None else "starting\u2026")
        self._show_running(run_id is not None)

    def show_progress(self, frame) -> None:
        """A ProgressFrame of any run: shown when it is the scoring run's."""
        if frame.run_id != self.scoring_run or self._stopping:
            return
        self.progress_bar.setRange(0, max(1, frame.total))
        self.progress_bar.setValue(frame.done)
        self.progress_label.setText(f"{frame.detail or frame.step} {frame.done}/{frame.total}")

    def _cancel(self) -> None:
        # The scoring stops at its next progress check, which a map remade for the sanity
        # check (Score-CAM's) can put seconds away: the tab says so at once.
        self._stopping = True
        self.cancel_button.setEnabled(False)
        self.progress_label.setText("cancelling the scoring\u2026")
        self.cancelRequested.emit()

    def caption(self, cam) -> tuple[str, str] | None:
        """(the CAM pane's caption text, its tooltip) for the map `cam` (a CamFrame), once
        scored; None before."""
        frame = self.cache.for_map(cam)
        if frame is None:
            return None
        s = frame.scores
        if s.undefined:
            return "faithfulness undefined", s.undefined
        parts = []
        if s.deletion is not None:
            parts.append(f"deletion AUC {s.deletion.auc:.3f}")
        if s.insertion is not None:
            parts.append(f"insertion AUC {s.insertion.auc:.3f}")
        if not parts:
            return None
        return " \u00b7 ".join(parts), frame.options.describe(DELETION, frame.score)

    # -- what the store says --------------------------------------------------------------------
    def _metrics_stored(self, frame: MetricsFrame) -> None:
        self.cache.add(frame, self.store)
        self.scoresChanged.emit()
        self.request_paint()

    def run_changed(self, frame) -> None:
        if isinstance(frame, RunStarted) and frame.run_id != self.scoring_run:
            # "scored in 89.1 s" and "scoring cancelled" are of the scoring run, not this one.
            self.progress_label.setText("")
        if isinstance(frame, RunFinished):
            if frame.run_id == self.scoring_run:
                self.scoring_run = None
                self._show_running(False)
                took = frame.timings.get("metrics", 0.0) + frame.timings.get("sanity", 0.0)
                stopped = frame.scoring_stopped
                if frame.status == "ok" and stopped is not None:
                    text = f"{stopped[0]} of {stopped[1]} methods scored; scoring cancelled"
                elif frame.status == "ok":
                    text = f"scored in {took:.1f} s"
                else:
                    text = f"scoring {frame.status}"
                self.progress_label.setText(text)
            if self.store.shown == frame.run_id and self.cache.follow(self.store, frame.run_id):
                self.scoresChanged.emit()
        self.request_paint()

    def cleared(self) -> None:
        if self.cache.clear():
            self.scoresChanged.emit()
        super().cleared()

    # -- painting ---------------------------------------------------------------------------------
    def _baseline_tip(self) -> None:
        tip = self.baseline.itemData(self.baseline.currentIndex(), Qt.ItemDataRole.ToolTipRole)
        self.baseline.setToolTip(BASELINE_TIP + (tip or ""))

    def _name_button(self) -> None:
        title = METHODS[self.method].title if self.method in METHODS else self.method
        self.score_button.setText(f"Score {title}")
        self.score_button.setToolTip(f"Run this image again and score {title}'s map")

    def _show_running(self, running: bool) -> None:
        self.cancel_button.setEnabled(running)
        self.progress_bar.setVisible(running)
        if running:
            self.progress_bar.setRange(0, 0)  # busy until the first report

    def shown_frame(self) -> MetricsFrame | None:
        return self.cache.get(self.method, self.layer)

    def _paint(self) -> None:
        frames = self.cache.frames
        if not frames:
            self.header.setText("")
            self.stack.setCurrentWidget(self.empty)
            return
        self.stack.setCurrentWidget(self.body)
        shown = self.shown_frame()
        self.header.setText(self._header_text(shown))
        self.header.setToolTip(next(iter(frames.values())).protocol)
        self.plots.show_scores(shown.scores if shown else None,
                               shown.options if shown else None, shown.score if shown else "")
        self.table.set_frames(frames)
        scores = {k: f.scores for k, f in frames.items()}
        metrics = next(iter(frames.values())).options.metrics
        flag = disagreement(scores, metrics, method_title)
        self.flag.setText(flag or "")
        self.flag.setVisible(bool(flag))
        tab = self.plots.indexOf(self.table_page)
        self.plots.setTabText(tab, ALL_METHODS + (DISAGREE_MARK if flag else ""))
        self.plots.setTabToolTip(tab, flag or "Every method scored on this image")

    def _header_text(self, frame: MetricsFrame | None) -> str:
        title = METHODS[self.method].title if self.method in METHODS else self.method
        if frame is None:
            return f"<i>{html.escape(title)} is not scored on this image yet.</i>"
        s = frame.scores
        if s.undefined:
            return f"<b>{html.escape(title)}</b>: {html.escape(s.undefined)}"
        parts = []
        if s.deletion is not None:
            parts.append(f"deletion AUC {s.deletion.auc:.3f}")
        if s.insertion is not None:
            parts.append(f"insertion AUC {s.insertion.auc:.3f}")
        if s.avg_drop is not None:
            parts.append(f"Average Drop {s.avg_drop:.3f}" + (" (increase)" if s.increase else ""))
        if s.road is not None:
            parts.append(f"ROAD {s.road:.3f} (MoRF {s.road_morf.mean:.3f}, LeRF "
                         f"{s.road_lerf.mean:.3f})")
        if s.sanity:
            verdict = "flagged: the map outlives random weights" if s.sanity_flag else "passes"
            parts.append(f"sanity r {s.sanity_similarity:.2f} ({verdict})")
        elif SANITY in s.notes:
            parts.append(f"sanity: {s.notes[SANITY]}")
        # The attention maps read no layer (their CamFrame says which blocks they read).
        where = f" at {frame.layer}" if frame.layer is not None else ""
        return (f"<b>{html.escape(title)}</b>{html.escape(where)}: "
                + html.escape(" \u00b7 ".join(parts)))
