"""Draws one tensor preview the way its shape asks for, with the controls that go with it.

- (C, H, W), a conv output: a mosaic of the channels in one ImageItem, a page of PAGE_SIZE
  at a time (channel_bar.ChannelBar: previous / next page, channels in their own order or
  sorted by a statistic the owning view gives, jump to a channel by number); click a tile
  to zoom that channel with its histogram and draggable levels (zoom_page.ZoomPage);
  per-channel or shared scale.
- (F,), a vector (a Linear output, logits): bars or a line (vector_page.VectorPage).
- (N, D), tokens: a token x feature heatmap, or the tokens as their square patch grid (the
  class token left out when N - 1 is a square) showing one feature or the mean.

Images are updated in place with fixed levels computed once per frame (`autoLevels=False`);
the colour map is only set when the user changes it. The panel does no run bookkeeping: the
view that owns it decides what to show and when (see base.FrameView), and gives it the
per-channel values to sort by (`show_tensor(channel_keys=...)`).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.views import colormaps
from inspector.ui.views.base import hint_label
from inspector.ui.views.channel_bar import SORT_CHANGE, SORT_INDEX, ChannelBar
from inspector.ui.views.mosaic import (
    PER_CHANNEL,
    SHARED,
    ChannelPages,
    MosaicView,
    sorted_order,
)
from inspector.ui.views.token_page import (
    TOKEN_GRID_FEATURE,
    TOKEN_GRID_MEAN,
    TOKEN_HEATMAP,
    TokenPage,
    square_grid,
)
from inspector.ui.views.vector_page import AUTO, BARS, LINE, MAX_BARS, VectorPage
from inspector.ui.views.zoom_page import ZoomPage

TokenGrid = tuple[int, tuple[int, int]]  # (extra tokens, (rows, columns)): token_page

MESSAGE, MOSAIC, ZOOM, VECTOR, TOKENS = "message", "mosaic", "zoom", "vector", "tokens"

class TensorPanel(QWidget):
    """Shows one preview array; `diverging` for signed data (gradients): levels symmetric at 0."""

    def __init__(self, diverging: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.diverging = diverging
        self.data: np.ndarray | None = None  # the raw preview on screen
        self.mode = MESSAGE
        self._shown_mode: str | None = None
        self.zoomed: int | None = None  # the channel shown alone, if any
        self._focus: int | None = None  # the channel whose page the mosaic shows next
        self.pages_of_channels = ChannelPages()  # which channels the mosaic's page shows
        self.channel_keys: dict[str, np.ndarray] = {}  # sort key -> a value per channel
        self._default_diverging = diverging
        self._cmaps_chosen: dict[bool, str] = {}  # diverging or not -> the map last chosen
        self.tokens: TokenPage | None = None  # built when a token output first arrives
        self._grid_allowed = True
        self._token_grid: TokenGrid | None = None  # the view's, from the model input's size
        self._features: int | None = None  # the layer's feature count (a pooled preview)
        self._cmap = colormaps.DEFAULT_DIVERGING if diverging else colormaps.DEFAULT_SEQUENTIAL

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self._build_controls())
        # Paging, sorting and jumping through a layer's channels (mosaic and zoom).
        self.channel_bar = ChannelBar()
        self.channel_bar.stepRequested.connect(self.step)
        self.channel_bar.channelChosen.connect(self.zoom)
        self.channel_bar.orderChanged.connect(self._controls_changed)
        layout.addWidget(self.channel_bar)
        self.pages = QStackedWidget()
        layout.addWidget(self.pages, 1)
        self.hover_label = QLabel(" ")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.hover_label)

        self.message = hint_label()
        self._pages = {MESSAGE: self.message}
        self._build_mosaic_page()
        for widget in self._pages.values():
            self.pages.addWidget(widget)
        self._apply_colormap()
        self._set_mode(MESSAGE)

    # -- construction -----------------------------------------------------------------------
    def _build_controls(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        self.back_button = QPushButton("\u2190 All channels")
        self.back_button.setToolTip("Back to the mosaic of all channels (Esc)")
        self.back_button.setShortcut("Esc")
        self.back_button.clicked.connect(self.unzoom)
        self.norm_combo = QComboBox()
        self.norm_combo.addItem("Scale each channel", PER_CHANNEL)
        self.norm_combo.addItem("One scale for all", SHARED)
        self.norm_combo.setToolTip(
            "Each channel: every tile uses its own range, to see patterns in weak channels.\n"
            "One scale: tiles can be compared, strong and weak channels look different."
        )
        self.cmap_combo = QComboBox()
        self.cmap_combo.addItems(colormaps.names(self.diverging))
        self.cmap_combo.setCurrentText(self._cmap)
        self.cmap_combo.setToolTip("Colour map")
        self.token_combo = QComboBox()
        self.token_combo.addItem("Tokens \u00d7 features", TOKEN_HEATMAP)
        self.token_combo.addItem("Token grid: mean of features", TOKEN_GRID_MEAN)
        self.token_combo.addItem("Token grid: one feature", TOKEN_GRID_FEATURE)
        self.feature_spin = QSpinBox()
        self.feature_spin.setPrefix("feature ")
        self.vector_combo = QComboBox()
        self.vector_combo.addItems([AUTO, BARS, LINE])
        self.vector_combo.setToolTip(f"Auto: bars up to {MAX_BARS} values, a line above")
        for combo in (self.norm_combo, self.cmap_combo, self.token_combo, self.vector_combo):
            combo.currentIndexChanged.connect(self._controls_changed)
        self.feature_spin.valueChanged.connect(self._controls_changed)
        for widget in (
            self.back_button,
            self.norm_combo,
            self.token_combo,
            self.feature_spin,
            self.vector_combo,
            self.cmap_combo,
        ):
            row.addWidget(widget)
        row.addStretch(1)
        return row

    def _build_mosaic_page(self) -> None:
        view = MosaicView(self._color_bar())
        view.channelClicked.connect(self._mosaic_clicked)
        view.hovered.connect(self._mosaic_hovered)
        self.mosaic_view = view
        # The edit actions (ui.edits.actions) read the mosaic's tiles and image item here.
        self.mosaic, self.mosaic_item = view.mosaic, view.item
        self._pages[MOSAIC] = view

    def _ensure_page(self, mode: str) -> None:
        """Build the zoom, vector and token pages the first time they are needed: each
        costs 50-150 ms of pyqtgraph set-up, and the window builds two panels before its
        first frames while torch is still importing (both hold the GIL)."""
        if mode in self._pages:
            return
        {ZOOM: self._build_zoom_page, VECTOR: self._build_vector_page,
         TOKENS: self._build_token_page}[mode]()
        self.pages.addWidget(self._pages[mode])
        self._apply_colormap()

    def _build_zoom_page(self) -> None:
        page = ZoomPage(colormaps.get(self._cmap))
        page.view.scene().sigMouseMoved.connect(self._zoom_hover)
        self.zoom_page = page
        self._pages[ZOOM] = page.view

    def _build_vector_page(self) -> None:
        page = VectorPage()
        page.plot.scene().sigMouseMoved.connect(self._vector_hover)
        self.vector_page = page
        self._pages[VECTOR] = page.plot

    def _build_token_page(self) -> None:
        self.tokens = TokenPage(self._color_bar(), self._token_hover)
        self._pages[TOKENS] = self.tokens.view

    def _color_bar(self) -> pg.ColorBarItem:
        return pg.ColorBarItem(
            values=(0.0, 1.0),
            colorMap=colormaps.get(self._cmap),
            interactive=False,
            width=14,
            colorMapMenu=False,
        )

    # -- public -----------------------------------------------------------------------------
    def show_message(self, text: str) -> None:
        self.data = None
        self.message.setText(text)
        self._set_mode(MESSAGE)

    def show_tensor(self, preview: np.ndarray | None, tokens_are_patches: bool = True,
                    channel_keys: dict[str, np.ndarray] | None = None,
                    diverging: bool | None = None, token_grid: TokenGrid | None = None,
                    features: int | None = None) -> None:
        """Draw `preview` (float32, batch dimension already removed). `tokens_are_patches`
        False: (N, D) rows are not the model's tokens (pooled), so no patch grid is offered.
        `channel_keys`: SORT_MEAN / SORT_MAX / SORT_CHANGE -> a value per channel, to order
        the mosaic by. `diverging`: colours for signed data centred at 0 (a difference of
        two runs), else the panel's own kind. `token_grid`: the patch grid of (N, D) tokens
        (token_page.patch_grid), else a square one is guessed; `features`: the layer's own
        feature count when the preview averaged groups of them."""
        if preview is None:
            self.show_message("No preview was captured for this tensor; statistics are above.")
            return
        self.data = preview
        self._grid_allowed = tokens_are_patches
        self._token_grid, self._features = token_grid, features
        self.channel_keys = dict(channel_keys or {})
        self._set_diverging(self._default_diverging if diverging is None else diverging)
        self._sync_sort_combo()
        self._draw()

    def zoom(self, channel: int) -> None:
        """Show one channel of a (C, H, W) preview alone, with its histogram (a click on its
        tile, or "go to"); back in the mosaic, the page that holds it is shown."""
        if self.data is None or self.data.ndim != 3 or not 0 <= channel < self.data.shape[0]:
            return
        self.zoomed = channel
        self._draw()

    def unzoom(self) -> None:
        self.zoomed = None
        if self.data is not None:
            self._draw()

    def step(self, delta: int) -> None:
        """The mosaic: the previous (-1) or next (+1) page. The zoom: the channel before or
        after the shown one, in the mosaic's order."""
        pages = self.pages_of_channels
        if self.mode == ZOOM and self.zoomed is not None:
            where = np.flatnonzero(pages.order == self.zoomed)
            if where.size:
                k = int(where[0]) + delta
                if 0 <= k < pages.count:
                    self.zoom(int(pages.order[k]))
        elif self.mode == MOSAIC:
            pages.go(pages.page + delta)
            self._draw()

    def reset_channels(self) -> None:
        """Another layer: start at its first page, nothing zoomed."""
        self.zoomed = None
        self.pages_of_channels.go(0)

    @property
    def sort_key(self) -> str:
        return self.channel_bar.sort_key

    @property
    def normalisation(self) -> str:
        return self.norm_combo.currentData()

    # -- drawing ----------------------------------------------------------------------------
    def _controls_changed(self, *_: object) -> None:
        if self._cmap != self.cmap_combo.currentText():
            self._cmap = self.cmap_combo.currentText()
            self._apply_colormap()
        if self.data is not None:
            self._draw()

    def _apply_colormap(self) -> None:
        table = colormaps.lut(self._cmap)
        cmap = colormaps.get(self._cmap)
        self.mosaic_view.item.setLookupTable(table)
        self.mosaic_view.bar.setColorMap(cmap)
        if self.tokens is not None:
            self.tokens.item.setLookupTable(table)
            self.tokens.bar.setColorMap(cmap)
        if ZOOM in self._pages:
            self.zoom_page.set_colormap(table, cmap)

    def _draw(self) -> None:
        data = self.data
        if data.ndim == 3 and data.shape[0] > 0 and data.shape[1] > 0 and data.shape[2] > 0:
            if self.zoomed is not None and self.zoomed < data.shape[0]:
                self._draw_zoom(data[self.zoomed])
            else:
                self.zoomed = None
                self._draw_mosaic(data)
        elif data.ndim == 2 and data.size:
            self._draw_tokens(data)
        elif data.ndim == 1 and data.size:
            self._draw_vector(data)
        else:
            self.message.setText(
                f"A preview of shape {tuple(data.shape)} cannot be drawn; statistics are above."
            )
            self._set_mode(MESSAGE)

    def _draw_mosaic(self, data: np.ndarray) -> None:
        pages = self.pages_of_channels
        keys = self.channel_keys.get(self.sort_key) if self.sort_key != SORT_INDEX else None
        pages.set_order(sorted_order(keys, data.shape[0]))
        if self._focus is not None:  # back from a zoom: the page that holds that channel
            page = pages.page_of(self._focus)
            if page is not None:
                pages.go(page)
            self._focus = None
        channels = pages.channels()
        start = pages.page * pages.page_size
        page_data = data[start:start + len(channels)] if pages.natural() else data[channels]
        self.mosaic_view.show_page(page_data, channels, self.normalisation, self.diverging,
                                   count=data.shape[0])
        axis = self.mosaic_view.bar.axis
        if self.normalisation == SHARED:
            axis.setLabel("value")
        elif self.diverging:
            axis.setLabel("\u00f7 each channel's max |value|")
        else:
            axis.setLabel("each channel: min \u2192 max")
        self._set_mode(MOSAIC)

    def _draw_zoom(self, channel: np.ndarray) -> None:
        self._ensure_page(ZOOM)
        self.zoom_page.draw(channel, self.zoomed, self.data.shape[0], self.diverging)
        self._focus = self.zoomed  # the mosaic shows its page when we go back
        self._set_mode(ZOOM)

    def _draw_vector(self, data: np.ndarray) -> None:
        self._ensure_page(VECTOR)
        self.vector_page.draw(data, self.vector_combo.currentText())
        self._set_mode(VECTOR)

    def _draw_tokens(self, data: np.ndarray) -> None:
        self._ensure_page(TOKENS)
        self.feature_spin.blockSignals(True)
        self.feature_spin.setRange(0, data.shape[1] - 1)
        self.feature_spin.blockSignals(False)
        self.tokens.draw(data, self._patch_grid(data.shape[0]), self.token_combo.currentData(),
                         self.feature_spin.value(), self.normalisation, self.diverging,
                         self._features)
        self._set_mode(TOKENS)

    def _patch_grid(self, n_tokens: int) -> TokenGrid | None:
        """The grid of n tokens: the view's when it fits them, else a square guess."""
        if not self._grid_allowed:
            return None
        grid = self._token_grid
        if grid is not None and grid[0] + grid[1][0] * grid[1][1] == n_tokens:
            return grid
        return square_grid(n_tokens)

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        self.pages.setCurrentWidget(self._pages[mode])
        is_tokens = mode == TOKENS
        grid = is_tokens and not self.tokens.is_heatmap
        self.back_button.setVisible(mode == ZOOM)
        self.norm_combo.setVisible(mode == MOSAIC or (is_tokens and not grid))
        self.cmap_combo.setVisible(mode in (MOSAIC, ZOOM, TOKENS))
        has_grid = is_tokens and self._patch_grid(self.data.shape[0]) is not None
        self.token_combo.setVisible(has_grid)
        self.feature_spin.setVisible(has_grid and self.token_combo.currentData() == TOKEN_GRID_FEATURE)
        self.vector_combo.setVisible(mode == VECTOR)
        self._sync_channel_controls()
        if mode != self._shown_mode:  # keep a hover readout while frames of one kind arrive
            self._shown_mode = mode
            self.mosaic_view.hide_outline()
            self.hover_label.setText("Click a channel to zoom in" if mode == MOSAIC else " ")

    def _sync_channel_controls(self) -> None:
        channels = self.data is not None and self.data.ndim == 3 and self.mode in (MOSAIC, ZOOM)
        self.channel_bar.setVisible(channels)
        if channels:
            self.channel_bar.show_position(self.pages_of_channels, self.data.shape[0],
                                           self.zoomed, self.mode == ZOOM)

    def _sync_sort_combo(self) -> None:
        """Offer "by change" only while the view gives a change per channel."""
        self.channel_bar.offer_change(SORT_CHANGE in self.channel_keys)

    def _set_diverging(self, diverging: bool) -> None:
        """Sequential or diverging colours (a difference B - A is signed whatever is shown);
        each kind remembers the map last chosen for it."""
        if diverging == self.diverging:
            return
        self._cmaps_chosen[self.diverging] = self._cmap
        self.diverging = diverging
        default = colormaps.DEFAULT_DIVERGING if diverging else colormaps.DEFAULT_SEQUENTIAL
        self._cmap = self._cmaps_chosen.get(diverging, default)
        self.cmap_combo.blockSignals(True)
        self.cmap_combo.clear()
        self.cmap_combo.addItems(colormaps.names(diverging))
        self.cmap_combo.setCurrentText(self._cmap)
        self.cmap_combo.blockSignals(False)
        self._apply_colormap()

    # -- hover and click --------------------------------------------------------------------
    def _mosaic_hovered(self, hit) -> None:
        if self.mode != MOSAIC or self.data is None or hit is None:
            return
        channel, i, j = hit
        value = self.data[channel, i, j]
        self.hover_label.setText(f"channel {channel}   y {i}, x {j}   value {value:.4g}")

    def _mosaic_clicked(self, channel: int) -> None:
        if self.mode == MOSAIC:
            self.zoom(channel)

    def _zoom_hover(self, scene_pos: QPointF) -> None:
        if self.mode == ZOOM and self.data is not None:
            text = self.zoom_page.hover_text(scene_pos, self.data, self.zoomed)
            if text is not None:
                self.hover_label.setText(text)

    def _token_hover(self, scene_pos: QPointF) -> None:
        if self.mode == TOKENS and self.data is not None:
            text = self.tokens.hover_text(scene_pos, self.data)
            if text is not None:
                self.hover_label.setText(text)

    def _vector_hover(self, scene_pos: QPointF) -> None:
        if self.mode == VECTOR and self.data is not None:
            text = self.vector_page.hover_text(scene_pos, self.data)
            if text is not None:
                self.hover_label.setText(text)
