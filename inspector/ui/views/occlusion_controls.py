"""The settings of occlusion sensitivity in the CAM pane: the patch's side and the stride
between two patch positions, in model-input pixels (core.explain.catalog.AttributionOptions).

Shown in a row below the method list while Occlusion is the chosen method (an attribution
has no layer: the layer list is hidden); a change reruns the image, like choosing another
layer. A row of its own, so that showing it never widens the pane.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QWidget

from inspector.core.explain.catalog import AttributionOptions

MAX_SIDE = 1024  # pixels: larger than any model input the catalog has


class OcclusionControls(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        defaults = AttributionOptions()
        self.patch = self._spin(2, defaults.occlusion_patch,
                                "The side of the square patch slid over the input (the data "
                                "set's mean colour), in model-input pixels")
        self.stride = self._spin(1, defaults.occlusion_stride,
                                 "The step between two patch positions, in model-input pixels: "
                                 "smaller is finer and takes more forwards")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("patch"))
        layout.addWidget(self.patch)
        layout.addWidget(QLabel("stride"))
        layout.addWidget(self.stride)
        layout.addStretch(1)

    def _spin(self, minimum: int, value: int, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(minimum, MAX_SIDE)
        spin.setValue(value)
        spin.setSuffix(" px")
        spin.setToolTip(tip)
        spin.setKeyboardTracking(False)  # typing "48" runs once, not for "4" and then "48"
        spin.valueChanged.connect(self.changed)
        return spin

    def options(self) -> AttributionOptions:
        return AttributionOptions(occlusion_patch=self.patch.value(),
                                  occlusion_stride=self.stride.value())
