"""The channel number in the corner of each mosaic tile, so that a sorted page still says
which channel each tile is.

One small pyqtgraph TextItem per tile, reused from page to page (only their texts change
when the page or the order does, only their places when the tiling does). A number is drawn
at a fixed size on screen over the tile's top-left corner, on a translucent dark box; while
a tile is too small on screen for its number to leave most of it visible, the numbers are
hidden (the tooltip and the line under the mosaic still name the channel under the mouse),
and they come back as the user zooms in.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetrics

# A number may cover at most about 40 % of its tile's width and height (its corner: a
# sixth of the tile or less).
ROOM = 2.5
TEXT_COLOR = (255, 255, 255)
BOX_COLOR = (0, 0, 0, 150)


def channel_name(index: int, count: int | None) -> str:
    """How the window names a channel: its 0-based number (the edits' and "go to"'s), with
    the layer's range when the count is known: "channel 84 (0–95)"."""
    return f"channel {index}" if not count else f"channel {index} (0\u2013{count - 1})"


class TileNumbers:
    """The numbers over the tiles of a MosaicView's ImageItem, in its ViewBox `box`."""

    def __init__(self, box: pg.ViewBox) -> None:
        self.box = box
        self.items: list[pg.TextItem] = []
        self.font = QFont()
        self.font.setPointSizeF(max(6.5, self.font.pointSizeF() - 2))
        self._metrics = QFontMetrics(self.font)
        self._shown: tuple = ()  # (channel indices, tile layout) the texts were set for
        self._tile = (0, 0)  # a tile's (height, width) in image pixels
        self.visible = False
        box.sigTransformChanged.connect(self.fit)

    def show(self, channels: np.ndarray, origins: list[tuple[int, int]],
             tile: tuple[int, int]) -> None:
        """Number the tiles: tile k shows `channels[k]` at image position `origins[k]`
        (row, column of its top-left pixel); `tile`: (height, width) of a tile."""
        key = (tuple(int(c) for c in channels), tuple(origins))
        if key == self._shown:  # the same page again (a video's next frame): nothing moves
            return
        self._shown, self._tile = key, tile
        while len(self.items) < len(channels):
            item = pg.TextItem(color=TEXT_COLOR, fill=pg.mkBrush(BOX_COLOR), anchor=(0, 0))
            item.setFont(self.font)
            item.setZValue(6)  # over the image and the gaps, under the hover outline
            self.box.addItem(item, ignoreBounds=True)
            self.items.append(item)
        for k, item in enumerate(self.items):
            if k < len(channels):
                y, x = origins[k]
                item.setText(str(int(channels[k])))
                item.setPos(x, y)
        self.fit()

    def fits(self) -> bool:
        """Whether a tile is big enough on screen for its number to leave most of it free."""
        if not self._shown or self._tile[0] <= 0:
            return False
        px_w, px_h = self.box.viewPixelSize()  # image pixels per screen pixel
        if px_w <= 0 or px_h <= 0:
            return False
        widest = max(self._shown[0], default=0)
        text_w = self._metrics.horizontalAdvance(str(widest)) + 4  # TextItem's padding
        text_h = self._metrics.height()
        tile_h, tile_w = self._tile[0] / px_h, self._tile[1] / px_w
        return tile_w >= ROOM * text_w and tile_h >= ROOM * text_h

    def fit(self, *_args) -> None:
        """Show the numbers while they fit (the view zoomed or resized), else hide them."""
        self.visible = self.fits()
        count = len(self._shown[0]) if self._shown else 0
        for k, item in enumerate(self.items):
            item.setVisible(self.visible and k < count)
