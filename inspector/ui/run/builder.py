"""Each run as a value built from what the widgets say, submitted through SessionControl.

A run is core's frozen RunRequest: the image, what the module tree's checkboxes capture, the
target class, the CAM method and layer, gradients on or off, stretched levels. Nothing of it
is parked anywhere between runs: a checkbox changes the tree, a combo box changes the CAM
view, and the next run (now, or after a short pause for a burst of changes) reads them all
into a new value.

Runs follow the user: a new image, a different target or CAM layer runs at once; module
selection and checkbox changes are coalesced by a short timer, so arrowing through the tree
does not queue a run per row.

Edits (the window's EditList) go into the request as its interventions. While one is on,
the unedited run of the same image is kept beside the edited ones, for before/after: it
runs once, first, with keep_outputs (the edited run is compared with it), and is reused
while only the edits change. Its cache key is the request without its edits, together
with the model load: the image, stretch, capture (modules, kinds and previews), target,
gradients, CAM methods and layers, attributions and top-k. Any of those changing, a new
model (model_changed) or a new image (show) runs it again; so does its failing or being
cancelled. With no edit on, the baseline is let go and plain runs go alone.

While a video or the camera plays (`live`, set by the video player with each frame it
submits), each run is a lean live run (`request` while `live`): it keeps exactly what moves on screen
live, the selected module's activations (its output, with statistics and previews) and the
CAM, and nothing else: no statistics of the other modules, no gradient frames, and a gradient
CAM's backward stops at the CAM layer (core.run.stages: gradients=False with a gradient CAM).
Pausing runs the frame shown again with the full request, so that a still frame has the
gradient view and every module's statistics.
"""

from __future__ import annotations

import importlib.util

from PySide6.QtCore import QObject, QTimer

from inspector.core.explain.catalog import ATTRIBUTION_METHODS, DEFAULT_CAM, GRADIENT_FREE_CAMS
from inspector.ui.run import capture_choice
from inspector.ui.run.session_control import SessionControl

RERUN_DELAY_MS = 120


class RunBuilder(QObject):
    """Builds the next RunRequest from the tree, the image pane, the gradients toggle and the
    CAM view (`cam_view`, set once the views exist), and submits it."""

    def __init__(self, control: SessionControl, tree, images, backward_action, parent=None):
        super().__init__(parent)
        self.control = control
        self.tree = tree  # ModuleTreeWidget: its checkboxes and selection
        self.images = images  # ImagePane: stretch levels
        self.backward_action = backward_action  # "Compute gradients"
        self.cam_view = None  # CamView: method and layer; DEFAULT_CAM at the default layer without
        self.default_cam_layer: str | None = None  # of the loaded model (ModelLoaded.cam_layer)
        self.entry = None  # the ImageEntry being shown
        # What to explain (core.run.request.Target): a class index, a DetectionTarget (a box clicked
        # in the image pane; a plain index from the predictions view is a detection's rank
        # too) or a SegmentationTarget; None: the top-1 prediction.
        self.target = None
        self.edits = None  # EditList: the interventions of the next runs
        # Whether each run keeps its captured outputs in the Session (to be pinned as run A
        # and compared with later); the unedited baseline always does.
        self.keep_outputs = False
        # A stream plays: runs are live runs (see the module docstring); set by show().
        self.live = False
        self._baseline_key = None  # the request (without edits) the cached baseline ran
        self.cams_available = importlib.util.find_spec("inspector.core.explain.cam") is not None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(RERUN_DELAY_MS)
        self._timer.timeout.connect(self.rerun)
        control.router.runFinished.connect(self._run_finished)

    # -- what the user changes ---------------------------------------------------------------
    def show(self, entry, live: bool = False) -> None:
        """Make `entry` the current image and run it (now, or once a model is loaded); with
        `live`, as a frame of a stream playing, until the next show."""
        if entry is not self.entry:
            self.target = None  # a class chosen for another image
            self._baseline_key = None
        self.entry = entry
        self.live = live
        self.rerun()

    def set_target(self, target) -> None:
        self.target = target
        self.rerun()

    def model_changed(self, cam_layer: str | None) -> None:
        """A new model: class indices belonged to the old one."""
        self.target = None
        self.default_cam_layer = cam_layer
        self._baseline_key = None

    # -- the value -----------------------------------------------------------------------------
    def request(self):
        """The run the widgets ask for now (core.run.request.RunRequest), or None without an image."""
        if self.entry is None:
            return None
        from inspector.core.run.capture_spec import CaptureSpec
        from inspector.core.run.request import RunRequest
        from inspector.core.run.runtime import stream_threads

        backward = self.backward_action.isChecked()
        model = self.tree.model
        selected = self.tree.current_module()
        cams = self._cams(backward)
        if self.live:
            # The selected module's output, previewed; no gradient frames, so that the
            # backward of a gradient CAM (there only when gradients are on, as in a full
            # run) stops at the CAM layer.
            modules = capture_choice.live_modules(model.capture_modules(), selected)
            preview = frozenset(modules)
            backward = False
        else:
            modules = capture_choice.capture_modules(model.capture_modules(), backward)
            preview = capture_choice.preview_modules(model.tree, modules, selected)
        return RunRequest(
            image=self.entry.source,
            capture=CaptureSpec(modules=modules, preview=preview),
            target=self.target,
            gradients=backward,
            cams=cams,
            attributions=self._attributions(),
            attribution_options=self._attribution_options(),
            label=self.entry.name,
            stretch=self.images.stretch,
            interventions=self.edits.interventions() if self.edits is not None else (),
            keep_outputs=self.keep_outputs,
            threads=stream_threads() if self.live else None,
        )

    def _method(self) -> str:
        cam = self.cam_view
        return cam.method if cam is not None and cam.method else DEFAULT_CAM

    def _attributions(self) -> tuple[str, ...]:
        # Computed from the input gradient on their own, also when the run has no backward.
        method = self._method()
        return (method,) if method in ATTRIBUTION_METHODS else ()

    def _attribution_options(self):
        """The CAM pane's settings of its attribution (occlusion's patch and stride); None:
        the defaults."""
        cam = self.cam_view
        if cam is None or self._method() != "occlusion":
            return None
        return cam.occlusion.options()

    def _cams(self, backward: bool) -> tuple[tuple[str, str | None], ...]:
        cam = self.cam_view
        method = self._method()
        if method in ATTRIBUTION_METHODS:
            return ()
        layer = cam.layer if cam is not None else None
        # Without a backward pass only gradient-free methods can run, unless the user chose
        # what to explain (a class clicked, a box): that run's gradient CAM gets its layer's
        # gradient from a backward that stops at the layer (core.run.session, as a live run), and
        # the gradient views stay off as the toggle says. A model with no layer a CAM can
        # use (no spatial or token output) gets none.
        explain = backward or method in GRADIENT_FREE_CAMS or self.target is not None
        wanted = self.cams_available and explain
        if not wanted or (layer is None and self.default_cam_layer is None):
            return ()
        return ((method, layer),)

    def previewed(self, module: str) -> bool:
        """Whether the last submitted run captured the previews of `module`."""
        request = self.control.last_request
        return request is not None and module in request.capture.preview

    # -- running -------------------------------------------------------------------------------
    def schedule(self) -> None:
        """Run again soon: coalesces a burst of changes (tree navigation, checkboxes)."""
        self._timer.start()

    def rerun(self) -> int | None:
        """Cancel what runs and run the current image as the widgets now say (with the
        unedited run first when edits are on and it is not cached); the current run's id."""
        self._timer.stop()
        if not self.control.ready or self.control.loaded is None:
            return None
        request = self.request()
        if request is None:
            return None
        control = self.control
        store = control.router.store
        # Run A as the reference only while it is good: a failed or cancelled A kept nothing.
        pinned = store.pinned_run if store.status(store.pinned_run) in (None, "ok") else None
        if not request.interventions:
            self._baseline_key = None
            if control.baseline_run is not None:
                control.clear_baseline()
            return control.submit(request.with_(compare_with=pinned))
        unedited = request.with_(interventions=(), keep_outputs=True, compare_with=None)
        # The Session keeps the outputs of its last few such runs (core.compare.divergence.KEPT_RUNS):
        # pinning A twice can push a finished baseline out, and it then runs again.
        evicted = (control.baseline_run is not None and not control.baseline_running
                   and control.baseline_run not in control.session.kept_runs())
        key = _baseline_key(unedited)
        if self._baseline_key != key or control.baseline_run is None or evicted:
            control.submit_baseline(unedited)
            self._baseline_key = key
        reference = pinned if pinned is not None else control.baseline_run
        return control.submit(request.with_(compare_with=reference))

    def _run_finished(self, frame) -> None:
        if frame.run_id == self.control.baseline_run and frame.status != "ok":
            self._baseline_key = None  # cancelled or failed: run it again next time

    def cancel(self) -> None:
        self._timer.stop()
        self.control.cancel()

    def stop(self) -> None:
        self._timer.stop()


def _baseline_key(request) -> tuple:
    """What the cached unedited run must share with the next one: the request, with its
    image compared by identity when it is an object (a PIL image or a tensor: a video
    frame, a camera frame); `==` on two PIL images compares their pixels, a full copy of
    each on every frame. A path is compared as a path."""
    image = request.image
    same = image if isinstance(image, (str, bytes)) or hasattr(image, "__fspath__") else id(image)
    # The image itself rides along so that its id cannot be reused while the key lives
    # (tuples compare an element with itself by identity, without calling __eq__).
    return (same, request.with_(image=None), image)
