"""The settings of the window's next runs, as one value: RunSettings.

Every widget that changes what the next run computes writes it here, through one setter
(`RunSettingsModel.update`): Run ▸ Compute gradients (its action is made here,
`gradients_action`), the CAM pane's method, layer and occlusion settings, the image pane's
Stretch levels, the module tree's checkboxes and selection, the edits, a class or box
clicked, a video playing. The value becomes a run (`RunSettings.request`: a core RunRequest);
the run builder decides when (ui.run.builder: now, or soon after a burst of changes), and
keeps the unedited run beside the edited ones. Widgets that show a setting follow it:
`changed` says which fields changed. What is remembered between sessions (gradients on or
off, the CAM method) is saved and restored here, and nowhere else.

No torch here: the window makes its settings before the engine has loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction

from inspector.core.explain.catalog import (
    ATTENTION_CAMS,
    ATTRIBUTION_METHODS,
    CAM_METHODS,
    DEFAULT_CAM,
    GRADIENT_FREE_CAMS,
    METHODS,
)
from inspector.ui.run import capture_choice

LENS_TOPK = 3  # the Depth dock's classes per block
# AppSettings keys (the first is the name the first versions saved it under).
GRADIENTS_KEY = "backward"
CAM_METHOD_KEY = "cam_method"


@dataclass(frozen=True)
class RunSettings:
    """What the next runs ask for (see the module docstring)."""

    gradients: bool = True  # gradient frames and a backward to the input (RunRequest.gradients)
    cam_method: str = DEFAULT_CAM  # a CAM or an input attribution (core.explain.catalog)
    cam_layer: str | None = None  # None: the model's default CAM layer
    # Occlusion's patch and stride (core.explain.catalog.AttributionOptions); None: defaults.
    attribution_options: Any = None
    stretch: bool = False  # high-depth images stretched to their own range
    capture: Mapping[str, frozenset[str]] = field(default_factory=dict)  # the tree's checkboxes
    selected: str | None = None  # the module the views show: its previews are captured
    edits: tuple = ()  # core.edits.interventions.Intervention, the enabled edits in order
    target: Any = None  # what to explain (core.run.request.Target); None: the top prediction
    live: bool = False  # a video or the camera plays: each run is a lean live run
    # The views shown that read a transformer's attention: "explorer" (the Attention dock),
    # "lens" (the Depth dock). Only while one is shown do runs read it (ui.attention.wiring).
    attention_views: frozenset[str] = frozenset()

    @property
    def attributions(self) -> tuple[str, ...]:
        """The input attribution asked for (computed from the input gradient on its own,
        also when the run has no backward), or none when the method is a CAM."""
        return (self.cam_method,) if self.cam_method in ATTRIBUTION_METHODS else ()

    def cams(self, default_layer: str | None) -> tuple[tuple[str, str | None], ...]:
        """The CAM asked for, at its layer (None: the model's default), or none: an
        attribution is not a CAM; without gradients only gradient-free CAMs run, unless the
        user chose what to explain (a class clicked, a box): that run's gradient CAM gets its
        layer's gradient from a backward that stops at the layer, and the gradient views stay
        off as the toggle says. A model with no layer a CAM can use gets none."""
        method = self.cam_method
        if method in ATTRIBUTION_METHODS:
            return ()
        if not (self.gradients or method in GRADIENT_FREE_CAMS or self.target is not None):
            return ()
        if self.cam_layer is None and default_layer is None:
            return ()
        return ((method, self.cam_layer),)

    def request(self, image, label: str, tree, default_cam_layer: str | None,
                threads: int | None = None):
        """The run these settings ask for, of `image` (core.run.request.RunRequest). `tree`:
        the model's core.models.tree.ModuleTree (how big the previews would be). While `live`,
        a lean live run: the selected module's output, previewed; no gradient frames, so that
        the backward of a gradient CAM (there only when gradients are on, as in a full run)
        stops at the CAM layer."""
        from inspector.core.run.capture_spec import CaptureSpec
        from inspector.core.run.request import RunRequest

        if self.live:
            modules = capture_choice.live_modules(self.capture, self.selected)
            preview = frozenset(modules)
        else:
            modules = dict(self.capture)
            preview = capture_choice.preview_modules(tree, modules, self.selected,
                                                     self.gradients)
        options = self.attribution_options if self.cam_method == "occlusion" else None
        attention = None
        if self.attention_views:
            from inspector.core.explain.attention.options import AttentionOptions

            attention = AttentionOptions(explorer="explorer" in self.attention_views,
                                         lens=LENS_TOPK if "lens" in self.attention_views else 0)
        return RunRequest(
            image=image,
            capture=CaptureSpec(modules=modules, preview=preview),
            target=self.target,
            gradients=self.gradients and not self.live,
            cams=self.cams(default_cam_layer),
            attributions=self.attributions,
            attribution_options=options,
            label=label,
            stretch=self.stretch,
            interventions=self.edits,
            threads=threads,
            attention=attention,
        )


class RunSettingsModel(QObject):
    """The window's RunSettings: `value`, `update(**changes)`, and `changed(fields)` after
    each update that changed anything (`quiet=True`: a change that reruns nothing, as when a
    model load adjusts the edits and runs itself)."""

    changed = Signal(frozenset, bool)  # the names of the fields that changed, quiet

    def __init__(self, value: RunSettings | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.value = value or RunSettings()

    def update(self, quiet: bool = False, **changes: Any) -> frozenset[str]:
        """Set fields of the value; the names of those that changed."""
        new = replace(self.value, **changes)
        names = frozenset(f.name for f in fields(RunSettings)
                          if getattr(new, f.name) != getattr(self.value, f.name))
        if names:
            self.value = new
            self.changed.emit(names, quiet)
        return names

    # -- remembered between sessions ---------------------------------------------------------
    def restore(self, app_settings) -> None:
        """Gradients and the CAM method as the user last left them (ui.shell.app_settings
        checks each stored value: a bad one is the default, and is reported)."""
        self.value = replace(
            self.value,
            gradients=bool(app_settings.value(GRADIENTS_KEY, True)),
            cam_method=app_settings.value(CAM_METHOD_KEY, DEFAULT_CAM, choices=list(METHODS)),
        )

    def save(self, app_settings) -> None:
        app_settings.set_value(GRADIENTS_KEY, self.value.gradients)
        app_settings.set_value(CAM_METHOD_KEY, self.value.cam_method)

    def fit_model(self, attention_refusal: str) -> str:
        """A model was loaded: a remembered attention map (rollout, LeGrad) that it cannot
        make (`attention_refusal`: why it has no attention, "" when it has) becomes the
        default CAM, quietly (the load runs itself). The sentence saying so, or ""."""
        method = self.value.cam_method
        if not attention_refusal or method not in ATTENTION_CAMS:
            return ""
        self.update(quiet=True, cam_method=DEFAULT_CAM)
        old, new = CAM_METHODS[method].title, CAM_METHODS[DEFAULT_CAM].title
        return f"{old} reads a transformer's attention, which this model lacks: the map " \
               f"is {new}."

    def reset(self) -> frozenset[str]:
        """The remembered choices back to their defaults (Help ▸ Reset settings)."""
        return self.update(gradients=True, cam_method=DEFAULT_CAM)


def gradients_action(settings: RunSettingsModel, parent: QObject) -> QAction:
    """Run ▸ Compute gradients: checked while the settings' `gradients` is on; toggling it
    (a click, setChecked) writes the setting, and the setting changed elsewhere (Reset
    settings) checks or unchecks it."""
    action = QAction("Compute &gradients", parent)
    action.setCheckable(True)
    action.setChecked(settings.value.gradients)
    action.setStatusTip("Compute the gradients of the captured modules (a backward pass to "
                        "the input); off: forwards only, and gradient CAMs only for a class "
                        "you click")
    action.toggled.connect(lambda on: settings.update(gradients=on))

    def follow(names, _quiet) -> None:
        if "gradients" in names and action.isChecked() != settings.value.gradients:
            action.blockSignals(True)
            action.setChecked(settings.value.gradients)
            action.blockSignals(False)

    settings.changed.connect(follow)
    return action
