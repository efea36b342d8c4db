"""When the window's runs read a transformer's attention: only while the Attention dock (the
explorer) or the Depth dock (the logit lens) is shown, for a model they apply to. Then each
run (a video's frames too) asks for it in the run settings' `attention_views`; otherwise no
hook is installed and the model runs its fused attention untouched.

It also tells the views and the CAM pane's method list why a model has none, as the model
load said (ModelLoaded.attention): the attention maps are greyed out with that sentence.

Installed by one call from the main window (`install`) with its context
(ui.shell.context.WindowContext); `views_ready` once the views exist.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from inspector.ui.shell.context import WindowContext

# Dock key -> the view's name in RunSettings.attention_views.
VIEWS = {"attention": "explorer", "depth": "lens"}


class AttentionWiring(QObject):
    def __init__(self, ctx: WindowContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        self.refusal = ""  # why the model loaded has no attention to read
        self.shown: set[str] = set()
        for key, name in VIEWS.items():
            dock = ctx.docks.get(key)
            if dock is not None:
                dock.visibilityChanged.connect(
                    lambda visible, name=name: self._visibility(name, visible))
        ctx.control.router.modelLoaded.connect(self._model_loaded)

    def _visibility(self, name: str, visible: bool) -> None:
        (self.shown.add if visible else self.shown.discard)(name)
        self._ask()

    def _ask(self) -> None:
        wanted = frozenset() if self.refusal else frozenset(self.shown)
        self.ctx.settings.update(attention_views=wanted)

    def _model_loaded(self, frame) -> None:
        self.refusal = getattr(frame, "attention", "")
        self.views_ready()
        self._ask()

    def views_ready(self) -> None:
        """Tell the views (once built) and the CAM pane's list about the model loaded."""
        views = self.ctx.views
        for key in VIEWS:
            view = views.get(key)
            if view is not None:
                view.set_refusal(self.refusal)
        cam = views.get("cam")
        if cam is not None:
            cam.controls.set_attention_refusal(self.refusal)


def install(ctx: WindowContext) -> AttentionWiring:
    return AttentionWiring(ctx)
