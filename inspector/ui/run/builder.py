"""Each run as a value, from the window's run settings, submitted through SessionControl.

A run is core's frozen RunRequest, made from ui.run.settings.RunSettings (the one value the
widgets write: capture, target, CAM method and layer, gradients on or off, stretched levels,
edits) and the image shown. Nothing of it is parked anywhere between runs.

Runs follow the user: a new image, a different target, CAM method or layer, the gradients
toggle or an edit runs at once; the tree's checkboxes, the selection (when its previews were
not captured) and the attribution's options are coalesced by a short timer, so arrowing
through the tree does not queue a run per row.

While an edit is on, the unedited run of the same image is kept beside the edited ones, for
before/after: it runs once, first, with keep_outputs (the edited run is compared with it),
and is reused while only the edits change. Its cache key is the request without its edits,
together with the model load: the image, stretch, capture (modules, kinds and previews),
target, gradients, CAM methods and layers, attributions and top-k. Any of those changing, a
new model (model_changed) or a new image (show) runs it again; so does its failing or being
cancelled. With no edit on, the baseline is let go and plain runs go alone.

While a video or the camera plays (the settings' `live`, set by show() with each frame the
player submits), each run is a lean live run (RunSettings.request): the selected module's
activations and the CAM, nothing else; a gradient CAM's backward stops at the CAM layer.
Pausing runs the frame shown again with the full request, so that a still frame has the
gradient view and every module's statistics.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from inspector.ui.run.session_control import SessionControl
from inspector.ui.run.settings import RunSettingsModel

RERUN_DELAY_MS = 120
# What a change of each setting does: run at once, or soon (a burst of changes: one run).
RUN_NOW = frozenset({"gradients", "cam_method", "cam_layer", "stretch", "edits", "target"})
RUN_SOON = frozenset({"attribution_options", "capture", "attention_views"})


class RunBuilder(QObject):
    """Makes the next RunRequest from the run settings and the image shown, and submits it."""

    def __init__(self, control: SessionControl, settings: RunSettingsModel, parent=None):
        super().__init__(parent)
        self.control = control
        self.settings = settings
        self.tree = None  # the loaded model's core.models.tree.ModuleTree (preview sizes)
        self.default_cam_layer: str | None = None  # of the loaded model (ModelLoaded.cam_layer)
        self.entry = None  # the ImageEntry being shown
        self._baseline_key = None  # the request (without edits) the cached baseline ran
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(RERUN_DELAY_MS)
        self._timer.timeout.connect(self.rerun)
        control.router.runFinished.connect(self._run_finished)
        settings.changed.connect(self._settings_changed)

    # -- what the user changes ---------------------------------------------------------------
    def show(self, entry, live: bool = False) -> None:
        """Make `entry` the current image and run it (now, or once a model is loaded); with
        `live`, as a frame of a stream playing, until the next show."""
        if entry is not self.entry:
            self._baseline_key = None
            # A class chosen for another image no longer applies (quiet: this runs anyway).
            self.settings.update(quiet=True, target=None)
        self.entry = entry
        self.settings.update(quiet=True, live=live)
        self.rerun()

    def model_changed(self, tree, cam_layer: str | None) -> None:
        """A new model: class indices belonged to the old one."""
        self.tree = tree
        self.default_cam_layer = cam_layer
        self._baseline_key = None
        self.settings.update(quiet=True, target=None)

    def _settings_changed(self, names: frozenset, quiet: bool) -> None:
        if quiet:
            return
        if names & RUN_NOW:
            self.rerun()
        elif names & RUN_SOON or ("selected" in names and not self.previewed()):
            self.schedule()  # the selected module's previews were not captured

    # -- the value -----------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        return self.settings.value.live

    def request(self):
        """The run the settings ask for now (core.run.request.RunRequest), or None without
        an image."""
        if self.entry is None:
            return None
        from inspector.core.run.runtime import stream_threads

        return self.settings.value.request(
            self.entry.source, self.entry.name, self.tree, self.default_cam_layer,
            threads=stream_threads() if self.live else None)

    def previewed(self, module: str | None = None) -> bool:
        """Whether the last submitted run captured the previews of `module` (the selected
        one when None)."""
        module = self.settings.value.selected if module is None else module
        request = self.control.last_request
        return request is not None and module in request.capture.preview

    # -- running -------------------------------------------------------------------------------
    def schedule(self) -> None:
        """Run again soon: coalesces a burst of changes (tree navigation, checkboxes)."""
        self._timer.start()

    def rerun(self, **extra) -> int | None:
        """Cancel what runs and run the current image as the widgets now say (with the
        unedited run first when edits are on and it is not cached); the current run's id.
        `extra`: RunRequest fields this run alone adds (the Faithfulness tab's metrics and
        maps); the unedited run is made without them."""
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
            return control.submit(request.with_(compare_with=pinned, **extra))
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
        return control.submit(request.with_(compare_with=reference, **extra))

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
