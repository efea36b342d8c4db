"""The selected module's output: channels as a mosaic, vectors as bars, tokens as a heatmap."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from inspector.core.records.kinds import OUTPUT
from inspector.ui.views.tensor_view import TensorView


class ActivationView(TensorView):
    """Shows the OUTPUT ActivationFrame of the module given to `set_module`."""


    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__((OUTPUT,), diverging=False, parent=parent, store=store)
