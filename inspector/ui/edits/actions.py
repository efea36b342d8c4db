"""Where edits are made: from what the user is looking at.

- A right-click on a channel tile of the activation mosaic: zero it, keep only it, scale it.
- The module tree's context menu (ModuleTreeWidget.menu_extensions): clamp the output, add
  seeded noise, replace it with its mean, scale the gradient flowing back through it; and
  Copy as Python.
- A rectangle dragged on the model input (ImagePane.occludeRequested): occlude it.

Each asks for its numbers (QInputDialog) and pushes one AddEdit on the undo stack; the
edit list's `changed` runs the model again. Interventions come from core.edits.interventions,
imported when an edit is made (it imports torch, which the window loads in the background).
Copy as Python asks core.script.export for a script of the current run.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QInputDialog, QMenu, QWidget

from inspector.ui.edits.commands import EditHistory

# Modules whose output an edit cannot replace (a forward hook needs one tensor).
NOT_EDITABLE = {"never_called": "it is never called",
                "tuple_output": "it returns several tensors"}


class NumbersError(ValueError):
    """What the user typed is not the numbers asked for (the message says which)."""


def parse_numbers(text: str, names: tuple[str, ...], optional: bool = False,
                  integer: tuple[str, ...] = ()) -> list[float | int | None]:
    """"0, 6" -> [0.0, 6.0] for names ("min", "max"). With `optional`, an empty part is
    None ("0," : no maximum); names in `integer` must be whole numbers."""
    parts = [p.strip() for p in text.replace(";", ",").split(",")]
    if len(parts) != len(names):
        raise NumbersError(f"expected {len(names)} numbers ({', '.join(names)}), got “{text}”")
    values: list[float | int | None] = []
    for name, part in zip(names, parts, strict=True):
        if not part:
            if not optional:
                raise NumbersError(f"no value for {name}")
            values.append(None)
            continue
        try:
            value = int(part) if name in integer else float(part)
        except ValueError:
            kind = "a whole number" if name in integer else "a number"
            raise NumbersError(f"{name} must be {kind}, got “{part}”") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise NumbersError(f"{name} must be finite, got “{part}”")
        values.append(value)
    return values


class EditActions(QObject):
    """Makes edits for the window: `history` takes them; `reporter` (errors.ErrorReporter)
    says what went wrong; `control` (SessionControl) and `runs` (RunBuilder) give Copy as
    Python the loaded model and the current run."""

    def __init__(self, history: EditHistory, reporter, control, runs, window: QWidget) -> None:
        super().__init__(window)
        self.history = history
        self.reporter = reporter
        self.control = control
        self.runs = runs
        self.window = window
        self._mosaic_view = None
        # Add-ons' entries in the channel menu: each called with (menu, module, channel).
        self.channel_menu_extensions: list = []

    # -- the activation mosaic -------------------------------------------------------------------
    def attach_mosaic(self, view) -> None:
        """Offer the channel edits on a right-click in `view`'s mosaic (an ActivationView)."""
        self._mosaic_view = view
        view.panel.mosaic_view.item.scene().sigMouseClicked.connect(self._mosaic_clicked)

    def _mosaic_clicked(self, event) -> None:
        # pyqtgraph sends every click here after its items saw it; the mosaic's ViewBox has
        # its own menu switched off, so a right-click is ours.
        if event.button() != Qt.MouseButton.RightButton or event.isAccepted():
            return
        hit = self.channel_under(event.scenePos())
        if hit is None:
            return
        event.accept()
        frame = self._mosaic_view.current_frame()
        if frame.path:  # one tensor of a tuple output: a forward hook cannot replace it
            self.reporter.info(f"{frame.module} returns several tensors: its channels cannot "
                               "be edited (edit a module that returns one tensor)")
            return
        self.channel_menu(*hit).popup(event.screenPos().toPoint())

    def channel_under(self, scene_pos) -> tuple[str, int] | None:
        """(module, channel) of the mosaic tile at `scene_pos`, or None."""
        from inspector.ui.views.tensor_panel import MOSAIC

        view = self._mosaic_view
        if view is None or view.panel.mode != MOSAIC:
            return None
        frame = view.current_frame()
        if frame is None:
            return None
        panel = view.panel
        p = panel.mosaic_view.item.mapFromScene(scene_pos)
        channel = panel.mosaic_view.mosaic.channel_at(p.x(), p.y())
        return None if channel is None else (frame.module, channel)

    def channel_menu(self, module: str, channel: int) -> QMenu:
        menu = QMenu(self.window)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        title = menu.addAction(f"Channel {channel} of {module or 'the model'}")
        title.setEnabled(False)
        menu.addSection("Edit in the next runs")
        menu.addAction("Zero this channel", lambda: self.zero_channel(module, channel))
        menu.addAction("Keep only this channel", lambda: self.keep_channel(module, channel))
        menu.addAction("Scale this channel…", lambda: self.ask_scale_channel(module, channel))
        for extend in self.channel_menu_extensions:
            extend(menu, module, channel)
        return menu

    def add(self, intervention) -> None:
        """Push `intervention` on the undo stack once the Session has checked it against the
        model, as the CLI's --edit is (core.edits.spec.check_edits: channels in range, a
        module whose output can be edited; a channels-last output's channel dim filled in),
        so that the same edit means the same in the window, the CLI and Copy as Python."""
        from inspector.core.edits.spec import EditSpecError

        try:
            (checked,) = self.control.session.check_edits((intervention,))
        except EditSpecError as e:
            self.reporter.report(f"{e}; no edit was made")
            return
        self.history.add(checked)

    def zero_channel(self, module: str, channel: int) -> None:
        from inspector.core.edits.interventions import ZeroChannels

        self.add(ZeroChannels(module, (channel,)))

    def keep_channel(self, module: str, channel: int) -> None:
        from inspector.core.edits.interventions import KeepChannels

        self.add(KeepChannels(module, (channel,)))

    def ask_scale_channel(self, module: str, channel: int) -> None:
        from inspector.core.edits.interventions import ScaleChannels

        factor, ok = QInputDialog.getDouble(
            self.window, "Scale a channel", f"Multiply channel {channel} of {module} by:",
            2.0, -1e6, 1e6, 4)
        if ok:
            self.add(ScaleChannels(module, (channel,), factor))

    # -- the module tree ---------------------------------------------------------------------------
    def add_module_actions(self, menu: QMenu, name: str, info) -> None:
        """The tree's context menu for module `name` (core.models.tree.ModuleInfo `info`)."""
        menu.addSection("Edit in the next runs")
        why_not = next((text for hazard, text in NOT_EDITABLE.items() if hazard in info.hazards),
                       None)
        if why_not is None and info.output_shape is None:
            why_not = "its output is not a tensor"
        label = name or "the model"
        for text, slot in (("Clamp output…", self.ask_clamp), ("Add noise…", self.ask_noise),
                           ("Replace with its mean", self.replace_with_mean),
                           ("Scale gradient…", self.ask_scale_gradient)):
            action = menu.addAction(text, lambda _=False, s=slot: s(name))
            if why_not is not None:
                action.setEnabled(False)
                action.setToolTip(f"{label} cannot be edited: {why_not}")
        menu.addSeparator()
        menu.addAction("Copy as Python", self.copy_as_python)

    def _ask_numbers(self, title: str, label: str, default: str, names: tuple[str, ...],
                     **parse) -> list | None:
        text, ok = QInputDialog.getText(self.window, title, label, text=default)
        if not ok:
            return None
        try:
            return parse_numbers(text, names, **parse)
        except NumbersError as e:
            self.reporter.report(f"{title}: {e}; no edit was made")
            return None

    def ask_clamp(self, module: str) -> None:
        from inspector.core.edits.interventions import Clamp

        values = self._ask_numbers(
            "Clamp output", f"Clamp the output of {module or 'the model'} to min, max "
            "(leave one empty for no bound):", "0, 1", ("min", "max"), optional=True)
        if values is None:
            return
        lo, hi = values
        if lo is None and hi is None:
            self.reporter.report("Clamp output: give a minimum, a maximum or both; no edit was made")
        elif lo is not None and hi is not None and lo > hi:
            self.reporter.report(f"Clamp output: the minimum {lo:g} is above the maximum "
                                 f"{hi:g}; no edit was made")
        else:
            self.add(Clamp(module, lo, hi))

    def ask_noise(self, module: str) -> None:
        from inspector.core.edits.interventions import AddNoise

        values = self._ask_numbers(
            "Add noise", f"Gaussian noise added to the output of {module or 'the model'}: "
            "standard deviation, seed:", "0.1, 0", ("std", "seed"), integer=("seed",))
        if values is None:
            return
        std, seed = values
        if std < 0:
            self.reporter.report(f"Add noise: the standard deviation must be 0 or more, "
                                 f"got {std:g}; no edit was made")
            return
        self.add(AddNoise(module, std, seed))

    def replace_with_mean(self, module: str) -> None:
        from inspector.core.edits.interventions import ReplaceWithMean

        self.add(ReplaceWithMean(module))

    def ask_scale_gradient(self, module: str) -> None:
        from inspector.core.edits.interventions import ScaleGradient

        factor, ok = QInputDialog.getDouble(
            self.window, "Scale gradient",
            f"Multiply the gradient flowing back into {module or 'the model'} by:",
            0.5, -1e6, 1e6, 4)
        if not ok:
            return
        self.add(ScaleGradient(module, factor))
        if not self.runs.settings.value.gradients:
            self.reporter.info("The gradient edit applies once Run ▸ Compute gradients is on")

    # -- the image ---------------------------------------------------------------------------------
    def add_occlusion(self, box) -> None:
        """Occlude `box` (x0, y0, x1, y1 in model-input pixels) of the model input."""
        from inspector.core.edits.interventions import Occlude

        x0, y0, x1, y1 = (int(v) for v in box)
        self.add(Occlude("", box=(x0, y0, x1, y1)))

    # -- Copy as Python ----------------------------------------------------------------------------
    def copy_as_python(self) -> None:
        """Put a standalone script that reproduces the current run on the clipboard."""
        loaded = self.control.loaded
        request = self.control.last_request or self.runs.request()
        if loaded is None or request is None:
            self.reporter.info("Copy as Python: load a model and open an image first")
            return
        try:
            from inspector.core.models.script_code import ScriptExportError
            from inspector.core.script.export import script_for
        except ImportError as e:
            self.reporter.report(f"Copy as Python is not available in this build: {e}")
            return
        try:
            text = script_for(loaded, request)
        except ScriptExportError as e:
            self.reporter.report(f"Copy as Python: {e}")
            return
        except Exception as e:  # noqa: BLE001 - a bug there must not cost the window
            self.reporter.report_exception("Copy as Python failed", e)
            return
        QGuiApplication.clipboard().setText(text)
        lines = text.count("\n") + 1
        self.reporter.info(f"Copied a {lines}-line Python script of this run to the clipboard")
