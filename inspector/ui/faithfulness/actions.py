"""The Faithfulness tab in the window: its scoring runs, and the CAM pane's captions.

"Score <method>" runs the image shown again as the window would, with that method's map
and the tab's metrics (RunRequest.metrics); "Score every method" with every CAM (at the
CAM layer) and, for a classifier, every input attribution. Each is an ordinary run of the
RunBuilder (the edits on, the unedited run kept beside it): its progress shows in the tab
and the status bar. The tab's Cancel stops the scoring alone (Session.stop_scoring): the
methods scored so far keep their scores and the run stays a complete run; Esc (Cancel
run) cancels the whole run, as any run's. The scores come back as MetricsFrames,
which the tab keeps for the image shown (ui.views.faithfulness_view); the CAM pane's
caption then shows the map's deletion and insertion AUCs.

Installed by one call from the main window (`install`) once the views exist.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from inspector.core.explain.catalog import (
    ATTENTION_CAMS,
    ATTRIBUTION_METHODS,
    CAM_METHODS,
    FORWARD_CAMS,
)
from inspector.ui.shell.context import WindowContext


class FaithfulnessActions(QObject):
    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        self.view = ctx.views["faithfulness"]
        self.cam = ctx.views.get("cam")
        self.view.scoreRequested.connect(self.score)
        self.view.cancelRequested.connect(self.stop_scoring)
        self.view.methodActivated.connect(lambda m: ctx.settings.update(cam_method=m))
        ctx.control.router.progress.connect(self.view.show_progress)
        if self.cam is not None:
            self.cam.caption_scores = self.view.caption
            self.view.scoresChanged.connect(self.cam.request_paint)
            ctx.settings.changed.connect(self._shown_changed)
            self.view.set_shown(self.cam.method, self.cam.layer)

    def _shown_changed(self, names, _quiet) -> None:
        if names & {"cam_method", "cam_layer"}:
            self.view.set_shown(self.cam.method, self.cam.layer)

    def stop_scoring(self) -> None:
        """The tab's Cancel: the scoring run's metrics stop, the run finishes "ok"."""
        self.ctx.control.stop_scoring(self.view.scoring_run)

    def maps(self, every: bool) -> dict:
        """The RunRequest fields of the maps to score: the method shown, or every method
        the loaded model's task allows (core.run.stages.refused_for_task)."""
        value = self.ctx.settings.value
        loaded = self.ctx.control.loaded
        classifier = loaded is None or loaded.task == "classification"
        methods = list(CAM_METHODS) + list(ATTRIBUTION_METHODS) if every else [value.cam_method]
        if not classifier:
            methods = [m for m in methods if m in CAM_METHODS and m not in FORWARD_CAMS]
        if every and self.cam is not None and self.cam.controls.attention_refusal:
            methods = [m for m in methods if m not in ATTENTION_CAMS]  # greyed out: no ViT
        return {
            # The attention maps read no layer (LeGrad's first block is its own option).
            "cams": tuple((m, None if m in ATTENTION_CAMS else value.cam_layer)
                          for m in methods if m in CAM_METHODS),
            "attributions": tuple(m for m in methods if m in ATTRIBUTION_METHODS),
            "attribution_options": value.attribution_options,
        }

    def score(self, every: bool) -> int | None:
        """Submit the scoring run; its id, or None when there is nothing to run yet."""
        maps = self.maps(every)
        if not maps["cams"] and not maps["attributions"]:
            self.ctx.reporter.info("This model's task allows no map that can be scored here.")
            self.view.start_scoring(None)
            return None
        run_id = self.ctx.runs.rerun(metrics=self.view.options(), **maps)
        if run_id is None:
            self.ctx.reporter.info("Open an image (and wait for the model) before scoring "
                                   "its maps.")
        self.view.start_scoring(run_id)
        return run_id


def install(ctx: WindowContext) -> FaithfulnessActions | None:
    """Wire the Faithfulness tab (None when its view failed to start)."""
    if "faithfulness" not in ctx.views:
        return None
    return FaithfulnessActions(ctx)
