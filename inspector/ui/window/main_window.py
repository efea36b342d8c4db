"""The main window: docks, the status bar, and the wiring between the parts.

It shows before torch is imported: this module and what it imports at the top need only
Qt, numpy and Pillow. The data views (pyqtgraph) are built by `build_views` right after the
window first paints, and the engine (torch) comes up in the background (SessionControl).
Until a model is loaded an overlay says what is being loaded.

Frames flow one way: core's worker -> channel -> FrameRouter (a timer on this thread) ->
its run store, which tells the tree and the views what changed in what they show; the
router's signals tell the image pane and the status bar. User actions flow the other way:
RunBuilder makes each run a value from the widgets, and SessionControl queues it for the
worker. Edits (what the next runs change: edits.py, their undo stack edit_commands.py, the
Edits dock edits_dock.py, and edit_actions.py where they are made; window_edits.py wires
them in) rerun on every change.
The menus (menus.py), image sources and drops (image_sources.py), recent files
(recent_files.py) and saved settings (window_settings.py) live in their own modules.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QWidget

from inspector.core.records.frames import ModelLoaded, RunFinished, RunStarted
from inspector.ui.attention import wiring as attention_wiring
from inspector.ui.compare import actions as compare_actions
from inspector.ui.compare import models_actions
from inspector.ui.edits import window_edits
from inspector.ui.image.pane import ImagePane
from inspector.ui.image.sources import ImageSources
from inspector.ui.module_tree.widget import ModuleTreeWidget
from inspector.ui.run import capture_choice
from inspector.ui.run.builder import RunBuilder
from inspector.ui.run.expensive_method import ExpensiveMethodGuard
from inspector.ui.run.frame_router import FrameRouter
from inspector.ui.run.progress import RunProgress
from inspector.ui.run.session_control import SessionControl
from inspector.ui.run.settings import RunSettingsModel
from inspector.ui.shell.app_settings import AppSettings
from inspector.ui.shell.arrow_keys import keep_arrows_in_focused_widgets
from inspector.ui.shell.context import WindowContext
from inspector.ui.shell.docks import (
    DEFAULT_SIZE,
    default_layout,
    default_sizes,
    make_docks,
    make_views,
    reset_layout,
    tidy_tab_bars_later,
)
from inspector.ui.shell.status_panel import LoadingOverlay, StatusPanel
from inspector.ui.video import player as video_player
from inspector.ui.window import menus
from inspector.ui.window.addons import install_view_addons
from inspector.ui.window.errors import ErrorReporter
from inspector.ui.window.gc_freeze import StartupFreezer
from inspector.ui.window.gui_thread_gc import GuiThreadCollector
from inspector.ui.window.model_loads import ModelLoads
from inspector.ui.window.recent_files import RecentFiles
from inspector.ui.window.window_settings import WindowSettings


class MainWindow(QMainWindow):
    closed = Signal()

    def __init__(self, settings: AppSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Network Inspector")
        self.setDockNestingEnabled(True)
        keep_arrows_in_focused_widgets(QApplication.instance())
        self.settings = settings if settings is not None else AppSettings()
        self.router = FrameRouter(self, stagger=True)
        self.control = SessionControl(self.router, self)
        self.reporter = ErrorReporter(self.statusBar(), self)
        self.saved = WindowSettings(self, self.settings, self.reporter)
        self.views: dict[str, QWidget] = {}
        self.save_actions = None  # File ▸ Save view as PNG / NPZ, once the views exist
        self.atlas = None  # File ▸ Open atlas and the Dataset dock, once the views exist
        self.featurevis = None  # Visualise channel / page and Concepts, once the views exist
        self.faithfulness = None  # the Faithfulness tab's runs, once the views exist
        self.model_name = ""
        self.last_run: RunFinished | None = None  # the last of our runs that finished
        self._startup_edits: tuple[str, ...] = ()  # --edit specs, added once a model is loaded
        self._early_note = ""  # an image's note from before the first model (_image_noted)
        self._gc_freezer = StartupFreezer()
        self._gc_collector = GuiThreadCollector(self)
        self._model_generation = 0  # counts ModelLoaded frames
        self._closing = False
        self._shut_down = False
        self._shown_once = False

        self.tree = ModuleTreeWidget(store=self.router.store)
        self.images = ImagePane()
        self.docks = make_docks(self, self._initial_widget)
        self.resize(*DEFAULT_SIZE)
        default_layout(self, self.docks)
        self.status = StatusPanel(self.statusBar())
        self.run_progress = RunProgress(self.status, self)
        self.sources = ImageSources(self, self.images, self.settings, self.reporter)
        # What the next runs ask for: the widgets write it, the builder reads it.
        self.run_settings = RunSettingsModel(parent=self)
        self.run_settings.restore(self.settings)
        self.run_settings.changed.connect(self._run_settings_changed)
        self.runs = RunBuilder(self.control, self.run_settings, self)
        # Score-CAM remembered from another model asks first when it would take minutes.
        self.expensive = ExpensiveMethodGuard(self, self.run_settings, self.reporter)
        # What the add-ons (edits, compare, video, atlas, saving) may use of the window.
        self.context = WindowContext(
            parent=self, store=self.router.store, settings=self.run_settings,
            control=self.control, runs=self.runs, reporter=self.reporter, status=self.status,
            app_settings=self.settings, tree=self.tree, images=self.images, views=self.views,
            docks=self.docks, closed=self.closed, model_name=lambda: self.model_name)
        self.window_edits = window_edits.install(self.context)  # edits, undo, the Edits dock
        self.edits = self.window_edits.edits
        self.history = self.window_edits.history
        self.edit_actions = self.window_edits.actions
        self._default_state = self.saveState()  # after every dock is placed
        self.overlay = LoadingOverlay(self, self.tree.view)
        self.overlay.say("Starting…")
        # The engine starting and model loads, as the overlay and the status bar say them.
        self.model_loads = ModelLoads(self, self.control, self.reporter, self.status,
                                      self.overlay, self.settings, lambda: self.model_name)
        self.menus = menus.build_menus(self)
        self.model_loads.attach_menus(self.menus)
        self.compare = compare_actions.install(self.context)  # Compare ▸ Pin as A / Unpin A
        self.compare_models = models_actions.install(self.context)  # File ▸ Compare with model…
        self.recent = RecentFiles(self, self.menus.recent_images, self.menus.recent_models,
                                  self.settings, self.images, self.control)
        self.video = video_player.install(self.context)  # videos and File ▸ Camera, live
        # Runs read a transformer's attention while the Attention or Depth dock is shown.
        self.attention = attention_wiring.install(self.context)
        self._connect()
        self._restored = self.saved.restore()

    # -- construction ------------------------------------------------------------------------
    def _initial_widget(self, key: str) -> QWidget:
        if key in ("tree", "images"):
            return {"tree": self.tree, "images": self.images}[key]
        placeholder = QLabel("Loading…")  # build_views puts the view here
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        return placeholder

    @property
    def backward_action(self):
        """Run ▸ Compute gradients."""
        return self.menus.backward

    def _connect(self) -> None:
        r, c = self.router, self.control
        r.add_flush(self.tree.flush)
        r.add_flush(self._update_frames_label)
        r.modelLoaded.connect(self._model_loaded)
        r.runStarted.connect(self._run_started)
        r.runFinished.connect(self._run_finished)
        r.errorFrame.connect(self._error_frame)
        r.progress.connect(self.run_progress.update)
        self.run_progress.follow(c)  # each run, with the unedited run before it
        r.listenerFailed.connect(self.reporter.report)
        self.images.imageSelected.connect(self.runs.show)
        self.images.imageSelected.connect(lambda _entry: self.reporter.resolved())
        self.images.failed.connect(self.reporter.report)
        self.images.noted.connect(self._image_noted)
        self.images.stretchChanged.connect(lambda on: self.run_settings.update(stretch=on))
        # Detection and segmentation models: boxes and masks on the image, a box clicked
        # makes it the target (core.tasks).
        self.images.detectionChosen.connect(self._target_chosen)
        self.router.store.subscribe(self._predictions_stored, ("predictions",))
        self.tree.moduleSelected.connect(self._module_selected)
        self.tree.camLayerRequested.connect(self._cam_layer_requested)
        self.tree.model.captureChanged.connect(self._capture_changed)

    def build_views(self) -> None:
        """Create the data views (this imports pyqtgraph: after the window is on screen)."""
        make_views(self.docks, self.views, self.router.store, self.reporter)
        if "activation" in self.views:
            self.edit_actions.attach_mosaic(self.views["activation"])
        if "predictions" in self.views:
            self.views["predictions"].targetChosen.connect(self._target_chosen)
        if "cam" in self.views:
            cam = self.views["cam"]
            cam.set_method(self.run_settings.value.cam_method)
            cam.methodChanged.connect(
                lambda m: self.run_settings.update(cam_method=m, cam_layer=cam.layer))
            cam.layerChanged.connect(lambda layer: self.run_settings.update(cam_layer=layer))
            cam.optionsChanged.connect(
                lambda: self.run_settings.update(attribution_options=cam.occlusion.options()))
            self.run_settings.update(quiet=True, attribution_options=cam.occlusion.options())
        self.compare.views_ready()  # the divergence plot selects modules in the tree
        self.attention.views_ready()
        if self.save_actions is None:  # once, also when build_views is called again
            install_view_addons(self)
        module = self.tree.current_module()
        if module is not None:
            self._module_selected(module)

    # -- starting --------------------------------------------------------------------------
    def start(self, images=(), model: dict | None = None, session=None, edits=()) -> None:
        """List `images`, start the engine (or use `session`) and load `model` (ModelSpec
        fields as a dict; the demo model when None); `edits` (specs as `analyse --edit`
        reads them) go into the Edits dock once the model is loaded."""
        self._startup_edits = tuple(edits)
        if images:
            self.images.add_paths(list(images))
        self._gc_collector.start()  # before any thread of the engine allocates
        self.model_loads.start(model, session)

    # -- model -------------------------------------------------------------------------------
    def _model_loaded(self, frame: ModelLoaded) -> None:
        self._model_generation += 1
        self.control.model_changed()
        self.runs.model_changed(frame.tree, frame.cam_layer)
        self.model_name = frame.name
        self.overlay.hide()
        self.status.busy.hide()
        # Notes (random weights, statistics on a slower path, edits dropped, an image listed
        # before the model and decoded reduced) stay longer.
        method_note = self.run_settings.fit_model(getattr(frame, "attention", ""))
        notes = [*frame.notes, self.window_edits.keep_for(frame.tree), method_note,
                 self._early_note]
        self._early_note = ""
        notes = [n for n in notes if n]
        message = " ".join([f"Loaded {frame.description}.", *notes])
        self.reporter.info(message, timeout_ms=20000 if notes else 6000)
        self.tree.set_tree(frame.tree, frame.name)
        # The new model's modules (the run at the end of this load applies them).
        self.run_settings.update(quiet=True, capture=self.tree.model.capture_modules())
        self.status.show_model(frame)
        menus.check_device(self.menus, self.control.model_spec_device())
        if self.control.model_spec is not None:
            self.recent.model_loaded(self.control.model_spec)
        self.setWindowTitle(f"{frame.name} — Network Inspector")
        self._set_cam_layers(frame.tree, quiet=True)
        selected = self.settings.value(f"module/{frame.name}", "")
        if not (selected and self.tree.select_module(selected)):
            self.tree.select_module(capture_choice.default_module(frame.tree))
        specs, self._startup_edits = self._startup_edits, ()
        self.window_edits.add_startup(specs)
        self.expensive.model_loaded(frame.tree, self.run_settings.value.cam_layer)
        self.runs.rerun()

    def _set_cam_layers(self, tree, choose: str | None = None, quiet: bool = False) -> None:
        """The CAM view's layers: every one a CAM can read (token and channels-last layers
        too, core.explain.cam.cam_layers), the model's default CAM layer (found on the worker,
        sent in ModelLoaded) selected, or `choose`: the selection is the layer the map is
        computed at (the run settings' cam_layer; `quiet`: the caller runs itself)."""
        cam = self.views.get("cam")
        if cam is None or tree is None:
            return
        from inspector.core.explain.cam.layer import cam_layers

        layers = cam_layers(tree)
        for wanted in (self.runs.default_cam_layer, choose):
            if wanted is not None and wanted not in layers:
                layers.append(wanted)
        cam.set_layers(layers, choose or self.runs.default_cam_layer)
        self.run_settings.update(quiet=quiet, cam_layer=cam.layer)

    # -- runs ----------------------------------------------------------------------------------
    def _image_noted(self, note: str) -> None:
        """A listed image was decoded reduced: said at once, and again with the model's
        "Loaded" line when it came before the model (that line would replace it unread)."""
        if not self.model_name:
            self._early_note = note
        self.reporter.info(note, 20000)

    def _module_selected(self, name: str) -> None:
        for key in ("activation", "gradient"):
            if key in self.views:
                self.views[key].set_module(name)
        if self.model_name:
            self.settings.set_value(f"module/{self.model_name}", name)
        self.run_settings.update(selected=name)  # run again when its previews are missing

    def _cam_layer_requested(self, name: str) -> None:
        self._set_cam_layers(self.tree.model.tree, choose=name)

    def _capture_changed(self) -> None:
        self.run_settings.update(capture=self.tree.model.capture_modules())

    def _target_chosen(self, target) -> None:
        self.run_settings.update(target=target)

    def _run_settings_changed(self, names, _quiet) -> None:
        """What the window shows of a setting, and what it remembers, follows it."""
        value = self.run_settings.value
        if names & {"gradients", "cam_method"}:
            self.run_settings.save(self.settings)
        cam = self.views.get("cam")
        if "cam_method" in names and cam is not None and cam.method != value.cam_method:
            cam.set_method(value.cam_method)

    def _predictions_stored(self, frame) -> None:
        if self.control.shows(frame.run_id):
            self.images.set_prediction(frame)

    def _run_started(self, frame: RunStarted) -> None:
        if not self.control.shows(frame.run_id):
            # The unedited run that runs before the edited one: its pass's progress.
            self.run_progress.started(frame.run_id, frame.label)
            return
        self.images.set_model_input(frame.display)
        self.status.show_running(frame.label)
        self.run_progress.started(frame.run_id, frame.label)

    def _run_finished(self, frame: RunFinished) -> None:
        if not self.control.shows(frame.run_id):
            return
        self.run_progress.end(frame.run_id)
        self.last_run = frame
        self.status.show_run(frame)
        self._update_frames_label()
        self.expensive.run_finished(frame)
        if frame.status == "ok":
            self.reporter.resolved()  # an earlier failure is no longer what is going on
            self._gc_freezer.after_run(self._model_generation)

    def _error_frame(self, frame) -> None:
        # A model-load failure (no run id) is something the user is waiting on: open the
        # details at once. Run failures stay in the status bar (stepping through a folder of
        # broken files must not pile up dialogs).
        message = frame.message
        if frame.run_id is not None and frame.run_id == self.control.baseline_run:
            message = f"The unedited run (before the edits) failed: {message}"
        self.reporter.report(message, frame.details, popup=frame.run_id is None)

    def _update_frames_label(self) -> None:
        self.status.show_frames(self.router.frames_shown, self.router.frames_dropped)

    # -- window ----------------------------------------------------------------------------------
    def reset_layout(self) -> None:
        reset_layout(self, self.docks, self._default_state)
        self.window_edits.size_dock()

    def reset_settings(self) -> None:
        """Help ▸ Reset settings (asks first)."""
        self.saved.ask_and_reset()

    def show_crash_notice(self, reports) -> None:
        """Say, without blocking, that an earlier run of the app crashed (`reports`: the
        newest last, from inspector.crashlog.previous_crashes)."""
        if not reports:
            return
        from inspector.ui.window.crash_notice import CrashNotice

        notice = CrashNotice(reports[-1], self)
        notice.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        notice.show()
        self.reporter.info(f"Network Inspector crashed last time: see {reports[-1].path}", 0)

    def show_about(self) -> None:
        from inspector.ui.window.about_dialog import AboutDialog

        device = self.status.device.text().removeprefix("device ") if self.model_name else None
        dialog = AboutDialog(self, device=device, settings=self.settings)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            if not self._restored:
                default_sizes(self, self.docks)
                self.window_edits.size_dock()
            self.overlay.place()
            tidy_tab_bars_later(self)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.overlay.place()

    def closeEvent(self, event) -> None:  # noqa: N802
        if not self._closing:
            self._closing = True
            self.saved.save()
            self.hide()  # gone at once for the user, even if a model load takes a while to stop
            self.shutdown()
            self.closed.emit()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop every timer and thread this window started (also used by tests)."""
        if self._shut_down:
            return
        self._shut_down = True
        self.runs.stop()
        self.video.stop()
        self.control.close()
        self.run_progress.stop()
        self._gc_collector.stop()
        self.images.stop()
        self.reporter.stop()
        for view in self.views.values():
            view.stop()
