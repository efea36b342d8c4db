"""What the status bar says permanently (model, weights, device, last run, and a video's or
the camera's frame counts while one is open) and the overlay that says what is loading while
there is no model yet.

Only a stream has frames to count: a still image shows none. The tensors the views were
handed (and those the display skipped) are in the last run's tooltip, not beside the
stream's frames, whose "shown" and "dropped" mean something else.

Failures have their own place at the left of the status bar (errors.ErrorReporter).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QWidget

from inspector.core.records.frames import ModelLoaded, RunFinished
from inspector.ui.video.counts import TOOLTIP as STREAM_TIP

WARN_STYLE = "color: #ef6c00; font-weight: 600;"
# The widest a model name, a weights file or a run's label gets in the status bar: longer
# ones are elided in the middle (the tooltip has the whole text), so that the message at
# the left keeps room to be read.
LABEL_MAX = 240
RUN_WORDS = {"ok": "last run", "error": "failed run", "cancelled": "cancelled run"}


class StatusPanel:
    def __init__(self, bar: QStatusBar) -> None:
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)  # an indefinite "working" bar
        self.busy.setMaximumWidth(90)
        self.busy.setMaximumHeight(14)
        self.busy.setTextVisible(False)
        self.model = QLabel("no model")
        self.weights = QLabel("")
        self.device = QLabel("device —")
        self.run = QLabel("no run yet")
        self._run_tip = ""
        self._tensors_tip = ""
        self.stream = QLabel("")  # a video or the camera: its rate and frame counts
        self.stream.setToolTip(STREAM_TIP)
        self.stream.hide()
        self.device.setToolTip("Where the model runs (the Device menu changes it)")
        bar.addPermanentWidget(self.busy)
        for label in (self.model, self.weights, self.device, self.run, self.stream):
            label.setContentsMargins(6, 0, 6, 0)
            bar.addPermanentWidget(label)

    def show_model(self, frame: ModelLoaded) -> None:
        set_elided(self.model, frame.name, frame.description)
        # Random weights make every picture meaningless: say so plainly, in colour.
        # Weights from a file say which file: a checkpoint may hold random or half-trained
        # weights, so "trained" would claim what the app cannot know.
        tip = f"{frame.description}\n{frame.source}" if frame.source else frame.description
        if not frame.pretrained:
            set_elided(self.weights, "RANDOM weights", tip)
            self.weights.setStyleSheet(WARN_STYLE)
        else:
            set_elided(self.weights, f"weights from {source_name(frame.source)}"
                       if frame.source else "weights loaded", tip)
            self.weights.setStyleSheet("")
        self.device.setText(f"device {frame.device}")

    def show_running(self, label: str, progress: str | None = None) -> None:
        """A run going on; `progress` ("Score-CAM 12/64, about 3 s left") once it is long."""
        # Only the image's name is elided: the progress is what the label is there for.
        name = self.run.fontMetrics().elidedText(label, Qt.TextElideMode.ElideMiddle,
                                                 LABEL_MAX // 2)
        text = f"running {name}: {progress}" if progress else f"running {name}…"
        self.run.setText(text)
        self.run.setToolTip(text.replace(name, label, 1) if name != label else "")

    def show_progress(self, done_total: tuple[int, int] | None) -> None:
        """The busy bar as a fraction done, or (None) back to hidden and indefinite."""
        if done_total is None:
            self.busy.setRange(0, 0)
            self.busy.hide()
            return
        done, total = done_total
        self.busy.setRange(0, max(total, 1))
        self.busy.setValue(min(done, total))
        self.busy.show()

    def show_run(self, frame: RunFinished) -> None:
        total = frame.timings.get("total")
        words = RUN_WORDS.get(frame.status, frame.status)
        set_elided(self.run, f"{words} {1000 * total:.0f} ms" if total else words)
        timings = ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in frame.timings.items())
        # the whole text when it was elided, then the timings, then the tensors' counts
        self._run_tip = "\n".join(t for t in (self.run.toolTip(), timings) if t)
        self._set_run_tip()

    def show_stream(self, counts, source: str = "video") -> None:
        """A stream's figures (stream_counts.StreamCounts; None: no stream, the label goes)."""
        if counts is None:
            self.stream.hide()
            return
        text = counts.text(source)
        if self.stream.text() != text:
            self.stream.setText(text)
        self.stream.show()

    def show_frames(self, shown: int, dropped: int) -> None:
        """The tensors (activations, gradients, maps) handed to the views since the window
        started, and those skipped because the display fell behind: in the run's tooltip."""
        self._tensors_tip = (f"tensors handed to the views so far: {shown:,}; skipped because "
                             f"the display fell behind: {dropped:,} (the newest of each tensor "
                             "is always kept)")
        self._set_run_tip()

    def _set_run_tip(self) -> None:
        self.run.setToolTip("\n".join(t for t in (self._run_tip, self._tensors_tip) if t))


def set_elided(label: QLabel, text: str, tip: str = "") -> None:
    """`text` in `label`, elided in the middle past LABEL_MAX pixels; the tooltip is `tip`,
    after the whole text when that was elided."""
    shown = label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideMiddle, LABEL_MAX)
    label.setText(shown)
    label.setToolTip("\n".join(t for t in (text if shown != text else "", tip) if t))


def source_name(source: str) -> str:
    """The file (or HF folder) the weights came from, as the status bar names it."""
    return Path(source).name or source


class LoadingOverlay(QLabel):
    """A dark rounded note over a pane ("Importing PyTorch…"), centred on `over`."""

    def __init__(self, window: QWidget, over: QWidget) -> None:
        super().__init__(window)
        self._window, self._over = window, over
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setMaximumWidth(460)
        self.setStyleSheet(
            "QLabel { background: rgba(30, 30, 30, 200); color: white; font-size: 15px;"
            " border-radius: 8px; padding: 18px 28px; }"
        )

    def say(self, text: str) -> None:
        self.setText(text)
        self.setWordWrap(len(text) > 40)  # short notes on one line; long ones wrap
        self.adjustSize()
        self.place()
        self.show()
        self.raise_()

    def place(self) -> None:
        """Over the pane it belongs to, or mid-window when that pane is hidden."""
        area = self._over if self._over.isVisible() else self._window
        centre = area.mapTo(self._window, area.rect().center()) if area is not self._window \
            else self._window.rect().center()
        self.move(centre.x() - self.width() // 2, centre.y() - self.height() // 2)
