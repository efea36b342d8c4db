"""The main window: docks, menus, shortcuts, drag and drop, the status bar, and the wiring.

It shows before torch is imported: this module and what it imports at the top need only
Qt, numpy and Pillow. The data views (pyqtgraph) are built by `build_views` right after the
window first paints, and the engine (torch) comes up in the background (SessionControl).
Until a model is loaded an overlay says what is being loaded.

Frames flow one way: core's worker -> channel -> FrameRouter (a timer on this thread) ->
the tree, the image pane, the views, and the status bar. User actions flow the other way
through SessionControl, which only ever queues work for the worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from PySide6.QtCore import QMetaObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QMessageBox, QWidget

from inspector.core.frames import ModelLoaded, RunFinished, RunStarted
from inspector.ui import capture_choice
from inspector.ui.docks import DEFAULT_SIZE, DOCKS, default_layout, default_sizes, make_docks
from inspector.ui.errors import ErrorReporter
from inspector.ui.frame_router import FrameRouter
from inspector.ui.gc_freeze import StartupFreezer
from inspector.ui.gui_thread_gc import GuiThreadCollector
from inspector.ui.image_pane import ImagePane
from inspector.ui.module_tree import ModuleTreeWidget
from inspector.ui.session_control import SessionControl
from inspector.ui.settings import AppSettings
from inspector.ui.status_panel import LoadingOverlay, StatusPanel

IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp *.ppm);;All files (*)"
TIMING_ENV = "INSPECTOR_TIMING_FILE"  # benchmarks and e2e tests: where to write events
EXIT_ENV = "INSPECTOR_EXIT_AFTER_FIRST_RUN"


def mark(event: str, **extra) -> None:
    """Record when something happened (launch benchmarks, e2e tests): one JSON line."""
    path = os.environ.get(TIMING_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"event": event, "t": time.time(), **extra}) + "\n")


class MainWindow(QMainWindow):
    closed = Signal()

    def __init__(self, settings: AppSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Network Inspector")
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.settings = settings if settings is not None else AppSettings()
        self.router = FrameRouter(self, stagger=True)
        self.control = SessionControl(self.router, self)
        self.reporter = ErrorReporter(self.statusBar(), self)
        self.views: dict[str, QWidget] = {}
        self.model_name = ""
        self._preview: frozenset[str] = frozenset()  # what the last submitted run previews
        self._first_run_done = False
        self.last_run: RunFinished | None = None  # the last of our runs that finished
        self._gc_freezer = StartupFreezer()
        self._gc_collector = GuiThreadCollector(self)
        self._model_generation = 0  # counts ModelLoaded frames
        self._closing = False

        self.tree = ModuleTreeWidget()
        self.images = ImagePane()
        self.docks = make_docks(self, self._initial_widget)
        self.resize(*DEFAULT_SIZE)
        default_layout(self, self.docks)
        self._default_state = self.saveState()
        self.status = StatusPanel(self.statusBar())
        self._build_menus()
        self.overlay = LoadingOverlay(self, self.tree.view)
        self.overlay.say("Starting…")
        self._connect()
        self._restored = self.settings.restore_window(self)
        self.tree.restore_header_state(self.settings.value("tree_header"))

    # -- construction ------------------------------------------------------------------------
    def _initial_widget(self, key: str) -> QWidget:
        if key in ("tree", "images"):
            return {"tree": self.tree, "images": self.images}[key]
        placeholder = QLabel("Loading…")  # build_views puts the view here
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        return placeholder

    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self._action(file, "Open &images…", self.open_images, QKeySequence.StandardKey.Open)
        self._action(file, "Open &folder…", self.open_folder)
        self.open_model_action = self._action(
            file, "Open &model…", self.open_model_dialog, "Ctrl+Shift+O")
        self.open_model_action.setEnabled(False)
        self._action(file, "&Paste image", self.paste, QKeySequence.StandardKey.Paste)
        file.addSeparator()
        self.recent_images_menu = file.addMenu("Recent images")
        self.recent_models_menu = file.addMenu("Recent models")
        self.recent_images_menu.aboutToShow.connect(self._fill_recent_images)
        self.recent_models_menu.aboutToShow.connect(self._fill_recent_models)
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        run = bar.addMenu("&Run")
        self.rerun_action = self._action(run, "&Run again", self.control.rerun, "F5")
        self._action(run, "&Cancel run", self.control.cancel, "Esc")
        run.addSeparator()
        self._action(run, "&Previous image", lambda: self.images.step(-1), Qt.Key.Key_Left)
        self._action(run, "&Next image", lambda: self.images.step(1), Qt.Key.Key_Right)
        self._action(run, "Show original / model &input", self.images.toggle_mode, "Ctrl+I")
        run.addSeparator()
        self.backward_action = self._action(run, "Compute &gradients", self._set_backward)
        self.backward_action.setCheckable(True)
        self.backward_action.setChecked(self.settings.value("backward", True))
        self.control.backward = self.backward_action.isChecked()

        self.device_menu = bar.addMenu("&Device")
        self.device_group = QActionGroup(self)
        self.device_menu.addAction("(starting…)").setEnabled(False)

        view = bar.addMenu("&View")
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        self._action(view, "Reset layout", self.reset_layout)

        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "Keyboard shortcuts", self._show_shortcuts, "F1")
        self._action(help_menu, "About", self._show_about)

    def _connect(self) -> None:
        r, c = self.router, self.control
        r.add_consumer(self.tree.handle_frame)
        r.add_flush(self.tree.flush)
        r.add_flush(self._update_frames_label)
        r.modelLoaded.connect(self._model_loaded)
        r.runStarted.connect(self._run_started)
        r.runFinished.connect(self._run_finished)
        r.errorFrame.connect(self._error_frame)
        r.consumerFailed.connect(self.reporter.report)
        c.engineReady.connect(self._engine_ready)
        c.engineFailed.connect(self._engine_failed)
        c.modelLoading.connect(self._model_loading)
        c.modelLoadDone.connect(self._model_load_done)
        c.catalogReady.connect(self._catalog_ready)
        c.capture_source = self._capture_spec
        self.images.imageSelected.connect(self._image_selected)
        self.images.failed.connect(self.reporter.report)
        self.images.imagesAdded.connect(self.settings.add_recent_images)
        self.tree.moduleSelected.connect(self._module_selected)
        self.tree.camLayerRequested.connect(self._cam_layer_requested)
        self.tree.model.captureChanged.connect(c.schedule_rerun)

    def build_views(self) -> None:
        """Create the data views (this imports pyqtgraph: after the window is on screen)."""
        import importlib

        for key, (_title, spec) in DOCKS.items():
            if spec is None or key in self.views:
                continue
            module_name, class_name = spec
            try:
                module = importlib.import_module(f"inspector.ui.views.{module_name}")
                view = getattr(module, class_name)()
            except Exception as e:  # noqa: BLE001 - one broken view must not stop the app
                self.reporter.report_exception(f"The {DOCKS[key][0]} view failed to start", e)
                continue
            self.views[key] = view
            self.docks[key].setWidget(view)
            # The views' own zero-delay timers paint after the tick, each in its own turn of
            # the event loop (not `view.flush()` in the tick): a run's last frames then cost
            # several short pauses instead of one long one that the user would feel.
            self.router.add_consumer(view.handle_frame)
        if "predictions" in self.views:
            self.views["predictions"].targetChosen.connect(self.control.set_target)
        if "cam" in self.views:
            cam = self.views["cam"]
            method = self.settings.value("cam_method", self.control.cam_method)
            cam.set_method(method)
            self.control.cam_method = cam.method or self.control.cam_method
            cam.methodChanged.connect(self._cam_method_changed)
            cam.layerChanged.connect(lambda layer: self.control.set_cam(layer=layer))
        module = self.tree.current_module()
        if module is not None:
            self._module_selected(module)

    # -- starting --------------------------------------------------------------------------
    def start(self, images=(), model: dict | None = None, session=None) -> None:
        """List `images`, start the engine (or use `session`) and load `model` (ModelSpec
        fields as a dict; the demo model when None)."""
        self._startup_model = dict(model or {})
        if images:
            self.images.add_paths(list(images))
        self.overlay.say("Loading PyTorch…")
        self.status.busy.show()
        self._gc_collector.start()  # before any thread of the engine allocates
        self.control.start(session)

    def _engine_ready(self) -> None:
        mark("engine_ready")
        self._fill_device_menu()
        self._update_actions()
        fields = dict(self._startup_model)
        last_device = self.settings.value("device", "")
        if "device" not in fields and last_device:
            from inspector.core.models import available_devices

            if last_device in available_devices():  # the device the user chose last time
                fields["device"] = last_device
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

    def _catalog_ready(self) -> None:
        mark("torchvision_ready")
        self._update_actions()

    def _update_actions(self) -> None:
        self.open_model_action.setEnabled(self.control.ready)

    # -- model -------------------------------------------------------------------------------
    def _model_loading(self, label: str) -> None:
        self.status.busy.show()
        self.reporter.info(f"Loading {label}…", 0)
        if not self.model_name:
            self.overlay.say(f"Loading {label}…")

    def _model_load_done(self, ok: bool) -> None:
        self.status.busy.hide()
        if not ok and not self.model_name:
            self.overlay.say("No model loaded. Open one with File ▸ Open model (Ctrl+Shift+O).")

    def _model_loaded(self, frame: ModelLoaded) -> None:
        mark("model_loaded")
        self._model_generation += 1
        self.control.model_changed()
        self.model_name = frame.name
        self.overlay.hide()
        self.status.busy.hide()
        self.reporter.info(f"Loaded {frame.description}")
        self.tree.set_tree(frame.tree, frame.name)
        self.status.show_model(frame)
        for action in self.device_group.actions():
            action.setChecked(action.data() == self.control.model_spec_device())
        spec = self.control.model_spec
        if spec is not None:
            self.settings.add_recent_model({**dataclasses.asdict(spec), "trust_pickle": False})
        self.setWindowTitle(f"{frame.name} — Network Inspector")
        self._set_cam_layers(frame.tree)
        selected = self.settings.value(f"module/{frame.name}", None)
        if not (isinstance(selected, str) and self.tree.select_module(selected)):
            self.tree.select_module(capture_choice.default_module(frame.tree))
        self.control.rerun()

    def _set_cam_layers(self, tree, choose: str | None = None) -> None:
        cam = self.views.get("cam")
        if cam is None or tree is None:
            return
        layers = tree.with_spatial_output()
        try:
            default = self.control.session.default_cam_layer()
        except Exception:  # noqa: BLE001 - no CAM module yet, or no spatial layer
            # The last layer that still has a spatial map (not a global pool's 1 x 1).
            maps = [n for n in layers if min(tree.modules[n].output_shape[-2:]) > 1]
            default = maps[-1] if maps else None
        if choose is not None and choose not in layers:
            layers.append(choose)
        cam.set_layers(layers, choose or default)

    def open_model_dialog(self) -> None:
        if not self.control.ready:
            self.reporter.info("The engine is still starting…")
            return
        from inspector.core.models import available_devices
        from inspector.ui.model_dialog import ModelDialog

        dialog = ModelDialog(self, catalog=self.control.catalog, devices=available_devices(),
                             device=self.control.model_spec_device(), settings=self.settings)
        self.model_dialog = dialog  # tests reach it here
        if dialog.exec() == ModelDialog.DialogCode.Accepted:
            self.control.load_model(dialog.spec())
        self.model_dialog = None
        dialog.deleteLater()

    def _fill_device_menu(self) -> None:
        from inspector.core.models import available_devices

        self.device_menu.clear()
        for action in self.device_group.actions():
            self.device_group.removeAction(action)
        for label, device in [("Automatic", None)] + [(d, d) for d in available_devices()]:
            action = self.device_menu.addAction(label)
            action.setCheckable(True)
            action.setData(device)
            self.device_group.addAction(action)
            action.triggered.connect(lambda _=False, d=device: self._device_chosen(d))

    def _device_chosen(self, device: str | None) -> None:
        spec = self.control.model_spec or self.control.make_spec()
        self.settings.set_value("device", device or "")
        self.control.load_model(dataclasses.replace(spec, device=device))

    # -- runs ----------------------------------------------------------------------------------
    def _image_selected(self, entry) -> None:
        self.control.show(entry)

    def _capture_spec(self):
        from inspector.core.hooks import CaptureSpec

        modules = capture_choice.capture_modules(self.tree.model.capture_modules(),
                                                 self.control.backward)
        self._preview = capture_choice.preview_modules(self.tree.model.tree, modules,
                                                       self.tree.current_module())
        return CaptureSpec(modules=modules, preview=self._preview)

    def _module_selected(self, name: str) -> None:
        for key in ("activation", "gradient"):
            if key in self.views:
                self.views[key].set_module(name)
        if self.model_name:
            self.settings.set_value(f"module/{self.model_name}", name)
        if name not in self._preview:
            self.control.schedule_rerun()  # its previews were not captured in the last run

    def _cam_method_changed(self, method: str) -> None:
        self.settings.set_value("cam_method", method)
        self.control.set_cam(method=method)

    def _cam_layer_requested(self, name: str) -> None:
        self._set_cam_layers(self.tree.model.tree, choose=name)
        self.control.set_cam(layer=name)

    def _set_backward(self, on: bool) -> None:
        self.control.backward = on
        self.settings.set_value("backward", on)
        self.control.rerun()

    def _run_started(self, frame: RunStarted) -> None:
        if frame.run_id != self.control.current_run:
            return
        self.images.set_model_input(frame.display)
        self.status.show_running(frame.label)

    def _run_finished(self, frame: RunFinished) -> None:
        if frame.run_id != self.control.current_run:
            return
        self.last_run = frame
        self.status.show_run(frame)
        self._update_frames_label()
        if frame.status == "ok":
            self._gc_freezer.after_run(self._model_generation)
        if not self._first_run_done and frame.status == "ok":
            self._first_run_done = True
            mark("first_run_finished", regions=self.dock_regions())
            if os.environ.get(EXIT_ENV):
                QMetaObject.invokeMethod(self, "close", Qt.ConnectionType.QueuedConnection)

    def _error_frame(self, frame) -> None:
        # A model-load failure (no run id) is something the user is waiting on: open the
        # details at once. Run failures stay in the status bar (stepping through a folder of
        # broken files must not pile up dialogs).
        self.reporter.report(frame.message, frame.details, popup=frame.run_id is None)

    def _update_frames_label(self) -> None:
        if self.router.first_frame_time is not None and not getattr(self, "_marked", False):
            self._marked = True
            mark("first_frames")
        self.status.show_frames(self.router.frames_shown, self.router.frames_dropped)

    # -- images: open, paste, drop ------------------------------------------------------------
    def open_images(self) -> None:
        start = str(self.settings.value("image_dir", str(Path.home())))
        paths, _ = QFileDialog.getOpenFileNames(self, "Open images", start, IMAGE_FILTER)
        if paths:
            self.settings.set_value("image_dir", str(Path(paths[0]).parent))
            self.images.add_paths(paths)

    def open_folder(self) -> None:
        start = str(self.settings.value("image_dir", str(Path.home())))
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of images", start)
        if folder:
            self.settings.set_value("image_dir", folder)
            self.images.add_paths([folder])

    def paste(self) -> None:
        mime = QGuiApplication.clipboard().mimeData()
        if not self.images.take_mime(mime):
            self.reporter.report("The clipboard holds no image or image file")

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if self.images.accepts(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        self.dragEnterEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802
        if self.images.take_mime(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    # -- recent --------------------------------------------------------------------------------
    def _fill_recent_images(self) -> None:
        menu = self.recent_images_menu
        menu.clear()
        for path in self.settings.recent_images():
            menu.addAction(path, lambda p=path: self.images.add_paths([p]))
        if menu.isEmpty():
            menu.addAction("(none)").setEnabled(False)

    def _fill_recent_models(self) -> None:
        from inspector.ui.model_dialog import spec_label

        menu = self.recent_models_menu
        menu.clear()
        if self.control.ready:
            for fields in self.settings.recent_models():
                try:
                    spec = self.control.make_spec(**fields)
                except TypeError:
                    continue
                menu.addAction(spec_label(spec), lambda s=spec: self._open_recent_model(s))
        if menu.isEmpty():
            menu.addAction("(none)").setEnabled(False)

    def _open_recent_model(self, spec) -> None:
        if spec.pickle:
            answer = QMessageBox.warning(
                self, "Open a pickled model",
                f"Opening {Path(spec.pickle).name} runs the code inside it. Open it only if you "
                "trust the file. Open it?",
                QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel)
            if answer != QMessageBox.StandardButton.Open:
                return
            spec = dataclasses.replace(spec, trust_pickle=True)
        self.control.load_model(spec)

    # -- window ----------------------------------------------------------------------------------
    def dock_regions(self) -> dict[str, list[int]]:
        """Where each visible pane's content is on the screen: [x, y, width, height] (for
        the e2e test's screenshot checks): the tree's rows, the image, each view."""
        parts = {key: dock.widget() for key, dock in self.docks.items()}
        parts["tree"] = self.tree.view.viewport()
        parts["images"] = self.images.canvas
        regions = {}
        for key, widget in parts.items():
            if widget is not None and widget.isVisible():
                top_left = widget.mapToGlobal(widget.rect().topLeft())
                regions[key] = [top_left.x(), top_left.y(), widget.width(), widget.height()]
        return regions

    def reset_layout(self) -> None:
        for dock in self.docks.values():
            dock.setFloating(False)
        self.restoreState(self._default_state)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not getattr(self, "_shown_once", False):
            self._shown_once = True
            if not self._restored:
                default_sizes(self, self.docks)
            self.overlay.place()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.overlay.place()

    def _show_shortcuts(self) -> None:
        QMessageBox.information(self, "Keyboard shortcuts", SHORTCUTS_HTML)

    def _show_about(self) -> None:
        from inspector.ui.about_dialog import AboutDialog

        device = self.status.device.text().removeprefix("device ") if self.model_name else None
        dialog = AboutDialog(self, device=device, settings=self.settings)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()

    def closeEvent(self, event) -> None:  # noqa: N802
        if not self._closing:
            self._closing = True
            self.settings.save_window(self)
            self.settings.set_value("tree_header", self.tree.header_state())
            self.settings.sync()
            self.hide()  # gone at once for the user, even if a model load takes a while to stop
            self.shutdown()
            self.closed.emit()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop every timer and thread this window started (also used by tests)."""
        if getattr(self, "_shut_down", False):
            return
        self._shut_down = True
        self.control.close()
        self._gc_collector.stop()
        self.images.stop()
        self.reporter.stop()
        for view in self.views.values():
            timer = getattr(view, "_paint_timer", None)
            if timer is not None:
                timer.stop()


SHORTCUTS_HTML = """<table cellpadding=3>
<tr><td><b>Ctrl+O</b></td><td>Open images</td></tr>
<tr><td><b>Ctrl+Shift+O</b></td><td>Open a model</td></tr>
<tr><td><b>Ctrl+V</b></td><td>Paste an image</td></tr>
<tr><td><b>← / →</b></td><td>Previous / next image</td></tr>
<tr><td><b>Ctrl+I</b></td><td>Original image / model input</td></tr>
<tr><td><b>F5</b></td><td>Run again</td></tr>
<tr><td><b>Esc</b></td><td>Cancel the run</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table><p>Drop images or folders anywhere on the window.</p>"""
