"""The tensor panel's channel bar: paging, sorting and jumping through a layer's channels.

Shown under the panel's display controls while a (C, H, W) preview is in the mosaic or
the zoom: previous / next page (in the zoom: previous / next channel in the mosaic's
order), where the page or channel is, the order of the tiles (the layer's own, or by a
per-channel value the view gives, largest first), and "go to" a channel by number.
The panel does the paging itself (mosaic.ChannelPages); this bar only asks for it.

Channels are named by their 0-based number everywhere (the tiles, the zoom, "go to", the
edits), with the layer's range beside it ("channel 84 (0–95)"), never "of 96", which reads as
1-based. A place in a sorted order is a rank, 1-based: "#1–64 of 96 by mean".
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QWidget

from inspector.ui.views.mosaic import ChannelPages

# How the mosaic orders channels: their own order, or by a per-channel value the view gives
# (largest first). SORT_CHANGE is offered only when the view gives it (a reference run).
SORT_INDEX, SORT_MEAN, SORT_MAX, SORT_CHANGE = "index", "mean", "max", "change"
SORT_TEXT = {  # short: the bar shares the activation dock's width with the picture
    SORT_INDEX: "Channel order",
    SORT_MEAN: "By mean",
    SORT_MAX: "By max",
    SORT_CHANGE: "By change",
}


class ChannelBar(QWidget):
    stepRequested = Signal(int)  # -1 / +1: the previous or next page (zoom: channel)
    channelChosen = Signal(int)  # "go to": show this channel alone
    orderChanged = Signal()  # the sort order was changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.prev_button = QPushButton("\u25c0")
        self.next_button = QPushButton("\u25b6")
        for button, step in ((self.prev_button, -1), (self.next_button, 1)):
            button.setFixedWidth(32)
            button.clicked.connect(lambda _=False, s=step: self.stepRequested.emit(s))
        self.page_label = QLabel()
        self.sort_combo = QComboBox()
        for key in (SORT_INDEX, SORT_MEAN, SORT_MAX, SORT_CHANGE):
            self.sort_combo.addItem(SORT_TEXT[key], key)
        self.sort_combo.setToolTip(
            "The order of the tiles: the layer's own, or by each channel's mean or max over "
            "the whole tensor, or by how much it differs from run A (mean |B \u2212 A|); "
            "largest first"
        )
        self.sort_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.sort_combo.setMinimumContentsLength(9)
        self.sort_combo.currentIndexChanged.connect(lambda _index: self.orderChanged.emit())
        self.jump_spin = QSpinBox()
        self.jump_spin.setPrefix("channel ")
        self.jump_spin.setKeyboardTracking(False)  # typing 300 jumps once, on Enter
        self.jump_spin.setToolTip("Show this channel alone (type its number, 0-based as on "
                                  "the tiles, then Enter)")
        self.jump_spin.valueChanged.connect(self.channelChosen)
        for widget in (self.prev_button, self.page_label, self.next_button, self.sort_combo,
                       QLabel("go to"), self.jump_spin):
            row.addWidget(widget)
        row.addStretch(1)

    @property
    def sort_key(self) -> str:
        return self.sort_combo.currentData()

    def offer_change(self, offered: bool) -> None:
        """Offer "by change" only while the view gives a change per channel."""
        item = self.sort_combo.model().item(self.sort_combo.findData(SORT_CHANGE))
        item.setEnabled(offered)
        if self.sort_key == SORT_CHANGE and not offered:
            self.sort_combo.blockSignals(True)
            self.sort_combo.setCurrentIndex(self.sort_combo.findData(SORT_INDEX))
            self.sort_combo.blockSignals(False)

    def show_position(self, pages: ChannelPages, count: int, zoomed: int | None,
                      in_zoom: bool) -> None:
        """Say where the mosaic's page (or, `in_zoom`, the zoomed channel) is among `count`
        channels, and enable the steps that lead somewhere."""
        span = f"0\u2013{count - 1}"
        self.jump_spin.blockSignals(True)
        self.jump_spin.setRange(0, count - 1)
        self.jump_spin.setSuffix(f" ({span})")
        if zoomed is not None:
            self.jump_spin.setValue(zoomed)
        self.jump_spin.blockSignals(False)
        natural = pages.natural()
        by = SORT_TEXT.get(self.sort_key, "").lower()
        if in_zoom:
            where = np.flatnonzero(pages.order == zoomed)
            k = int(where[0]) if where.size else 0
            if natural:
                self.page_label.setText(f"{zoomed} ({span})")
                self.page_label.setToolTip(f"Channel {zoomed} of the layer's channels {span}")
            else:
                self.page_label.setText(f"#{k + 1} of {count}")
                self.page_label.setToolTip(
                    f"Channel {zoomed} is #{k + 1} of the layer's {count} channels {by} "
                    f"(largest first)")
            self.prev_button.setEnabled(k > 0)
            self.next_button.setEnabled(k < count - 1)
            self.prev_button.setToolTip("The channel before this one in the mosaic's order")
            self.next_button.setToolTip("The channel after this one in the mosaic's order")
        else:
            shown = pages.channels()
            first = pages.page * pages.page_size
            last = first + len(shown) - 1
            if natural:
                self.page_label.setText(f"{first}\u2013{last} ({span})")
                self.page_label.setToolTip(
                    f"Page {pages.page + 1} of {pages.page_count}: channels {first} to "
                    f"{last} of the layer's {span}")
            else:
                self.page_label.setText(f"#{first + 1}\u2013{last + 1} of {count}")
                self.page_label.setToolTip(
                    f"Page {pages.page + 1} of {pages.page_count}: #{first + 1} to "
                    f"#{last + 1} of the layer's {count} channels {by} (largest first); "
                    f"each tile shows its channel's number")
            self.prev_button.setEnabled(pages.page > 0)
            self.next_button.setEnabled(pages.page < pages.page_count - 1)
            self.prev_button.setToolTip("Previous page of channels")
            self.next_button.setToolTip("Next page of channels")
