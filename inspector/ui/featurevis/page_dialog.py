"""Visualise page: the pictures of a mosaic page's channels forming as one batch, with the
steps to run, the progress and Cancel."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

ICON = 112
ITEM = QSize(ICON + 8, ICON + 24)  # a picture and its channel number below


def pixmap_of(rgb: np.ndarray) -> QPixmap:
    """A QPixmap of an H x W x 3 uint8 picture (copied)."""
    rgb = np.ascontiguousarray(rgb)
    h, w, _ = rgb.shape
    return QPixmap.fromImage(QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy())


class PageDialog(QDialog):
    """One job's pictures; `restart(steps)` asks for the page again with other steps."""

    restart = Signal(int)
    cancelled = Signal()

    def __init__(self, parent, steps: int) -> None:
        super().__init__(parent)
        self.setWindowTitle("Feature visualisation")
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.list = QListWidget()
        self.list.setViewMode(QListView.ViewMode.IconMode)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setMovement(QListView.Movement.Static)
        self.list.setIconSize(QSize(ICON, ICON))
        # A fixed grid: the items are laid out before their pictures exist.
        self.list.setGridSize(ITEM + QSize(4, 4))
        self.list.setSpacing(4)
        self.progress = QProgressBar()
        self.steps = QSpinBox()
        self.steps.setRange(1, 100000)
        self.steps.setValue(steps)
        self.steps.setToolTip("Optimisation steps (Adam, lr 0.05): Lucid's default is 512; "
                              "on a CPU fewer keep a page to minutes")
        self.again = QPushButton("Run again")
        self.again.clicked.connect(lambda: self.restart.emit(self.steps.value()))
        self.stop = QPushButton("Cancel")
        self.stop.clicked.connect(self.cancelled.emit)
        row = QHBoxLayout()
        row.addWidget(QLabel("Steps"))
        row.addWidget(self.steps)
        row.addWidget(self.progress, 1)
        row.addWidget(self.again)
        row.addWidget(self.stop)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.list, 1)
        layout.addLayout(row)
        self.resize(8 * (ICON + 14) + 40, 600)
        self.job = None
        self._items: dict[int, QListWidgetItem] = {}

    def show_job(self, job) -> None:
        self.job = job
        self.list.clear()
        self._items = {}
        for c in job.channels:
            item = QListWidgetItem(str(c))
            item.setTextAlignment(Qt.AlignmentFlag.AlignHCenter)
            # The size the item has once its picture is in: the view places an item by its
            # size when it is added (centred in its cell), and an icon set later grew it
            # rightwards from there, the last column past the view's edge.
            item.setSizeHint(ITEM)
            self.list.addItem(item)
            self._items[c] = item
        self.header.setText(
            f"<b>{job.layer}</b>: {len(job.channels)} channels optimised as one batch, each "
            f"for its own mean (Lucid's parameterisation and transforms, Adam 0.05, seed "
            f"{job.settings.seed}); the number under a picture is the channel.")
        self.progress.setRange(0, job.steps)
        self.update_job(job)

    def update_job(self, job) -> None:
        if job is not self.job:
            return
        for c, pixels in job.pictures.items():
            item = self._items.get(c)
            if item is not None:
                item.setIcon(QIcon(pixmap_of(pixels)))
                item.setToolTip(job.caption(c))
        stopped = job.cancelled or job.error
        self.progress.setValue(job.done if stopped or not job.finished else job.steps)
        if job.error:
            self.progress.setFormat(job.error)
        elif job.cancelled:
            self.progress.setFormat("cancelled at step %v of %m")
        else:
            self.progress.setFormat("done" if job.finished else "step %v of %m")
        self.stop.setEnabled(not job.finished)
        self.again.setEnabled(job.finished)
