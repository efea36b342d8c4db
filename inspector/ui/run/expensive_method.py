"""A remembered method that costs minutes on the model just loaded (Score-CAM: a forward per
channel of its layer, 768 on a ViT-B) asks before it starts.

On a model change the first run uses the default CAM instead; from that run's forward time
and the CAM layer's channel count the method's time is estimated, and when it is over
ASK_OVER_S the user is asked (`confirm`, a function tests replace); otherwise, or when
they accept, the method is chosen again and runs.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox

from inspector.core.explain.catalog import CAM_METHODS, DEFAULT_CAM, FORWARD_CAMS

ASK_OVER_S = 30.0


def masks_of(shape: tuple[int, ...] | None) -> int:
    """The channels a Score-CAM masks the image with, at an output of `shape` (batch first):
    (B, C, h, w), channels-last (B, h, w, C) or tokens (B, N, D)."""
    if not shape or len(shape) < 3:
        return 0
    if len(shape) == 4 and not (shape[1] == shape[2] and shape[3] > shape[1]):
        return shape[1]
    return shape[-1]


def estimate_s(masks: int, forward_s: float) -> float:
    """Seconds for a forward of each mask, from one image's forward time."""
    return masks * forward_s


class ExpensiveMethodGuard(QObject):
    def __init__(self, window, settings, reporter) -> None:
        super().__init__(window)
        self.window = window
        self.settings = settings
        self.reporter = reporter
        self.held: str | None = None  # the expensive method held back until the estimate
        self.layer_shape: tuple[int, ...] | None = None
        self.confirm: Callable[[str], bool] = self._ask

    def model_loaded(self, tree, cam_layer: str | None) -> None:
        """Before the load's run: hold an expensive method back (quietly: the load runs)."""
        method = self.settings.value.cam_method
        self.held = None
        if method not in FORWARD_CAMS:
            return
        layer = self.settings.value.cam_layer or cam_layer
        info = tree.modules.get(layer) if tree is not None and layer is not None else None
        self.layer_shape = info.output_shape if info is not None else None
        self.held = method
        self.settings.update(quiet=True, cam_method=DEFAULT_CAM)

    def run_finished(self, frame) -> None:
        """The load's run: estimate the held method and ask, or run it."""
        method = self.held
        if method is None or frame.status == "cancelled":
            return  # the next run of the new model tells its forward time
        self.held = None
        if frame.status != "ok":
            return
        forward = frame.timings.get("forward", 0.0)
        masks = masks_of(self.layer_shape)
        seconds = estimate_s(masks, forward)
        title = CAM_METHODS[method].title
        if seconds > ASK_OVER_S:
            question = (f"{title} on this model takes about {seconds:.0f} s ({masks} masks, "
                        f"a forward each at {forward * 1000:.0f} ms): compute it now?")
            if not self.confirm(question):
                self.reporter.info(
                    f"{title} was not started (about {seconds:.0f} s on this model): the map "
                    f"is {CAM_METHODS[DEFAULT_CAM].title}; choose {title} to compute it.", 15000)
                return
        self.settings.update(cam_method=method)

    def _ask(self, question: str) -> bool:
        answer = QMessageBox.question(self.window, "A long computation", question)
        return answer == QMessageBox.StandardButton.Yes
