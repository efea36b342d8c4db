"""Draws one tensor preview the way its shape asks for, with the controls that go with it.

- (C, H, W), a conv output: a mosaic of the channels in one ImageItem, a page of PAGE_SIZE
  at a time (channel_bar.ChannelBar: previous / next page, channels in their own order or
  sorted by a statistic the owning view gives, jump to a channel by number); click a tile
  to zoom that channel with its histogram and draggable levels (zoom_page.ZoomPage);
  per-channel or shared scale.
- (F,), a vector (a Linear output, logits): bars or a line (vector_page.VectorPage).
- (N, D), tokens: a token x feature heatmap, or the tokens as their square patch grid (the
  class token left out when N - 1 is a square) showing one feature or the mean.

The row above the picture (scale, token layout, vector style, colour map, back from a zoom)
is tensor_controls.TensorControls. Images are updated in place with fixed levels computed
once per frame (`autoLevels=False`); the colour map is only set when the user changes it.
The panel does no run bookkeeping: the view that owns it decides what to show and when (see
base.FrameView), and gives it the per-channel values to sort by
(`show_tensor(channel_keys=...)`).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from inspector.ui.views import colormaps
from inspector.ui.views.base import hint_label
from inspector.ui.views.channel_bar import SORT_CHANGE, SORT_INDEX, ChannelBar
from inspector.ui.views.mosaic import SHARED, ChannelPages, MosaicView, sorted_order
from inspector.ui.views.tensor_controls import TensorControls
from inspector.ui.views.token_page import TokenPage, grid_of
from inspector.ui.views.vector_page import VectorPage
from inspector.ui.views.zoom_page import ZoomPage

TokenGrid = tuple[int, tuple[int, int]]  # (extra tokens, (rows, columns)): token_page

MESSAGE, MOSAIC, ZOOM, VECTOR, TOKENS = "message", "mosaic", "zoom", "vector", "tokens"


def color_bar(cmap: str) -> pg.ColorBarItem:
    """The colour bar beside a mosaic or a token heatmap (its levels follow the picture's)."""
    return pg.ColorBarItem(values=(0.0, 1.0), colorMap=colormaps.get(cmap), interactive=False,
                           width=14, colorMapMenu=False)


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
        self.tokens: TokenPage | None = None  # built when a token output first arrives
        self._grid_allowed = True
        self._token_grid: TokenGrid | None = None  # the view's, from the model input's size
        self._features: int | None = None  # the layer's feature count (a pooled preview)
        # What the zoom page shows beside a channel (an add-on's: the channel's feature
        # visualisation): channel -> (H x W x 3 uint8, caption) or None.
        self.zoom_picture = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        # Scale, token layout, vector style and colour map, and back from a zoom.
        self.controls = TensorControls(diverging)
        self.controls.back_button.clicked.connect(self.unzoom)
        self.controls.changed.connect(self._redraw)
        self.controls.colormapChanged.connect(self._colormap_changed)
        layout.addWidget(self.controls)
        # Paging, sorting and jumping through a layer's channels (mosaic and zoom).
        self.channel_bar = ChannelBar()
        self.channel_bar.stepRequested.connect(self.step)
        self.channel_bar.channelChosen.connect(self.zoom)
        self.channel_bar.orderChanged.connect(self._redraw)
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
    def _build_mosaic_page(self) -> None:
        view = MosaicView(color_bar(self.controls.cmap))
        view.channelClicked.connect(self._mosaic_clicked)
        view.hovered.connect(self._mosaic_hovered)
        self.mosaic_view = view
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
        page = ZoomPage(colormaps.get(self.controls.cmap))
        page.view.scene().sigMouseMoved.connect(partial(self._hover, ZOOM))
        self.zoom_page = page
        self._pages[ZOOM] = page.view

    def _build_vector_page(self) -> None:
        page = VectorPage()
        page.plot.scene().sigMouseMoved.connect(partial(self._hover, VECTOR))
        self.vector_page = page
        self._pages[VECTOR] = page.plot

    def _build_token_page(self) -> None:
        self.tokens = TokenPage(color_bar(self.controls.cmap), partial(self._hover, TOKENS))
        self._pages[TOKENS] = self.tokens.view

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

    def refresh(self) -> None:
        """Draw what is shown again (an add-on's picture beside the zoom changed)."""
        self._redraw()

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
        return self.controls.normalisation

    # -- drawing ----------------------------------------------------------------------------
    def _redraw(self, *_: object) -> None:
        if self.data is not None:
            self._draw()

    def _colormap_changed(self, _name: str) -> None:
        self._apply_colormap()
        self._redraw()

    def _apply_colormap(self) -> None:
        name = self.controls.cmap
        table = colormaps.lut(name)
        cmap = colormaps.get(name)
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
        beside = self.zoom_picture(self.zoomed) if self.zoom_picture is not None else None
        self.zoom_page.show_picture(*(beside or (None, "")))
        self._focus = self.zoomed  # the mosaic shows its page when we go back
        self._set_mode(ZOOM)

    def _draw_vector(self, data: np.ndarray) -> None:
        self._ensure_page(VECTOR)
        self.vector_page.draw(data, self.controls.vector_combo.currentText())
        self._set_mode(VECTOR)

    def _draw_tokens(self, data: np.ndarray) -> None:
        self._ensure_page(TOKENS)
        controls = self.controls
        controls.set_feature_count(data.shape[1])
        self.tokens.draw(data, self._patch_grid(data.shape[0]),
                         controls.token_combo.currentData(), controls.feature_spin.value(),
                         self.normalisation, self.diverging, self._features)
        self._set_mode(TOKENS)

    def _patch_grid(self, n_tokens: int) -> TokenGrid | None:
        """The grid of n tokens: the view's when it fits them, else a square guess."""
        return grid_of(n_tokens, self._token_grid) if self._grid_allowed else None

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        self.pages.setCurrentWidget(self._pages[mode])
        is_tokens = mode == TOKENS
        grid = is_tokens and not self.tokens.is_heatmap
        self.controls.show_for(
            zoomed=mode == ZOOM, scaled=mode == MOSAIC or (is_tokens and not grid),
            coloured=mode in (MOSAIC, ZOOM, TOKENS), vector=mode == VECTOR,
            token_grid=is_tokens and self._patch_grid(self.data.shape[0]) is not None)
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
        self.diverging = diverging
        if self.controls.offer_colormaps(diverging):
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

    def _hover(self, mode: str, scene_pos: QPointF) -> None:
        """The line under the picture: what the zoom, vector or token page (`mode`) names
        at `scene_pos`, while that page is shown."""
        if self.mode != mode or self.data is None:
            return
        if mode == ZOOM:
            text = self.zoom_page.hover_text(scene_pos, self.data, self.zoomed)
        elif mode == TOKENS:
            text = self.tokens.hover_text(scene_pos, self.data)
        else:
            text = self.vector_page.hover_text(scene_pos, self.data)
        if text is not None:
            self.hover_label.setText(text)
