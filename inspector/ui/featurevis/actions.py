"""Feature visualisation and concepts in the window (see the package's docstring).

- The mosaic's right-click menu (ui.edits.actions.EditActions.channel_menu_extensions):
  *Visualise channel* zooms the channel and shows its picture forming beside it; *Visualise
  page* optimises the page's channels as one batch in a dialog; *Concepts of this layer…*.
- The module tree's context menu: *Concepts of this layer…*.
- The zoom page (TensorPanel.zoom_picture): the channel's picture, while it forms or from the
  cache, beside the channel's activation.
- The Dataset dock: above an atlas channel's top images, that channel's picture (for the
  model the atlas was made with), or a button to make it; above a folder concept's top
  images (`network-inspector concepts`), its share and classes and *Remove this concept*,
  the edit that projects it out of the layer's output.

Installed once by the main window after its views and the Dataset dock exist.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QPushButton, QWidget

from inspector.ui.featurevis.page_dialog import PageDialog, pixmap_of
from inspector.ui.featurevis.runner import FeatureVisRunner
from inspector.ui.shell.context import WindowContext

STEPS_KEY = "featurevis_steps"
DEFAULT_STEPS = 128  # Lucid's 512 take minutes a page on a CPU; 128 reach ~90% on the demo
STRIP_SIDE = 128
STRIP_REMOVE_TIP = ("An edit: project this concept's direction (its unit vector in "
                    "concepts.npz) out of the layer's output at every position, in the next "
                    "runs")


class FeatureVisActions(QObject):
    def __init__(self, ctx: WindowContext, edit_actions, dataset_view=None) -> None:
        super().__init__(ctx.parent)
        self.ctx, self.edit_actions, self.dataset = ctx, edit_actions, dataset_view
        self.runner = FeatureVisRunner(ctx.control, self)
        self.runner.updated.connect(self._updated)
        self.runner.finished.connect(self._finished)
        self.dialog: PageDialog | None = None
        self.concepts = None
        self._memo: dict[tuple, tuple | None] = {}  # cache lookups for the zoom page
        edit_actions.channel_menu_extensions.append(self._extend_channel_menu)
        ctx.tree.menu_extensions.append(self._extend_module_menu)
        self.activation = ctx.views.get("activation")
        if self.activation is not None:
            self.activation.panel.zoom_picture = self.zoom_picture
        ctx.control.router.modelLoaded.connect(self._model_loaded)
        ctx.closed.connect(self.runner.cancel)
        if ctx.control.loaded is not None:
            self.runner.model_loaded()
        self.strip = None
        if dataset_view is not None:
            self.strip = self._make_strip()
            dataset_view.layout().insertWidget(dataset_view.layout().indexOf(dataset_view.list),
                                               self.strip)
            dataset_view.channelShown.connect(self._dataset_channel)

    # -- settings ------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        try:
            return max(1, int(self.ctx.app_settings.value(STEPS_KEY, DEFAULT_STEPS)))
        except (TypeError, ValueError):
            return DEFAULT_STEPS

    def settings(self, steps: int | None = None):
        from inspector.core.explain.featurevis.settings import FeatureVisSettings

        return FeatureVisSettings(steps=steps or self.steps)

    # -- menus ---------------------------------------------------------------------------------
    def _extend_channel_menu(self, menu: QMenu, module: str, channel: int) -> None:
        menu.addSection("Understand")
        menu.addAction("Visualise channel", lambda: self.visualise_channel(module, channel))
        menu.addAction("Visualise page", lambda: self.visualise_page(module))
        menu.addAction("Concepts of this layer…", lambda: self.show_concepts(module))

    def _extend_module_menu(self, menu: QMenu, name: str, info) -> None:
        menu.addSection("Understand")
        action = menu.addAction("Concepts of this layer…", lambda: self.show_concepts(name))
        if info.output_shape is None or len(info.output_shape) < 2:
            action.setEnabled(False)
            action.setToolTip(f"{name or 'the model'} has no channels to factorise")

    # -- visualising ---------------------------------------------------------------------------
    def visualise_channel(self, module: str, channel: int) -> None:
        if self.activation is not None and self.activation.module == module:
            self.activation.panel.zoom(channel)
        self._start(module, [channel], self.settings())

    def visualise_page(self, module: str) -> None:
        if self.activation is None or self.activation.module != module:
            return
        channels = [int(c) for c in self.activation.panel.pages_of_channels.channels()]
        if self.dialog is None:
            self.dialog = PageDialog(self.ctx.parent, self.steps)
            self.dialog.restart.connect(lambda steps: self._restart(steps))
            self.dialog.cancelled.connect(self.runner.cancel)
        job = self._start(module, channels, self.settings(self.dialog.steps.value()))
        if job is not None:
            self.dialog.show_job(job)
            self.dialog.show()
            self.dialog.raise_()

    def _restart(self, steps: int) -> None:
        self.ctx.app_settings.set_value(STEPS_KEY, steps)
        job = self.dialog.job if self.dialog is not None else None
        if job is not None:
            new = self._start(job.layer, job.channels, self.settings(steps))
            if new is not None:
                self.dialog.show_job(new)

    def _start(self, module: str, channels: list[int], settings):
        job = self.runner.start(module, channels, settings)
        if job is None:
            self.ctx.reporter.info("Load a model first: its channels are visualised")
            return None
        self.ctx.reporter.info(f"Visualising {len(channels)} channel(s) of {module}: "
                               f"{settings.steps} steps")
        return job

    def _updated(self, job) -> None:
        if job.error:
            self.ctx.reporter.report(f"Feature visualisation of {job.layer}: {job.error}")
        elif not job.finished and job.optimisation is not None:
            self.ctx.reporter.info(f"Visualising {job.layer}: step {job.done} of {job.steps}",
                                   3000)
        self._refresh_views(job)

    def _finished(self, job) -> None:
        self._memo.clear()  # new pictures in the cache
        if job.cancelled and job is self.runner.job:  # not one a new request replaced
            kept = len(job.objective)
            self.ctx.reporter.info(
                f"Visualisation of {job.layer} cancelled at step {job.done} of {job.steps}"
                + (f" ({kept} cached picture(s) kept)" if kept else ""))
        elif not job.error and not job.cancelled:
            self.ctx.reporter.info(f"Visualised {len(job.channels)} channel(s) of {job.layer} "
                                   f"({job.steps} steps)")
        self._refresh_views(job)

    def _refresh_views(self, job) -> None:
        if self.activation is not None and self.activation.module == job.layer:
            panel = self.activation.panel
            if panel.zoomed in job.pictures:
                panel.refresh()
        if self.dialog is not None:
            self.dialog.update_job(job)
        if self.dataset is not None:
            self._dataset_channel(self.dataset.layer, self.dataset.channel)

    def picture(self, layer: str, channel: int) -> tuple | None:
        """(pixels, caption) of a channel: the running job's, else the cache's."""
        job = self.runner.job
        if job is not None and job.layer == layer and not job.error \
                and job.loaded is self.ctx.control.loaded \
                and job.visualisation(channel) is not None:
            return job.visualisation(channel), job.caption(channel)
        settings = self.settings()
        key = (id(self.ctx.control.loaded), layer, channel, settings)
        if key not in self._memo:
            hit = self.runner.cached_picture(layer, channel, settings)
            self._memo[key] = None if hit is None else (
                hit.pixels, f"channel {channel}: its mean {hit.info['objective']:.4g} on "
                f"this picture after {settings.steps} steps, seed {settings.seed} (cached)")
        return self._memo[key]

    def zoom_picture(self, channel: int) -> tuple | None:
        """The zoom page's picture of `channel`, its title (short: the picture has half the
        pane's width) and its tooltip (the whole caption)."""
        if self.activation is None:
            return None
        layer = self.activation.module
        found = self.picture(layer, channel)
        if found is None:
            return None
        job = self.runner.job
        forming = job is not None and job.layer == layer and channel in job.pictures \
            and channel not in job.objective and not job.finished
        # "channel 5: its mean 10.4 on this picture after 128 steps, seed 0" -> shorter
        short = found[1].split(": ", 1)[1].split(", seed")[0].replace(" on this picture", "")
        title = (f"step {job.done} of {job.steps}" if forming
                 else short.replace("its mean", "mean").replace(" after ", ", "))
        return found[0], title, f"Feature visualisation of {found[1]}"

    def _model_loaded(self, _frame) -> None:
        self._memo.clear()
        self.runner.model_loaded()

    # -- concepts ------------------------------------------------------------------------------
    def show_concepts(self, layer: str) -> None:
        from inspector.core.models.base import has_module

        if not has_module("sklearn"):
            from inspector.core.explain.concepts import INSTALL_HINT

            self.ctx.reporter.report(f"Concepts need scikit-learn, which is not installed: "
                                     f"{INSTALL_HINT}")
            return
        from inspector.ui.featurevis.concepts_dialog import ConceptsDialog

        if self.concepts is not None:
            self.concepts.close()
        self.concepts = ConceptsDialog(self.ctx.parent, self.ctx, self.edit_actions, layer)
        self.concepts.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.concepts.destroyed.connect(lambda: setattr(self, "concepts", None))
        self.concepts.show()
        self.concepts.compute()

    # -- the Dataset dock ----------------------------------------------------------------------
    def _make_strip(self) -> QWidget:
        strip = QWidget()
        row = QHBoxLayout(strip)
        row.setContentsMargins(0, 0, 0, 0)
        self.strip_picture = QLabel()
        self.strip_picture.setFixedSize(STRIP_SIDE, STRIP_SIDE)
        self.strip_caption = QLabel()
        self.strip_caption.setWordWrap(True)
        self.strip_button = QPushButton("Visualise this channel")
        self.strip_button.setToolTip("Optimise the picture this channel responds to most "
                                     "(feature visualisation), with the loaded model")
        self.strip_button.clicked.connect(self._visualise_dataset_channel)
        self.strip_remove = QPushButton("Remove this concept")
        self.strip_remove.setCheckable(True)  # checked while its removal is an edit
        self.strip_remove.clicked.connect(self._toggle_dataset_concept)
        self.edit_actions.history.edits.changed.connect(self._sync_strip_remove)
        self.strip_concept = None
        row.addWidget(self.strip_picture)
        side = QWidget()
        column = QHBoxLayout(side)
        column.addWidget(self.strip_caption, 1)
        column.addWidget(self.strip_button)
        column.addWidget(self.strip_remove)
        row.addWidget(side, 1)
        strip.hide()
        return strip

    def _dataset_channel(self, layer, channel) -> None:
        view, loaded = self.dataset, self.ctx.control.loaded
        atlas = view.atlas if view is not None else None
        self.strip_concept = None
        if layer is None or channel is None or atlas is None \
                or loaded is None or atlas.model != self.ctx.model_name():
            self.strip.hide()
            return
        if atlas.kind == "concepts":
            self._dataset_concept(atlas, layer, channel)
            return
        self.strip_picture.show()
        self.strip_remove.hide()
        self.strip_caption.setToolTip("")
        found = self.picture(layer, channel)
        if found is None:
            self.strip_picture.clear()
            self.strip_caption.setText(f"No feature visualisation of channel {channel} of "
                                       f"{layer} yet.")
        else:
            pix = pixmap_of(found[0]).scaled(STRIP_SIDE, STRIP_SIDE,
                                             Qt.AspectRatioMode.KeepAspectRatio,
                                             Qt.TransformationMode.SmoothTransformation)
            self.strip_picture.setPixmap(pix)
            self.strip_caption.setText(f"Feature visualisation: {found[1]}")
        self.strip_button.setVisible(found is None)
        self.strip.show()

    def _dataset_concept(self, atlas, layer: str, index: int) -> None:
        """A folder concept is no channel to visualise: its numbers and its removal."""
        from inspector.ui.featurevis.folder_concepts import (
            FolderConceptError,
            read_folder_concept,
        )

        try:
            self.strip_concept = read_folder_concept(atlas.folder, layer, index)
        except FolderConceptError as e:
            self.strip.hide()
            self.ctx.reporter.report(str(e))
            return
        self.strip_picture.hide()
        self.strip_button.hide()
        self.strip_caption.setText(self.strip_concept.caption)
        self.strip_caption.setToolTip(self.strip_concept.tooltip)
        self.strip_concept_label = f"concept {index} of {Path(atlas.folder).name}"
        self.strip_remove.show()
        self._sync_strip_remove()
        self.strip.show()

    def _strip_removal(self):
        from inspector.ui.featurevis.concepts_dialog import removal_of

        concept = self.strip_concept
        return None if concept is None else removal_of(
            self.edit_actions.history.edits, concept.layer, concept.vector)

    def _toggle_dataset_concept(self) -> None:
        """The folder concept's removal made, or (it is there) deleted."""
        from inspector.core.edits.interventions import ProjectOut

        concept, edit = self.strip_concept, self._strip_removal()
        if concept is not None and edit is None:
            self.edit_actions.add(ProjectOut(concept.layer, concept.vector,
                                             label=self.strip_concept_label))
        elif edit is not None:
            self.edit_actions.history.delete(edit)
        self._sync_strip_remove()

    def _sync_strip_remove(self) -> None:
        from inspector.ui.featurevis.concepts_dialog import sync_toggle

        if self.strip_concept is not None:
            sync_toggle(self.strip_remove, self._strip_removal(),
                        ("Remove this concept", "Concept removed"), STRIP_REMOVE_TIP)

    def _visualise_dataset_channel(self) -> None:
        view = self.dataset
        if view is not None and view.layer is not None and view.channel is not None:
            self._start(view.layer, [view.channel], self.settings())


def install(ctx: WindowContext, edit_actions, dataset_view=None) -> FeatureVisActions:
    return FeatureVisActions(ctx, edit_actions, dataset_view)
