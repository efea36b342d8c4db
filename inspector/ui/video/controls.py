"""The video player's row under the image: play/pause, one frame back and forward, the
position slider, the frame counter and the "live" mark."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QStyle, QToolButton, QWidget

LIVE_TIP = ("While it plays, each frame updates the selected module's activations, the "
            "predictions and the CAM only (a lean run, to keep up with the video).\n"
            "The gradient view and the other modules' statistics are of the last full run: "
            "pause to run the frame shown in full.")


class VideoControls(QWidget):
    """Play/pause, one frame back and forward, the position slider and the frame counter."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        style = self.style()
        self.play = self._button(style.standardIcon(QStyle.StandardPixmap.SP_MediaPause),
                                 "Pause")
        self.back = self._button(style.standardIcon(QStyle.StandardPixmap.SP_MediaSeekBackward),
                                 "One frame back")
        self.forward = self._button(
            style.standardIcon(QStyle.StandardPixmap.SP_MediaSeekForward), "One frame forward")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("Seek: the frame under the handle is shown and run")
        self.counter = QLabel("")
        # Frames are numbered from 0 everywhere (the batch commands' frame numbers, the
        # Dataset dock, the run's name): the counter reads index / last index.
        self.counter.setToolTip("The frame shown / the last frame, numbered from 0 as in the "
                                "batch commands' and the Dataset dock's frame numbers")
        self.counter.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.live = QLabel("live")
        self.live.setToolTip(LIVE_TIP)
        self.live.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.play, self.back, self.forward):
            layout.addWidget(widget)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.counter)
        layout.addWidget(self.live)

    def _button(self, icon, tip: str) -> QToolButton:
        button = QToolButton()
        button.setIcon(icon)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        return button

    def show_playing(self, playing: bool) -> None:
        pixmap = QStyle.StandardPixmap.SP_MediaPause if playing else \
            QStyle.StandardPixmap.SP_MediaPlay
        self.play.setIcon(self.style().standardIcon(pixmap))
        self.play.setToolTip("Pause" if playing else "Play")
        self.live.setVisible(playing)

    def set_seekable(self, seekable: bool, frames: int = 1) -> None:
        for widget in (self.back, self.forward, self.slider):
            widget.setEnabled(seekable)
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(frames - 1, 0))
        self.slider.blockSignals(False)
        if seekable and self.counter.text():  # a frame is shown: the exact count may differ
            self.show_position(self.slider.value())

    def show_position(self, index: int) -> None:
        self.slider.blockSignals(True)  # only the user's moves seek
        self.slider.setValue(index)
        self.slider.blockSignals(False)
        self.counter.setText(position_text(index, self.slider.maximum()))


def position_text(index: int, last: int) -> str:
    """The frame shown and the last frame, both numbered from 0 (the slider's convention)."""
    return f"{index} / {last}"
