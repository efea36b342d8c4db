"""The CAM pane's row of controls: how the map is computed (a CAM method, or an input
attribution), the layer a CAM is computed at, and the opacity of the map over the image.

The attention maps (rollout, gradient rollout, LeGrad) read a transformer's blocks, not a
layer: the list is disabled for them, and they are greyed out, with the reason as their
tooltip, for a model they do not apply to (`set_attention_refusal`).

An attribution's map is at the model input: it has no layer to choose (the list is
disabled, and hidden for Occlusion, whose patch and stride the pane shows in a row of its
own: occlusion_controls.py).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider, QWidget

from inspector.core.explain.catalog import (
    ATTENTION_CAMS,
    ATTRIBUTION_LAYER,
    ATTRIBUTION_METHODS,
    CAM_METHODS,
)

DEFAULT_ALPHA = 0.5
METHOD_CHARS, LAYER_CHARS = 10, 12  # the lists' widths, in characters
ALPHA_SLIDER_WIDTH = 80  # pixels
ALPHA_TIP = "Opacity of the map over the image: 0% shows the image alone, 100% the map alone"
ATTENTION_TIPS = {
    "rollout": "Attention rollout (Abnar & Zuidema 2020): each block's attention, heads "
               "averaged, half mixed with the identity, multiplied over the blocks; the class "
               "token's row over the patches",
    "gradrollout": "Gradient rollout (Chefer et al. 2021): each block's attention weighted by "
                   "its positive gradient of the class score, accumulated over the blocks",
    "legrad": "LeGrad (Bousselham et al. 2024): the positive gradient of each of the last 4 "
              "blocks' own class score w.r.t. its attention, averaged",
}
LAYER_TIP = "The layer whose activations the map is built from"
ATTENTION_LAYER_TIP = "Attention maps read the blocks' attention, not a layer"


class CamControls(QWidget):
    """Method, layer and opacity. The signals are the user's choices; `set_method` and
    `set_layers` (the window restoring settings, a model loaded) emit none."""

    methodChanged = Signal(str)  # noqa: N815 (Qt signal naming)
    layerChanged = Signal(str)  # noqa: N815 - the layer chosen (see `layer`)
    alphaChanged = Signal(int)  # noqa: N815 - the opacity, in percent

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attention_refusal = ""  # why the attention maps are greyed out ("": they apply)
        self.method_combo = QComboBox()
        for key, method in CAM_METHODS.items():
            self.method_combo.addItem(method.title, key)
            if key in ATTENTION_TIPS:
                self.method_combo.setItemData(self.method_combo.count() - 1, ATTENTION_TIPS[key],
                                              Qt.ItemDataRole.ToolTipRole)
        self.method_combo.insertSeparator(self.method_combo.count())
        for key, method in ATTRIBUTION_METHODS.items():
            self.method_combo.addItem(f"{method.title} (input)", key)
        self.method_combo.setToolTip(
            "How the map is computed: a CAM from a layer's activations and gradients, or an "
            "input attribution (a value per input pixel, from the input gradient, or for "
            "Occlusion from forwards of copies with a patch covered)"
        )
        self.method_combo.currentIndexChanged.connect(self._method_chosen)
        # Both lists may show less than their longest entry (the popup shows it whole): the
        # controls' row must fit the narrowest right-hand column of the default layout.
        fit = QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        self.method_combo.setMinimumContentsLength(METHOD_CHARS)
        self.method_combo.setSizeAdjustPolicy(fit)
        self.layer_combo = QComboBox()
        self.layer_combo.setMinimumContentsLength(LAYER_CHARS)
        self.layer_combo.setSizeAdjustPolicy(fit)
        self.layer_combo.setToolTip(LAYER_TIP)
        self.layer_combo.currentIndexChanged.connect(self._layer_chosen)
        self.alpha_slider = QSlider(Qt.Orientation.Horizontal)
        self.alpha_slider.setRange(0, 100)
        self.alpha_slider.setValue(round(DEFAULT_ALPHA * 100))
        # Squashed to its handle, a slider reads as an unchecked box: never narrower than this.
        self.alpha_slider.setMinimumWidth(ALPHA_SLIDER_WIDTH)
        self.alpha_slider.setMaximumWidth(160)
        self.alpha_slider.setToolTip(ALPHA_TIP)
        self.alpha_label = QLabel()
        self.alpha_label.setToolTip(ALPHA_TIP)
        # As wide as "100%" from the start: a wider text must not widen the row while dragging.
        self.alpha_label.setMinimumWidth(self.alpha_label.fontMetrics().horizontalAdvance("100%"))
        self.alpha_slider.valueChanged.connect(self._alpha_changed)
        self.at_label = QLabel("at")
        opacity = QLabel("opacity")
        opacity.setToolTip(ALPHA_TIP)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.method_combo, 1)
        row.addWidget(self.at_label)
        row.addWidget(self.layer_combo, 1)
        row.addWidget(opacity)
        row.addWidget(self.alpha_slider, 1)
        row.addWidget(self.alpha_label)
        self.alpha_label.setText(f"{self.alpha_slider.value()}%")
        self._enable_layers()

    @property
    def method(self) -> str:
        return self.method_combo.currentData()

    @property
    def layer(self) -> str | None:
        if self.method in ATTRIBUTION_METHODS:
            return ATTRIBUTION_LAYER  # an attribution's map is at the model input
        if self.method in ATTENTION_CAMS:
            return None  # over the blocks (LeGrad: the last 4)
        return self.layer_combo.currentData()

    @property
    def alpha(self) -> float:
        return self.alpha_slider.value() / 100.0

    def set_layers(self, layers: list[str], default: str | None) -> None:
        """The layers a CAM can be computed at, and the one selected."""
        self.layer_combo.blockSignals(True)
        self.layer_combo.clear()
        for name in layers:
            self.layer_combo.addItem(name or "(whole model)", name)
        if default is not None and default in layers:
            self.layer_combo.setCurrentIndex(layers.index(default))
        self.layer_combo.blockSignals(False)

    def set_method(self, method: str) -> None:
        index = self.method_combo.findData(method)
        if index >= 0:
            self.method_combo.blockSignals(True)
            self.method_combo.setCurrentIndex(index)
            self.method_combo.blockSignals(False)
            self._enable_layers()

    def set_attention_refusal(self, why: str) -> None:
        """Grey out the attention maps with `why` as their tooltip ("": they apply)."""
        self.attention_refusal = why
        model = self.method_combo.model()
        for key in ATTENTION_CAMS:
            index = self.method_combo.findData(key)
            if index < 0:
                continue
            model.item(index).setEnabled(not why)
            self.method_combo.setItemData(index, why or ATTENTION_TIPS.get(key, ""),
                                          Qt.ItemDataRole.ToolTipRole)

    def _enable_layers(self) -> None:
        attention = self.method in ATTENTION_CAMS
        self.layer_combo.setEnabled(self.method not in ATTRIBUTION_METHODS and not attention)
        self.layer_combo.setToolTip(ATTENTION_LAYER_TIP if attention else LAYER_TIP)
        occlusion = self.method == "occlusion"
        self.at_label.setVisible(not occlusion)
        self.layer_combo.setVisible(not occlusion)

    def _method_chosen(self, _index: int) -> None:
        self._enable_layers()
        self.methodChanged.emit(self.method)

    def _layer_chosen(self, index: int) -> None:
        if index >= 0:
            self.layerChanged.emit(self.layer)

    def _alpha_changed(self, value: int) -> None:
        self.alpha_label.setText(f"{value}%")
        self.alphaChanged.emit(value)
