"""The engine starting and each model load, as the window tells them: the loading overlay
and status bar messages, the first model (the one the app was started with, on the device
chosen last time), File ▸ Open model and the Device menu.

What a loaded model changes in the window (its tree, CAM layers, the module shown, the edits
carried over) is the main window's own (MainWindow._model_loaded): this part only starts
loads and says how they go.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import QObject

from inspector.ui.window import menus

# What a load is doing, said in the status bar and over the empty module tree: on a busy
# machine the import alone takes seconds (tests/benchmarks/bench_ui.py measures each phase).
IMPORTING = "Importing PyTorch and torchvision…"
LOADING = "Loading {label}: building the model, loading its weights, probing its shapes…"


class ModelLoads(QObject):
    def __init__(self, window, control, reporter, status, overlay, app_settings,
                 model_name: Callable[[], str]) -> None:
        super().__init__(window)
        self.window = window  # the dialogs' parent
        self.control = control
        self.reporter = reporter
        self.status = status
        self.overlay = overlay
        self.app_settings = app_settings
        self.model_name = model_name
        self.menus = None  # the window's Menus, once built (attach_menus)
        self._startup_model: dict = {}
        control.engineReady.connect(self._engine_ready)
        control.engineFailed.connect(self._engine_failed)
        control.modelLoading.connect(self._loading)
        control.modelLoadDone.connect(self._done)
        control.modelLoadCancelled.connect(self._cancelled)
        control.catalogReady.connect(self._update_actions)

    def attach_menus(self, window_menus) -> None:
        self.menus = window_menus

    def start(self, model: dict | None, session=None) -> None:
        """Start the engine (or use `session`) and then load `model` (ModelSpec fields; the
        demo model when None)."""
        self._startup_model = dict(model or {})
        self.overlay.say(IMPORTING)
        self.reporter.info(IMPORTING, 0)
        self.status.busy.show()
        self.control.start(session)

    # -- the engine ----------------------------------------------------------------------------
    def _engine_ready(self) -> None:
        from inspector.core.models.devices import available_devices

        devices = available_devices()
        menus.fill_device_menu(self.menus, devices, self.device_chosen)
        self._update_actions()
        fields = dict(self._startup_model)
        last_device = self.app_settings.value("device", "")
        if "device" not in fields and last_device and last_device in devices:
            fields["device"] = last_device  # the device the user chose last time
        try:
            spec = self.control.make_spec(**fields)
        except TypeError as e:
            self.reporter.report(f"Bad model arguments: {e}", popup=True)
            spec = self.control.make_spec()
        self.control.load_model(spec)

    def _engine_failed(self, message: str, details: str) -> None:
        self.status.busy.hide()
        self.overlay.say("PyTorch could not be loaded: see the details in the status bar.")
        self.reporter.report(message, details, popup=True)

    def _update_actions(self) -> None:
        if self.menus is not None:
            self.menus.open_model.setEnabled(self.control.ready)

    # -- a load --------------------------------------------------------------------------------
    def _loading(self, label: str) -> None:
        self.status.busy.show()
        self.reporter.info(f"{LOADING.format(label=label)} (Esc cancels)", 0)
        if not self.model_name():
            self.overlay.say(f"{LOADING.format(label=label)}\nEsc cancels")

    def _cancelled(self, label: str) -> None:
        name = self.model_name()
        kept = f"{name} stays loaded" if name else "no model is loaded"
        self.reporter.info(f"Loading {label} was cancelled: {kept}.", 10000)

    def _done(self, ok: bool) -> None:
        self.status.busy.hide()
        if not ok and not self.model_name():
            self.overlay.say("No model loaded. Open one with File ▸ Open model (Ctrl+Shift+O).")

    # -- what the user asks for ----------------------------------------------------------------
    def open_dialog(self) -> None:
        """File ▸ Open model."""
        if not self.control.ready:
            self.reporter.info("The engine is still starting…")
            return
        from inspector.core.models.devices import available_devices
        from inspector.ui.open_model.dialog import ModelDialog

        dialog = ModelDialog(self.window, catalog=self.control.catalog,
                             devices=available_devices(),
                             device=self.control.model_spec_device(), settings=self.app_settings)
        if dialog.exec() == ModelDialog.DialogCode.Accepted:
            self.control.load_model(dialog.spec())
        dialog.deleteLater()

    def device_chosen(self, device: str | None) -> None:
        """A device picked in the Device menu: the model again, on it (and remembered)."""
        spec = self.control.model_spec or self.control.make_spec()
        self.app_settings.set_value("device", device or "")
        self.control.load_model(dataclasses.replace(spec, device=device))
