"""The input image with the class activation map overlaid: where the model looked.

The composite is blended in numpy into reused buffers (image + alpha * (heat - image)), so the
alpha slider only costs one multiply-add over the image, and is drawn by one ImageItem.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.core.frames import CamFrame, ModelLoaded, PredictionFrame, RunFinished, RunStarted
from inspector.core.methods import CAM_METHODS
from inspector.ui import colormaps
from inspector.ui.views.base import FrameView, hint_label

METHODS = {name: method.title for name, method in CAM_METHODS.items()}
DEFAULT_ALPHA = 0.5
EMPTY_TEXT = "Drop an image on the window to see where the model looked (class activation map)."
FAILED_TEXT = "The last run failed before the class activation map was computed: the status " \
              "bar says why."
_KEEP_DISPLAYS = 4  # RunStarted images kept until their run's CAM arrives


def heat_rgb(cam: np.ndarray, cmap: str = colormaps.DEFAULT_OVERLAY) -> np.ndarray:
    """(H, W) in [0, 1] -> (H, W, 3) float32 colours of the overlay map."""
    index = np.clip(np.nan_to_num(cam, nan=0.0) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return colormaps.lut(cmap)[index].astype(np.float32)


class CamView(FrameView):
    methodChanged = Signal(str)  # noqa: N815 (Qt signal naming)
    layerChanged = Signal(str)  # noqa: N815

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.cam_frame: CamFrame | None = None  # the CAM on screen
        self.display: np.ndarray | None = None  # the image on screen, HxWx3 uint8
        self.composite: np.ndarray | None = None  # what the ImageItem holds
        self._blend: np.ndarray | None = None  # the reused uint8 blend buffer
        self._displays: dict[int, np.ndarray] = {}
        self._cams: dict[tuple[str, str], CamFrame] = {}  # this run's, by (method, layer)
        self._labels: dict[int, str] = {}
        self._image_f: np.ndarray | None = None
        self._diff: np.ndarray | None = None  # heat - image, float32
        self._scratch: np.ndarray | None = None
        self._finished_without_cam = False

        self.method_combo = QComboBox()
        for key, name in METHODS.items():
            self.method_combo.addItem(name, key)
        self.method_combo.setToolTip("How the map is computed from activations and gradients")
        self.method_combo.currentIndexChanged.connect(self._method_chosen)
        self.layer_combo = QComboBox()
        self.layer_combo.setMinimumContentsLength(16)
        self.layer_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.layer_combo.setToolTip("The layer whose activations the map is built from")
        self.layer_combo.currentIndexChanged.connect(self._layer_chosen)
        self.alpha_slider = QSlider(Qt.Orientation.Horizontal)
        self.alpha_slider.setRange(0, 100)
        self.alpha_slider.setValue(round(DEFAULT_ALPHA * 100))
        self.alpha_slider.setMaximumWidth(160)
        self.alpha_slider.setToolTip("Opacity of the map over the image")
        self.alpha_label = QLabel()
        self.alpha_slider.valueChanged.connect(self._alpha_changed)
        controls = QHBoxLayout()
        controls.addWidget(self.method_combo)
        controls.addWidget(QLabel("at"))
        controls.addWidget(self.layer_combo, 1)
        controls.addWidget(QLabel("overlay"))
        controls.addWidget(self.alpha_slider)
        controls.addWidget(self.alpha_label)

        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        view = pg.GraphicsLayoutWidget()
        self.box = view.addViewBox(row=0, col=0, lockAspect=True, invertY=True)
        self.box.setMenuEnabled(False)
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.box.addItem(self.image_item)
        self.bar = pg.ColorBarItem(
            values=(0.0, 1.0), colorMap=colormaps.get(colormaps.DEFAULT_OVERLAY),
            interactive=False, width=14, colorMapMenu=False,
        )
        self.bar.axis.setLabel("importance")
        view.addItem(self.bar, row=0, col=1)
        self.view = view
        self.empty = hint_label(EMPTY_TEXT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(controls)
        layout.addWidget(self.header)
        layout.addWidget(self.stack, 1)
        self._alpha_changed(self.alpha_slider.value())

    # -- API --------------------------------------------------------------------------------
    @property
    def method(self) -> str:
        return self.method_combo.currentData()

    @property
    def layer(self) -> str | None:
        return self.layer_combo.currentData()

    @property
    def alpha(self) -> float:
        return self.alpha_slider.value() / 100.0

    def set_layers(self, layers: list[str], default: str | None) -> None:
        """The layers a CAM can be computed at, and the one selected (no signal emitted)."""
        self.layer_combo.blockSignals(True)
        self.layer_combo.clear()
        for name in layers:
            self.layer_combo.addItem(name or "(whole model)", name)
        if default is not None and default in layers:
            self.layer_combo.setCurrentIndex(layers.index(default))
        self.layer_combo.blockSignals(False)

    def set_method(self, method: str) -> None:
        """Select a method without emitting methodChanged (the window restoring settings)."""
        index = self.method_combo.findData(method)
        if index >= 0:
            self.method_combo.blockSignals(True)
            self.method_combo.setCurrentIndex(index)
            self.method_combo.blockSignals(False)

    def handle_frame(self, frame: object) -> None:
        if isinstance(frame, RunStarted):
            self._run_started(frame)
        elif isinstance(frame, CamFrame):
            if not self.accept_run(frame.run_id):
                return
            self._cams[(frame.method, frame.layer)] = frame
            self._show_best()
        elif isinstance(frame, PredictionFrame):
            self._labels.update({p.index: p.label for p in frame.top if p.label})
        elif isinstance(frame, RunFinished):
            self._run_finished(frame)
        elif isinstance(frame, ModelLoaded):
            self.clear()

    # -- runs -------------------------------------------------------------------------------
    def _run_started(self, frame: RunStarted) -> None:
        if frame.display is None:
            return
        self._displays[frame.run_id] = frame.display
        for old in sorted(self._displays)[:-_KEEP_DISPLAYS]:
            del self._displays[old]
        same = (
            self.display is not None
            and self.display.shape == frame.display.shape
            and np.array_equal(self.display, frame.display)
        )
        if same:
            return  # keep the current overlay until this run's CAM replaces it: no flicker
        # A different image: the old CAM would be wrong on it, so show the image alone now.
        if self.accept_run(frame.run_id):
            self._set_image(frame.display)
            self._set_cam(None)
            self.request_paint()

    def _run_finished(self, frame: RunFinished) -> None:
        """A run that ends without a map for this view: whatever map is on screen came from
        an earlier run (kept while this one ran, to avoid flicker) and goes now."""
        if frame.status == "cancelled" or (self._run_id is not None and frame.run_id < self._run_id):
            return  # a newer run follows, or this one is already stale
        if frame.run_id == self._run_id and self._cams:
            return  # this run's map is on screen
        if frame.status == "error":
            self.run_failed(frame.run_id)
        else:
            self.accept_run(frame.run_id)
        self._set_cam(None)
        # The run's own image, or nothing: the one on screen may be another image's.
        self._set_image(self._displays.get(frame.run_id))
        self._finished_without_cam = frame.status == "ok"
        self.request_paint()

    def _show_best(self) -> None:
        """The CAM for the selected method and layer if computed, else the newest."""
        cams = self._cams
        best = cams.get((self.method, self.layer))
        if best is None:
            same_method = [f for (m, _), f in cams.items() if m == self.method]
            best = same_method[-1] if same_method else list(cams.values())[-1]
        display = self._displays.get(best.run_id, self.display)
        if display is not self.display:
            self._set_image(display)
        self._set_cam(best)
        self.request_paint()

    def _reset_run(self) -> None:
        self._cams = {}
        self._finished_without_cam = False

    def clear(self) -> None:
        self._displays = {}
        self._labels = {}
        self._set_image(None)
        self._set_cam(None)
        super().clear()

    # -- compositing ------------------------------------------------------------------------
    def _set_image(self, display: np.ndarray | None) -> None:
        self.display = display
        self._image_f = None if display is None else display.astype(np.float32)

    def _set_cam(self, frame: CamFrame | None) -> None:
        self.cam_frame = frame
        self._diff = None
        if frame is None:
            return
        heat = heat_rgb(frame.cam)
        if self._image_f is not None and self._image_f.shape == heat.shape:
            self._diff = heat - self._image_f
        else:
            self._image_f = None  # no image, or not at the CAM's size: show the map alone
            self._diff = heat
        self._finished_without_cam = False

    def _compose(self) -> np.ndarray | None:
        """Blend into the reused composite buffer; returns what to show."""
        if self._diff is None:
            return self.display
        shape = self._diff.shape
        if self._scratch is None or self._scratch.shape != shape:
            self._scratch = np.empty(shape, np.float32)
            self._blend = np.empty(shape, np.uint8)
        if self._image_f is None:
            np.copyto(self._scratch, self._diff)  # the map alone
        else:
            np.multiply(self._diff, self.alpha, out=self._scratch)
            np.add(self._scratch, self._image_f, out=self._scratch)
        np.add(self._scratch, 0.5, out=self._scratch)  # round, not truncate
        np.copyto(self._blend, self._scratch, casting="unsafe")
        return self._blend

    def _alpha_changed(self, value: int) -> None:
        self.alpha_label.setText(f"{value}%")
        if self._diff is not None:
            self.request_paint()

    def _method_chosen(self, _index: int) -> None:
        if self._cams:
            self._show_best()
        self.methodChanged.emit(self.method)

    def _layer_chosen(self, index: int) -> None:
        if index < 0:
            return
        if self._cams:
            self._show_best()
        self.layerChanged.emit(self.layer)

    # -- painting ---------------------------------------------------------------------------
    def _paint(self) -> None:
        image = self._compose()
        if image is None:
            self.header.setText("")
            self.empty.setText(FAILED_TEXT if self.failed else EMPTY_TEXT)
            self.stack.setCurrentWidget(self.empty)
            return
        self.composite = image
        self.image_item.setImage(image, autoLevels=False, levels=(0, 255))
        # Transparent rather than hidden: the image does not jump when the map arrives.
        self.bar.setOpacity(1.0 if self.cam_frame is not None else 0.0)
        self.header.setText(self._header_text())
        self.stack.setCurrentWidget(self.view)

    def _header_text(self) -> str:
        f = self.cam_frame
        if f is None:
            if self.failed:
                return FAILED_TEXT
            if self._finished_without_cam:
                return "This run computed no CAM (it needs gradients: a run with a target class)."
            return "<i>Computing the class activation map\u2026</i>"
        label = self._labels.get(f.target)
        target = f"\u201c{label}\u201d ({f.target})" if label else f"class {f.target}"
        layer = f.layer or "(whole model)"
        text = (
            f"<b>{METHODS.get(f.method, f.method)}</b> at <b>{html.escape(layer)}</b> "
            f"for {html.escape(target)}"
        )
        if (f.method, f.layer) != (self.method, self.layer) and self.layer is not None:
            wanted = f"{METHODS.get(self.method, self.method)} at {self.layer or '(whole model)'}"
            text += f" \u00b7 <i>{html.escape(wanted)} not computed yet</i>"
        if self._image_f is None:
            text += " \u00b7 the map alone (no image of the same size)"
        return text
