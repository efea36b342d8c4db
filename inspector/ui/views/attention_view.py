"""The attention explorer: where a token of a vision transformer attends, block by block.

Click a patch of the image: its token becomes the query, and the image shows where it
attends in the block chosen on the slider (its row of the attention over the patch tokens,
fused over the heads: mean, max or min), with each head's map in the grid beside it. The
class token is the query until a patch is clicked (a model without one: the mean over the
patch queries). Below, each head's mean attention distance in patches over the blocks: the
classic diagnostic of local (small) and global (large) heads. Hover for the values.

Everything is computed here from the run's AttentionFrame (every block's attention of the
first image, read on the non-fused path for that run: core.explain.attention), so clicks and
the slider need no new run; each frame of a playing video brings its own. Runs read the
attention only while this dock is shown (ui.attention.wiring).
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import (
    QComboBox,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.core.explain.attention.explorer import FUSIONS, fuse, query_index, query_maps
from inspector.core.records.frames import AttentionFrame
from inspector.ui.views.attention_heads import DistancePlot, HeadsGrid, heat_over
from inspector.ui.views.base import FrameView, fmt, hint_label
from inspector.ui.views.readout_label import ReadoutLabel

ALPHA = 0.6  # the map's opacity over the image
EMPTY_TEXT = ("Where a vision transformer's tokens attend appears here: open a ViT and drop "
              "an image on the window, then click a patch.")
FAILED_TEXT = "The last run failed before its attention was read: the status bar says why."
READOUT_TIP = ("Under the mouse: a patch's attention weight (its share of the query's "
               "softmax over every token) in the large map (the heads fused) and in each "
               "head's map; on the plot below, each head's mean attention distance in the "
               "block")


class AttentionView(FrameView):
    kinds = ("attention",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.frame: AttentionFrame | None = None
        self.block: int | None = None  # None: the last block
        self.query: int | None = None  # a token; None: the class token (or patch mean)
        self.refusal = ""
        self.maps: np.ndarray | None = None  # (heads, gh, gw) of the block and query shown
        self.fused: np.ndarray | None = None
        # Where the readout was last asked for ("patch" or "distance", a scene position): each
        # paint reads it again, so its values are always the ones shown.
        self._readout_at: tuple[str, QPointF] | None = None
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("The block whose attention is shown")
        self.slider.valueChanged.connect(self._block_chosen)
        self.block_label = QLabel()
        self.fusion_combo = QComboBox()
        for name in FUSIONS:
            self.fusion_combo.addItem(f"{name} over heads", name)
        self.fusion_combo.setToolTip("How the large map fuses the heads: their mean, max or min")
        self.fusion_combo.currentIndexChanged.connect(self.request_paint)
        self.reset = QPushButton("Class token")
        self.reset.setToolTip("Query the class token again (the default), instead of the "
                              "clicked patch")
        self.reset.clicked.connect(self._query_class_token)
        # Shown only with a frame to explore: a model without attention has no blocks.
        self.controls = QWidget()
        controls = QHBoxLayout(self.controls)
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(QLabel("block"))
        controls.addWidget(self.slider, 2)
        controls.addWidget(self.block_label)
        controls.addWidget(self.fusion_combo)
        controls.addWidget(self.reset)
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)

        self.view = pg.GraphicsLayoutWidget()
        self.box = self.view.addViewBox(row=0, col=0, lockAspect=True, invertY=True)
        self.box.setMenuEnabled(False)
        self.box.setMouseEnabled(x=False, y=False)
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.box.addItem(self.image_item)
        self.marker = QGraphicsRectItem()
        pen = QPen(pg.mkColor("#ffffff"))
        pen.setCosmetic(True)
        pen.setWidth(2)
        self.marker.setPen(pen)
        self.box.addItem(self.marker)
        self.heads = HeadsGrid(self.view.addLayout(row=0, col=1))
        self.view.ci.layout.setColumnStretchFactor(0, 3)
        self.view.ci.layout.setColumnStretchFactor(1, 2)
        self.view.scene().sigMouseClicked.connect(self._clicked)
        self.view.scene().sigMouseMoved.connect(self._hover)
        self.distance = DistancePlot()
        self.distance.hovered.connect(self._distance_hover)
        body = QSplitter(Qt.Orientation.Vertical)
        body.addWidget(self.view)
        body.addWidget(self.distance.plot)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 1)
        self.empty = hint_label(EMPTY_TEXT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(body)
        self.hover_label = ReadoutLabel(READOUT_TIP)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.controls)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.hover_label)
        self.subscribe(lambda _f: self.request_paint(), self.kinds)
        self.request_paint()

    # -- what the window tells it ------------------------------------------------------------
    def set_refusal(self, why: str) -> None:
        """Why the model loaded has no attention to explore ("" when it has)."""
        self.refusal = why
        self.request_paint()

    def cleared(self) -> None:
        # A new model: its blocks, heads and grid are others, and so is what was read out.
        self.block = self.query = None
        self._readout_at = None
        self.hover_label.setText(" ")
        super().cleared()

    @property
    def fusion(self) -> str:
        return self.fusion_combo.currentData()

    def shown_frame(self) -> AttentionFrame | None:
        run = self.shown_run
        return None if run is None else self.store.get(("attention",), run)

    def set_query(self, row: int, col: int) -> None:
        """Query the token of patch (row, col) of the shown frame."""
        frame = self.frame
        if frame is None or not frame.all_queries:
            return
        self.query = query_index(row, col, frame.prefix, frame.grid)
        self.request_paint()

    # -- painting -------------------------------------------------------------------------------
    def _paint(self) -> None:
        frame = self.frame = self.shown_frame()
        if frame is None or not frame.modules:
            self.maps = self.fused = None
            self.header.setText("")
            self.controls.hide()
            self.block_label.setText("")
            self._readout_at = None
            self.hover_label.setText(" ")
            why = frame.budget_note if frame is not None else ""
            self.empty.setText(why or self.refusal or (FAILED_TEXT if self.failed else EMPTY_TEXT))
            self.stack.setCurrentWidget(self.empty)
            return
        n = len(frame.modules)
        gh, gw = frame.grid
        if self.query is not None and self.query >= frame.prefix + gh * gw:
            self.query = None  # another input size: another grid
        block = n - 1 if self.block is None or self.block >= n else self.block
        self.slider.blockSignals(True)
        self.slider.setRange(0, n - 1)
        self.slider.setValue(block)
        self.slider.blockSignals(False)
        self.block_label.setText(f"{block} of 0..{n - 1}")
        attention = frame.probs[block].astype(np.float32)  # (heads, queries, tokens)
        query = self.query if frame.all_queries else None
        self.maps = query_maps(attention, query, frame.prefix, frame.grid, frame.class_token)
        self.fused = fuse(self.maps, self.fusion)
        display = self._display()
        self.image_item.setImage(heat_over(display, self.fused, ALPHA), autoLevels=False,
                                 levels=(0, 255))
        self._place_marker(display, query)
        self.heads.show_maps(self.maps)
        self.distance.show(frame.distance, block)
        self.header.setText(self._header_text(frame, block, query))
        self.controls.show()
        self.stack.setCurrentIndex(1)
        self._read_out_again()

    def _display(self) -> np.ndarray | None:
        started = self.store.started(self.frame.run_id)
        return started.display if started is not None else None

    def _place_marker(self, display: np.ndarray | None, query: int | None) -> None:
        frame = self.frame
        gh, gw = frame.grid
        if query is None or query < frame.prefix:
            self.marker.hide()
            return
        h, w = (display.shape[:2] if display is not None else (gh, gw))
        r, c = divmod(query - frame.prefix, gw)
        self.marker.setRect(QRectF(c * w / gw, r * h / gh, w / gw, h / gh))
        self.marker.show()

    def _header_text(self, frame: AttentionFrame, block: int, query: int | None) -> str:
        if query is None:
            who = "the class token" if frame.class_token else "the mean over the patch queries"
        else:
            r, c = divmod(query - frame.prefix, frame.grid[1])
            who = f"patch ({r}, {c}), token {query}"
        heads = self.maps.shape[0]
        text = (f"<b>Where {html.escape(who)} attends</b> in <b>"
                f"{html.escape(frame.modules[block])}</b>, over its {frame.grid[0]} x "
                f"{frame.grid[1]} patches ({frame.prefix} prefix token"
                f"{'s' if frame.prefix != 1 else ''} left out) \u00b7 left: {self.fusion} over "
                f"the heads; right: heads 0\u2013{heads - 1}, row by row; each map scaled to "
                f"its own maximum")
        if frame.all_queries:
            text += " \u00b7 click a patch to query it"
        else:
            text += f"<br><i>{html.escape(frame.budget_note)}</i>"
        return text

    # -- the user's choices ------------------------------------------------------------------
    def _block_chosen(self, value: int) -> None:
        self.block = value
        self.request_paint()

    def _query_class_token(self) -> None:
        self.query = None
        self.request_paint()

    def _patch_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """(row, col) of the patch under a scene position, on the image or a head's map."""
        frame = self.frame
        if frame is None or self.maps is None:
            return None
        gh, gw = frame.grid
        if self.box.sceneBoundingRect().contains(scene_pos):
            p = self.box.mapSceneToView(scene_pos)
            display = self._display()
            h, w = display.shape[:2] if display is not None else (gh, gw)
            r, c = int(p.y() * gh // h), int(p.x() * gw // w)
        else:
            found = self.heads.cell_at(scene_pos)
            if found is None:
                return None
            _, r, c = found
        return (r, c) if 0 <= r < gh and 0 <= c < gw else None

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        patch = self._patch_at(event.scenePos())
        if patch is not None and self.frame.all_queries:
            event.accept()
            self.set_query(*patch)

    def _hover(self, scene_pos: QPointF) -> None:
        if self._patch_at(scene_pos) is not None:
            self._readout_at = ("patch", scene_pos)
            self._read_out_again()

    def _distance_hover(self, scene_pos: QPointF) -> None:
        self._readout_at = ("distance", scene_pos)
        self._read_out_again()

    def _read_out_again(self) -> None:
        """The readout of where it was last asked for, with the values shown now (another
        run, block or query); empty where that place has none any more."""
        if self._readout_at is None:
            return
        where, scene_pos = self._readout_at
        if where == "patch":
            text = self._patch_readout(scene_pos)
        else:
            found = self.distance.readout_at(scene_pos)
            text = None if found is None else f"block {found[0]}: {found[1]}"
        self.hover_label.setText(text or " ")

    def _patch_readout(self, scene_pos: QPointF) -> str | None:
        patch = self._patch_at(scene_pos)
        if patch is None:
            return None
        r, c = patch
        head = self.heads.cell_at(scene_pos)
        text = f"patch ({r}, {c}): {self.fusion} over heads {fmt(float(self.fused[r, c]))}"
        if head is not None:
            text += f"   head {head[0]}: {fmt(float(self.maps[head[0], r, c]))}"
        else:
            values = ", ".join(fmt(float(v)) for v in self.maps[:, r, c])
            text += f"   per head: {values}"
        return text
