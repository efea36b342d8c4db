"""The row of controls above a tensor panel's picture; the panel shows those that apply
to what it draws (`show_for`):

- back to the mosaic (while one channel is zoomed);
- each channel on its own scale, or one scale for all (a mosaic, a token heatmap);
- a token output as a token x feature heatmap, or as its patch grid showing the mean of
  the features or one feature (with the feature's number);
- a vector as bars or a line;
- the colour map, from the sequential maps or, for signed data, the diverging ones: each
  kind remembers the map last chosen for it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QPushButton, QSpinBox, QWidget

from inspector.ui.views import colormaps
from inspector.ui.views.mosaic import PER_CHANNEL, SHARED
from inspector.ui.views.token_page import TOKEN_GRID_FEATURE, TOKEN_GRID_MEAN, TOKEN_HEATMAP
from inspector.ui.views.vector_page import AUTO, BARS, LINE, MAX_BARS


class TensorControls(QWidget):
    changed = Signal()  # how to draw changed: scale, token layout, feature, vector style
    colormapChanged = Signal(str)  # noqa: N815 (Qt signal naming) - the map's name

    def __init__(self, diverging: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._diverging = diverging  # which kind of colour maps the list offers
        self._chosen: dict[bool, str] = {}  # diverging or not -> the map last chosen
        self.cmap = colormaps.DEFAULT_DIVERGING if diverging else colormaps.DEFAULT_SEQUENTIAL
        self.back_button = QPushButton("\u2190 All channels")
        self.back_button.setToolTip("Back to the mosaic of all channels (Esc)")
        self.back_button.setShortcut("Esc")
        self.norm_combo = QComboBox()
        self.norm_combo.addItem("Scale each channel", PER_CHANNEL)
        self.norm_combo.addItem("One scale for all", SHARED)
        self.norm_combo.setToolTip(
            "Each channel: every tile uses its own range, to see patterns in weak channels.\n"
            "One scale: tiles can be compared, strong and weak channels look different."
        )
        self.cmap_combo = QComboBox()
        self.cmap_combo.addItems(colormaps.names(diverging))
        self.cmap_combo.setCurrentText(self.cmap)
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
            combo.currentIndexChanged.connect(self._changed)
        self.feature_spin.valueChanged.connect(self._changed)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for widget in (self.back_button, self.norm_combo, self.token_combo, self.feature_spin,
                       self.vector_combo, self.cmap_combo):
            row.addWidget(widget)
        row.addStretch(1)

    @property
    def normalisation(self) -> str:
        return self.norm_combo.currentData()

    def set_feature_count(self, features: int) -> None:
        """The features a token output has: the range of the feature spin box."""
        self.feature_spin.blockSignals(True)
        self.feature_spin.setRange(0, features - 1)
        self.feature_spin.blockSignals(False)

    def offer_colormaps(self, diverging: bool) -> bool:
        """Offer the sequential or the diverging maps, selecting the one last chosen of that
        kind (no signal); False when that kind is offered already."""
        if diverging == self._diverging:
            return False
        self._chosen[self._diverging] = self.cmap
        self._diverging = diverging
        default = colormaps.DEFAULT_DIVERGING if diverging else colormaps.DEFAULT_SEQUENTIAL
        self.cmap = self._chosen.get(diverging, default)
        self.cmap_combo.blockSignals(True)
        self.cmap_combo.clear()
        self.cmap_combo.addItems(colormaps.names(diverging))
        self.cmap_combo.setCurrentText(self.cmap)
        self.cmap_combo.blockSignals(False)
        return True

    def show_for(self, *, zoomed: bool, scaled: bool, coloured: bool, token_grid: bool,
                 vector: bool) -> None:
        """Show the back button (`zoomed`), the scale choice (`scaled`), the colour maps
        (`coloured`), the token layout (`token_grid`: tokens that form a patch grid; the
        feature's number too while the grid shows one feature) and the vector style."""
        self.back_button.setVisible(zoomed)
        self.norm_combo.setVisible(scaled)
        self.cmap_combo.setVisible(coloured)
        self.token_combo.setVisible(token_grid)
        self.feature_spin.setVisible(token_grid
                                     and self.token_combo.currentData() == TOKEN_GRID_FEATURE)
        self.vector_combo.setVisible(vector)

    def _changed(self, *_: object) -> None:
        if self.cmap != self.cmap_combo.currentText():
            self.cmap = self.cmap_combo.currentText()
            self.colormapChanged.emit(self.cmap)
        else:
            self.changed.emit()
