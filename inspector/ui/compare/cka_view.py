"""The Model comparison pane: the CKA heatmap of a `compare-models` run (its cka.json), and
for a clicked cell the matched channels of that layer pair, with both models' mosaics side by
side (tile k of A's is matched with tile k of B's).

Rows are model A's layers (the first at the top, named), columns model B's (numbered: their
names would overlap; hovering a cell names both), in forward order; the colour bar runs
from 0 to 1. The header says the estimator and the number of images, and its
tooltip how the number is computed. Hovering names the cell; clicking one emits
`cellClicked(layer_a, layer_b)` and frames it.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.batch.compare_models.writers import ESTIMATOR_TEXT, MEASURE
from inspector.ui.views.base import hint_label
from inspector.ui.views.layer_axis import LayerAxis

MOSAIC_PAIRS = 16  # the top matched pairs shown as tiles
MOSAIC_SIDE = 220  # the largest a mosaic is drawn, in pixels
CROP_PAIRS, CROP_SIDE = 4, 52  # the top pairs whose atlas crops are shown, and their size
EMPTY_TEXT = ("File \u25b8 Compare with model\u2026 runs model A (the one loaded) and a model B "
              "over images and shows here how similar each layer of A is to each layer of B.")


class CkaView(QWidget):
    cellClicked = Signal(str, str)  # noqa: N815 (Qt signal naming) - layer of A, layer of B

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc: dict | None = None
        self.values: np.ndarray | None = None
        self.header = QLabel("")
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        # Ticks at the middle of each cell: A's layer names (elided), B's layer numbers; both
        # thinned to what fits, the whole name on hover.
        self.axis_a, self.axis_b = (LayerAxis("left", offset=0.5, max_label_px=110),
                                     LayerAxis("bottom", offset=0.5))
        self.plot = pg.PlotWidget(axisItems={"left": self.axis_a, "bottom": self.axis_b})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(False)
        self.plot.invertY(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get("viridis"),
                                   interactive=False, label="linear CKA")
        self.bar.setImageItem(self.image, insert_in=self.plot.getPlotItem())
        self.frame = pg.QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        self.frame.setPen(pg.mkPen("#ff4040", width=2, cosmetic=True))
        self.frame.hide()
        self.plot.addItem(self.frame)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.hover_label = QLabel(" ")
        self.empty = hint_label(EMPTY_TEXT)
        self.matches = MatchPanel()

        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.header)
        column.addWidget(self.empty)
        column.addWidget(self.plot, 1)
        column.addWidget(self.hover_label)
        # The heatmap above the matched channels: the pane is a tab among the per-module
        # views, taller than it is wide beside the heatmap's names and colour bar.
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(left)
        split.addWidget(self.matches)
        split.setSizes([560, 440])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)
        self.show_document(None)

    # -- what is shown ----------------------------------------------------------------------------
    def show_document(self, doc: dict | None) -> None:
        """A cka.json document (None: nothing yet)."""
        self.doc = doc
        self.frame.hide()
        self.matches.clear()
        has = doc is not None and bool(doc.get("cka"))
        self.plot.setVisible(has)
        self.empty.setVisible(not has)
        if not has:
            self.values = None
            self.header.setText("")
            return
        rows = [[math.nan if v is None else v for v in row] for row in doc["cka"]]
        self.values = np.array(rows, dtype=np.float64)
        self.image.setImage(np.nan_to_num(self.values, nan=0.0), levels=(0.0, 1.0))
        self.image.setRect(0, 0, self.values.shape[1], self.values.shape[0])
        self.axis_a.set_layers(doc["layers_a"])
        self.axis_b.set_layers([str(i) for i in range(len(doc["layers_b"]))], doc["layers_b"])
        self.axis_a.set_title(f"A: {doc['model_a']}")
        self.axis_b.set_title(f"B: {doc['model_b']}, layer number in forward order")
        self.plot.autoRange(padding=0)
        failed = f" \u00b7 {len(doc.get('failed', []))} failed" if doc.get("failed") else ""
        self.header.setText(
            f"<b>Linear CKA</b> \u00b7 {html.escape(doc['estimator'])} \u00b7 {doc['images']} "
            f"images{failed} \u00b7 rows {html.escape(doc['model_a'])} (A), columns "
            f"{html.escape(doc['model_b'])} (B) \u00b7 click a cell for its matched channels")
        self.header.setToolTip(f"{MEASURE}.\n{ESTIMATOR_TEXT[doc['estimator']]}.")

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        if self.values is None:
            return None
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        r, c = int(math.floor(p.y())), int(math.floor(p.x()))
        rows, cols = self.values.shape
        return (r, c) if 0 <= r < rows and 0 <= c < cols else None

    def select(self, row: int, col: int) -> None:
        """Frame the cell and ask for its matched channels (cellClicked)."""
        doc = self.doc
        self.frame.setRect(col, row, 1, 1)
        self.frame.show()
        la, lb = doc["layers_a"][row], doc["layers_b"][col]
        self.matches.waiting(la, lb, self.values[row, col])
        self.cellClicked.emit(la, lb)

    def _hover(self, scene_pos: QPointF) -> None:
        cell = self.cell_at(scene_pos)
        if cell is None:
            self.hover_label.setText(" ")
            return
        r, c = cell
        v = self.values[r, c]
        shown = "not defined (a layer without variance)" if math.isnan(v) else f"{v:.4f}"
        self.hover_label.setText(f"A {self.doc['layers_a'][r]} \u00d7 B "
                                 f"{self.doc['layers_b'][c]}: CKA {shown}")

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            event.accept()
            self.select(*cell)


class MatchPanel(QWidget):
    """The matched channels of the selected layer pair: a table and the two mosaics."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.status = QLabel("")
        for label in (self.title, self.status):  # two lines each, whatever the layout offers
            label.setWordWrap(True)
            label.setMinimumHeight(2 * label.fontMetrics().lineSpacing() + 4)
        self.table = QTableWidget(0, 3)
        # Short headers, the columns sharing the table's width: beside the mosaics it is
        # narrow. The tooltips say what each column is.
        self.table.setHorizontalHeaderLabels(["A", "B", "r"])
        self.table.horizontalHeaderItem(0).setToolTip("The channel of model A's layer")
        self.table.horizontalHeaderItem(1).setToolTip("The channel of model B's layer "
                                                      "matched with it")
        self.table.horizontalHeaderItem(2).setToolTip(
            "r: the Pearson correlation of the two channels over images and positions (Li et "
            "al. 2015); the pairs are the one-to-one matching with the largest summed "
            "correlation")
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.mosaic_a, self.mosaic_b = FittedPixmap(), FittedPixmap()
        self.caption_a, self.caption_b = QLabel(""), QLabel("")
        self.crops_a, self.crops_b = QLabel(), QLabel()  # atlas crops, where an atlas was given
        tiles = QHBoxLayout()
        for caption, mosaic, crops in ((self.caption_a, self.mosaic_a, self.crops_a),
                                       (self.caption_b, self.mosaic_b, self.crops_b)):
            box = QVBoxLayout()
            box.addWidget(caption)
            box.addWidget(mosaic, 1)
            box.addWidget(crops)
            tiles.addLayout(box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.status)
        below = QHBoxLayout()  # the table beside the mosaics: the pane is below the heatmap
        below.addWidget(self.table, 2)
        below.addLayout(tiles, 3)
        layout.addLayout(below, 1)
        self.clear()

    def clear(self) -> None:
        self.title.setText("<i>Click a cell of the heatmap:<br>its two layers' channels are "
                           "matched here.</i>")
        self.status.setText("")
        self.table.setRowCount(0)
        for label in (self.mosaic_a, self.mosaic_b, self.caption_a, self.caption_b,
                      self.crops_a, self.crops_b):
            label.clear()
            label.setToolTip("")
        for mosaic in (self.mosaic_a, self.mosaic_b):
            mosaic.set_source(None)

    def waiting(self, layer_a: str, layer_b: str, value: float) -> None:
        self.clear()
        v = "n/a" if math.isnan(value) else f"{value:.3f}"
        self.title.setText(f"<b>A</b> {html.escape(layer_a)} \u00b7 <b>B</b> "
                           f"{html.escape(layer_b)}<br>CKA {v}")
        self.status.setText("Matching their channels\u2026")

    def show_failure(self, message: str) -> None:
        self.status.setText(f"No matched channels: {message}")

    def show_match(self, result) -> None:
        """A batch.compare_models.match.LayerMatch."""
        m, plan = result.match, result.plan
        grid = (f" on a {plan.grid[0]}x{plan.grid[1]} grid" if plan.grid is not None
                and len(plan.grid) == 2 else "")
        self.status.setText(
            f"{result.images} images, {result.samples} samples{grid}\n{len(m.pairs)} pairs, "
            f"{len(m.lost)} lost (A), {len(m.new)} new (B) below {m.threshold:g}; dead: "
            f"{len(m.dead_a)} (A), {len(m.dead_b)} (B)")
        self.status.setToolTip("\n".join(n for n in (plan.note, *result.crop_notes) if n))
        self.table.setRowCount(len(m.pairs))
        for row, (a, b, r) in enumerate(m.pairs):
            for col, text in enumerate((str(a), str(b), f"{r:.3f}")):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.table.setItem(row, col, item)
        top = m.pairs[:MOSAIC_PAIRS]
        for label, caption, example, channels, name in (
                (self.mosaic_a, self.caption_a, result.example_a, [a for a, _, _ in top], "A"),
                (self.mosaic_b, self.caption_b, result.example_b, [b for _, b, _ in top], "B")):
            grid_img = _tiles(example, channels)
            if grid_img is None:
                caption.setText(f"{name}: no map to show")
                continue
            caption.setText(f"{name}: the top {len(channels)} pairs\non the first image")
            caption.setToolTip(f"Model {name}'s output of its layer on the first image, one "
                               f"tile per channel (each from its own min to its max), in the "
                               f"order of the table's pairs: tile k of A matches tile k of B")
            qimg = QImage(grid_img.data, grid_img.shape[1], grid_img.shape[0],
                          grid_img.strides[0], QImage.Format.Format_Grayscale8).copy()
            label.set_source(QPixmap.fromImage(qimg))
        for label, caption, crops, channels, name in (
                (self.crops_a, self.caption_a, result.crops_a, [a for a, _, _ in m.pairs], "A"),
                (self.crops_b, self.caption_b, result.crops_b, [b for _, b, _ in m.pairs], "B")):
            self._show_crops(label, caption, crops, channels[:CROP_PAIRS], name)
        missing = [n for n in result.crop_notes if n.startswith("no crops")]
        if missing:  # an atlas was given and shows nothing: why, in the pane itself
            self.status.setText(f"{self.status.text()}\n{'; '.join(missing)}")

    def _show_crops(self, label: QLabel, caption: QLabel, crops: dict[int, list[str]],
                    channels: list[int], name: str) -> None:
        """The top atlas crop of each of the top pairs' channels, in the table's order."""
        strip = _crop_strip([crops.get(c, [None])[0] for c in channels])
        if strip is None:
            return
        caption.setText(f"{caption.text()}; under it, the\natlas's top crop of the first "
                        f"{len(channels)}")
        qimg = QImage(strip.data, strip.shape[1], strip.shape[0], strip.strides[0],
                      QImage.Format.Format_RGB888).copy()
        label.setPixmap(QPixmap.fromImage(qimg))
        label.setToolTip(f"Model {name}'s atlas: the image that excites each channel most "
                         f"(its crop), for the top {len(channels)} pairs in the table's order; "
                         f"blank where the atlas has no crop of the channel")


class FittedPixmap(QLabel):
    """A picture scaled to the room the layout gives it (whole, its aspect kept, never above
    MOSAIC_SIDE): a fixed size would be cut where the pane is short."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source: QPixmap | None = None
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setMinimumSize(48, 48)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)

    def set_source(self, pixmap: QPixmap | None) -> None:
        self.source = pixmap
        self._fit()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(MOSAIC_SIDE, MOSAIC_SIDE)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        if self.source is None or self.source.isNull():
            self.clear()
            return
        room = self.contentsRect().size().boundedTo(QSize(MOSAIC_SIDE, MOSAIC_SIDE))
        self.setPixmap(self.source.scaled(room, Qt.AspectRatioMode.KeepAspectRatio,
                                          Qt.TransformationMode.FastTransformation))


def _crop_strip(paths: list[str | None]) -> np.ndarray | None:
    """The crop files side by side, each in a CROP_SIDE square (blank where None or
    unreadable); None when there is none."""
    from PIL import Image

    if not any(paths):
        return None
    strip = Image.new("RGB", (len(paths) * (CROP_SIDE + 2), CROP_SIDE), (255, 255, 255))
    for k, path in enumerate(paths):
        if path is None:
            continue
        try:
            with Image.open(path) as img:
                crop = img.convert("RGB")
        except OSError:
            continue
        crop.thumbnail((CROP_SIDE, CROP_SIDE))
        strip.paste(crop, (k * (CROP_SIDE + 2) + (CROP_SIDE - crop.width) // 2,
                           (CROP_SIDE - crop.height) // 2))
    return np.ascontiguousarray(np.asarray(strip))


def _tiles(example, channels: list[int]) -> np.ndarray | None:
    """The channels of a (C, h, w) output as a grayscale grid, in the order given."""
    import torch

    from inspector.core.export.files import mosaic

    if example is None or example.ndim != 3 or not channels:
        return None
    return np.ascontiguousarray(mosaic(example[torch.tensor(channels)], nrow=4))
