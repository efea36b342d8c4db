"""The input image with the class activation map overlaid: where the model looked.

The same pane shows input attributions (saliency, gradient x input, SmoothGrad, Integrated
Gradients): a map per input pixel, chosen from the same list below the CAMs.

The controls (method, layer, opacity) are cam_controls.CamControls; the composite of the map
over the image is blended in numpy into reused buffers (cam_overlay.CamOverlay), and is
drawn by one ImageItem.

When the run shown is compared with another (the store's `reference_run`: the unedited run,
or a pinned run A) that has a map of the same method and layer, a selector shows either
run's map or the difference (current minus reference) in a diverging colour map centred on
0, over the current run's image, with its range on the colour bar.
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
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.core.explain.catalog import ATTRIBUTION_METHODS, CAM_METHODS
from inspector.core.records.frames import CamFrame
from inspector.ui.image.task_overlay import nothing_detected, nothing_detected_text
from inspector.ui.views import colormaps
from inspector.ui.views.base import FrameView, hint_label
from inspector.ui.views.cam_controls import CamControls
from inspector.ui.views.cam_overlay import CamOverlay
from inspector.ui.views.occlusion_controls import OcclusionControls

METHODS = {name: m.title for name, m in (*CAM_METHODS.items(), *ATTRIBUTION_METHODS.items())}
# What the compare selector shows: the current run's map, the reference run's, or their
# difference. Its entries are named per comparison ("after", "before", "after - before").
CURRENT, REFERENCE, DIFFERENCE = "current", "reference", "difference"
EMPTY_TEXT = "Drop an image on the window to see where the model looked (class activation map)."
FAILED_TEXT = "The last run failed before the class activation map was computed: the status " \
              "bar says why."
CANCELLED_TEXT = "Run {run} was cancelled before its map was computed, and no earlier map of " \
                 "this image is kept: run again (F5) to compute it."


class CamView(FrameView):
    methodChanged = Signal(str)  # noqa: N815 (Qt signal naming)
    optionsChanged = Signal()  # noqa: N815 - the attribution's settings (occlusion's patch)
    layerChanged = Signal(str)  # noqa: N815

    kinds = ("cam",)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent, store)
        self.overlay = CamOverlay()  # what is drawn, and the buffers it is blended from
        self.composite: np.ndarray | None = None  # what the ImageItem holds
        self._same_for: tuple | None = None  # the runs (and display known) _same compares
        self._same = False  # whether those two runs saw the same image
        # A comparison with the reference run: its map of the same method and layer, and
        # what is shown (CURRENT, REFERENCE or DIFFERENCE).
        self.reference_cam: CamFrame | None = None
        self.mode = CURRENT
        self._scale: tuple = (colormaps.DEFAULT_OVERLAY, 0.0, 1.0, "importance")  # the bar's
        # The map's faithfulness scores for its caption, once computed: a CamFrame ->
        # (text, tooltip) or None (ui.faithfulness.actions sets it).
        self.caption_scores = None

        self.controls = CamControls()
        self.controls.methodChanged.connect(self._method_chosen)
        self.controls.layerChanged.connect(self._layer_chosen)
        self.controls.alphaChanged.connect(self._alpha_changed)
        self.compare_combo = QComboBox()
        for mode in (CURRENT, REFERENCE, DIFFERENCE):
            self.compare_combo.addItem(mode, mode)
        self.compare_combo.setToolTip(
            "The map of this run, of the run it is compared with, or their difference "
            "(maps of the same method and layer, each scaled to 0..1)"
        )
        self.compare_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        # Never narrower than its text ("after − before"): the layer list gives way instead.
        self.compare_combo.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Fixed)
        self.compare_combo.hide()  # until a compared run has a map to compare with
        self.compare_combo.currentIndexChanged.connect(self.request_paint)
        self.occlusion = OcclusionControls()
        self.occlusion.changed.connect(self.optionsChanged)
        self.occlusion.setVisible(self.method == "occlusion")

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
        self.bar.axis.enableAutoSIPrefix(False)  # a difference of 0.3 is not "300 (x0.001)"
        view.addItem(self.bar, row=0, col=1)
        self.view = view
        self.empty = hint_label(EMPTY_TEXT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.controls)
        # A row of its own while Occlusion is chosen: in the controls' row its spin boxes
        # widened the pane, and with it the right-hand docks, squeezing the module tree.
        layout.addWidget(self.occlusion)
        # The compare selector beside the header that names what it shows: the controls'
        # row is as wide as the narrowest dock already.
        header_row = QHBoxLayout()
        header_row.addWidget(self.header, 1)
        header_row.addWidget(self.compare_combo, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(header_row)
        layout.addWidget(self.stack, 1)
        self.subscribe(self._cam_stored, self.kinds)

    # -- API --------------------------------------------------------------------------------
    @property
    def method(self) -> str:
        return self.controls.method

    @property
    def layer(self) -> str | None:
        """The layer chosen; for an attribution, the model input (ATTRIBUTION_LAYER)."""
        return self.controls.layer

    @property
    def alpha(self) -> float:
        return self.controls.alpha

    def set_layers(self, layers: list[str], default: str | None) -> None:
        """The layers a CAM can be computed at, and the one selected (no signal emitted)."""
        self.controls.set_layers(layers, default)

    def set_method(self, method: str) -> None:
        """Select a method without emitting methodChanged (the window restoring settings)."""
        self.controls.set_method(method)
        self.occlusion.setVisible(self.method == "occlusion")

    def _cam_stored(self, _frame: CamFrame) -> None:
        self.request_paint()

    def choice(self) -> tuple[CamFrame | None, np.ndarray | None]:
        """(the map, the image) to show, from the store. The newest run's image. Its map once
        computed; until then the previous run's map if it was made for the same image (a
        re-run keeps its overlay: no flicker), else none: on another image it would be wrong,
        and a run that finished without a map (or failed) shows none of an earlier run's."""
        store = self.store
        run, cam_run = store.shown, store.latest_run(self.kinds)  # shown: not a cancelled run
        display = _display(store, run)
        if cam_run is None:
            return None, display
        if cam_run != run:
            if store.status(run) not in (None, "cancelled"):
                return None, display
            earlier = _display(store, cam_run)
            key = (run, cam_run, display is None)  # a RunStarted may still be on its way
            if self._same_for != key:  # once per pair, not on every alpha tick
                self._same_for = key
                self._same = _same_image(display, earlier)
            if not self._same:
                return None, display
            display = earlier
        return self._best(cam_run), display

    def _best(self, run_id: int) -> CamFrame:
        """The run's CAM for the selected method and layer if computed, else the newest."""
        cams = {key[1:]: f for key, f in self.store.of_kind(self.kinds, run_id).items()}
        best = cams.get((self.method, self.layer))
        if best is None:
            same_method = [f for (m, _), f in cams.items() if m == self.method]
            best = same_method[-1] if same_method else list(cams.values())[-1]
        return best

    def compared(self, cam: CamFrame | None) -> CamFrame | None:
        """The reference run's map of the same method and layer as `cam` (None: no
        reference run, or it has no such map)."""
        reference = self.store.reference_run
        if cam is None or reference is None or reference == cam.run_id:
            return None
        return self.store.get(("cam", cam.method, cam.layer), reference)

    def _label(self, index: int) -> str | None:
        """The class name of `index`, from the predictions of the runs kept."""
        for run_id in reversed(self.store.runs()):
            frame = self.store.get(("predictions",), run_id)
            for p in frame.top if frame is not None else ():
                if p.index == index and p.label:
                    return p.label
        return None

    @property
    def drawn(self) -> tuple[CamFrame | None, np.ndarray | None]:
        """(the map, the image) drawn now: what a saved PNG shows (ui.export.save_view)."""
        return self.overlay.drawn

    # -- the user's choices -------------------------------------------------------------------
    def _alpha_changed(self, _value: int) -> None:
        if self.overlay.has_map:
            self.request_paint()

    def _method_chosen(self, method: str) -> None:
        # Occlusion's patch and stride, in a row of their own (its layer list is hidden).
        self.occlusion.setVisible(method == "occlusion")
        self.request_paint()
        self.methodChanged.emit(method)

    def _layer_chosen(self, layer: str) -> None:
        self.request_paint()
        self.layerChanged.emit(layer)

    # -- painting ---------------------------------------------------------------------------
    def _paint(self) -> None:
        cam, display = self.choice()
        self.reference_cam = self.compared(cam)
        self.mode = self._compare_mode(cam)
        overlay = self.overlay
        if self.mode == REFERENCE:
            overlay.prepare(self.reference_cam, _display(self.store, self.reference_cam.run_id))
        elif self.mode == DIFFERENCE:
            overlay.prepare(cam, display, self.reference_cam)
        else:
            overlay.prepare(cam, display)
        self._show_scale()
        image = overlay.compose(self.alpha)
        if image is None:
            self.header.setText("")
            self.empty.setText(self._empty_text())
            self.stack.setCurrentWidget(self.empty)
            return
        self.composite = image
        self.image_item.setImage(image, autoLevels=False, levels=(0, 255))
        # Transparent rather than hidden: the image does not jump when the map arrives.
        self.bar.setOpacity(1.0 if self.drawn[0] is not None else 0.0)
        self.header.setText(self._header_text())
        self._caption_scores()
        self.stack.setCurrentWidget(self.view)

    def _caption_scores(self) -> None:
        """The drawn map's deletion/insertion AUCs after its caption, how they were computed
        in the caption's tooltip."""
        f = self.drawn[0]
        found = self.caption_scores(f) if f is not None and self.caption_scores else None
        self.header.setToolTip(found[1] if found else "")
        if found:
            self.header.setText(f"{self.header.text()} \u00b7 {html.escape(found[0])}")

    def _empty_text(self) -> str:
        if self.failed:
            return FAILED_TEXT
        if self.store.cancelled:
            return CANCELLED_TEXT.format(run=self.store.current_run)
        return EMPTY_TEXT

    def _compare_mode(self, cam: CamFrame | None) -> str:
        """The selector's choice, after naming its entries for this comparison (hidden when
        there is nothing to compare with; no difference between maps of different sizes)."""
        combo, ref = self.compare_combo, self.reference_cam
        names = self.store.reference_names() if ref is not None else None
        combo.setVisible(names is not None)
        if names is None:
            return CURRENT
        first, second = names
        combo.blockSignals(True)
        combo.setItemText(0, second)
        combo.setItemText(1, first)
        combo.setItemText(2, f"{second} \u2212 {first}")
        model = combo.model()
        same_size = ref.cam.shape == cam.cam.shape
        model.item(2).setEnabled(same_size)
        if not same_size and combo.currentData() == DIFFERENCE:
            combo.setCurrentIndex(0)
        combo.blockSignals(False)
        return combo.currentData()

    def _show_scale(self) -> None:
        """The colour bar: importance 0..1, or the difference's range, centred on 0."""
        if self.mode == DIFFERENCE:
            extent = self.overlay.extent or 1.0
            names = self.store.reference_names() or ("reference", "current")
            scale = (colormaps.DEFAULT_DIVERGING, -extent, extent, f"{names[1]} \u2212 {names[0]}")
        else:
            scale = (colormaps.DEFAULT_OVERLAY, 0.0, 1.0, "importance")
        if scale == self._scale:
            return  # not on every tick of the alpha slider
        self._scale = scale
        cmap, low, high, label = scale
        self.bar.setColorMap(colormaps.get(cmap))
        self.bar.setLevels(low=low, high=high)
        self.bar.axis.setLabel(label)

    def _header_text(self) -> str:
        f = self.drawn[0]
        if f is None:
            if self.failed:
                return FAILED_TEXT
            if self.store.cancelled:
                return CANCELLED_TEXT.format(run=self.store.current_run)
            predictions = self.store.get(("predictions",), self.store.shown)
            if nothing_detected(predictions):
                return html.escape(nothing_detected_text(predictions, "no map."))
            if self.store.status(self.store.shown) == "ok":
                return "This run computed no CAM (it needs gradients: a run with a target class)."
            return "<i>Computing the class activation map\u2026</i>"
        label = self._label(f.target)
        target = f"\u201c{label}\u201d ({f.target})" if label else f"class {f.target}"
        layer = f.layer or "(whole model)"
        text = (
            f"<b>{METHODS.get(f.method, f.method)}</b> at <b>{html.escape(layer)}</b> "
            f"for {html.escape(target)}"
        )
        if (f.method, f.layer) != (self.method, self.layer) and self.layer is not None:
            wanted = f"{METHODS.get(self.method, self.method)} at {self.layer or '(whole model)'}"
            # After a cancel nothing is on its way: "yet" would promise it.
            later = "" if self.store.cancelled else " yet"
            text += f" \u00b7 <i>{html.escape(wanted)} not computed{later}</i>"
        if self.overlay.image_f is None:
            text += " \u00b7 the map alone (no image of the same size)"
        store = self.store
        if store.cancelled:
            text += f" \u00b7 <b>run {f.run_id}</b> (run {store.current_run} was cancelled)"
        names = self.store.reference_names() if self.reference_cam is not None else None
        if names is not None:
            first, second = names
            ref_run = self.reference_cam.run_id
            if self.mode == REFERENCE:
                text += f" \u00b7 <b>{first}</b> (run {ref_run})"
            elif self.mode == DIFFERENCE:
                extent = self.overlay.extent
                text += (f" \u00b7 <b>{second} \u2212 {first}</b> (run {f.run_id} \u2212 run "
                         f"{ref_run}), range \u00b1{extent:.3g}"
                         + (": the maps are equal" if extent == 0 else ""))
            else:
                text += f" \u00b7 <b>{second}</b> (run {f.run_id})"
        return text


def _display(store, run_id: int | None) -> np.ndarray | None:
    """The image run `run_id` saw (its RunStarted's display), if known."""
    started = store.started(run_id)
    return started.display if started is not None else None


def _same_image(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is b or (a is not None and b is not None and a.shape == b.shape
                      and np.array_equal(a, b))
