"""The main window's menu bar: its actions, their shortcuts, and the Device menu.

The actions only call the window's public slots (and its parts'); what they do lives there.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from inspector.ui.run.settings import gradients_action

SHORTCUTS_HTML = """<table cellpadding=3>
<tr><td><b>Ctrl+O</b></td><td>Open images</td></tr>
<tr><td><b>Ctrl+Shift+O</b></td><td>Open a model</td></tr>
<tr><td><b>Ctrl+V</b></td><td>Paste an image</td></tr>
<tr><td><b>Ctrl+Z / Ctrl+Shift+Z</b></td><td>Undo / redo an edit</td></tr>
<tr><td><b>Shift+drag</b></td><td>Occlude a region (on the original or the model input)</td></tr>
<tr><td><b>← / →</b></td><td>Previous / next image</td></tr>
<tr><td><b>Ctrl+I</b></td><td>Original image / model input</td></tr>
<tr><td><b>F5</b></td><td>Run again</td></tr>
<tr><td><b>Esc</b></td><td>Cancel the run</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table><p>Drop images or folders anywhere on the window.</p>"""


@dataclass
class Menus:
    """The actions and menus other parts of the window read or change."""

    open_model: QAction
    rerun: QAction
    backward: QAction  # "Compute gradients", checkable
    undo: QAction  # Edit ▸ Undo (the edits' undo stack)
    redo: QAction
    copy_python: QAction  # Edit ▸ Copy as Python
    recent_images: QMenu
    recent_models: QMenu
    device: QMenu
    device_group: QActionGroup
    camera: QAction | None = None  # File ▸ Camera: enabled where Qt Multimedia finds one


def add_action(window: QMainWindow, menu, text: str, slot, shortcut=None, tip: str = ""):
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def build_menus(window) -> Menus:
    """File, Edit, Run, Device, View and Help for `window` (a MainWindow)."""
    bar = window.menuBar()
    file = bar.addMenu("&File")
    add_action(window, file, "Open &images…", window.sources.open_images,
               QKeySequence.StandardKey.Open)
    add_action(window, file, "Open &folder…", window.sources.open_folder)
    open_model = add_action(window, file, "Open &model…", window.model_loads.open_dialog,
                            "Ctrl+Shift+O")
    open_model.setEnabled(False)
    add_action(window, file, "&Paste image", window.sources.paste,
               QKeySequence.StandardKey.Paste)
    # The video player exists once the menus do: looked up when the action fires.
    camera = add_action(window, file, "&Camera", lambda: window.video.open_camera())
    file.setToolTipsVisible(True)  # a disabled Camera says why in its tooltip
    file.aboutToShow.connect(lambda: update_camera_action(camera))
    update_camera_action(camera, probe=False)
    file.addSeparator()
    recent_images = file.addMenu("Recent images")
    recent_models = file.addMenu("Recent models")
    file.addSeparator()
    add_action(window, file, "&Quit", window.close, QKeySequence.StandardKey.Quit)

    edit = bar.addMenu("&Edit")
    undo, redo = window.history.undo_redo_actions(window)
    edit.addAction(undo)
    edit.addAction(redo)
    edit.addAction(window.window_edits.clear_action)
    edit.addSeparator()
    edit.addAction(window.images.occlude_action)
    edit.addSeparator()
    copy_python = add_action(
        window, edit, "Copy as &Python", window.edit_actions.copy_as_python,
        tip="Copy a standalone script that reproduces the current run with its hooks and edits")

    run = bar.addMenu("&Run")
    rerun = add_action(window, run, "&Run again", window.runs.rerun, "F5")
    add_action(window, run, "&Cancel run", window.runs.cancel, "Esc")
    run.addSeparator()
    images = window.images
    add_action(window, run, "&Previous image", lambda: images.step(-1), Qt.Key.Key_Left)
    add_action(window, run, "&Next image", lambda: images.step(1), Qt.Key.Key_Right)
    add_action(window, run, "Show original / model &input", images.toggle_mode, "Ctrl+I")
    run.addSeparator()
    backward_action = gradients_action(window.run_settings, window)
    run.addAction(backward_action)

    device = bar.addMenu("&Device")
    device.addAction("(starting…)").setEnabled(False)

    view = bar.addMenu("&View")
    for dock in window.docks.values():
        view.addAction(dock.toggleViewAction())
    view.addSeparator()
    add_action(window, view, "Reset layout", window.reset_layout)

    help_menu = bar.addMenu("&Help")
    add_action(window, help_menu, "Keyboard shortcuts",
               lambda: QMessageBox.information(window, "Keyboard shortcuts", SHORTCUTS_HTML),
               "F1")
    help_menu.addSeparator()
    add_action(window, help_menu, "Reset settings…", window.reset_settings,
               tip="Forget the saved layout, recent files and choices")
    help_menu.addSeparator()
    add_action(window, help_menu, "About", window.show_about)
    return Menus(open_model, rerun, backward_action, undo, redo, copy_python, recent_images,
                 recent_models, device, QActionGroup(window), camera)


def update_camera_action(action: QAction, probe: bool = True) -> None:
    """File ▸ Camera on where Qt Multimedia finds a camera; off, with the reason (no camera,
    or Qt Multimedia not installed: what to install) as its tooltip. Asked when the File menu
    opens (`probe`), not at start: listing cameras can take a moment."""
    from inspector.ui.video.camera import camera_status

    ok, note = camera_status() if probe else (False, "")
    action.setEnabled(ok)
    tip = f"Stream {note} through the model" if ok else note
    action.setToolTip(tip)
    action.setStatusTip(tip)


def fill_device_menu(menus: Menus, devices: list[str], chosen) -> None:
    """"Automatic" and each device; `chosen(device or None)` when one is picked."""
    menus.device.clear()
    for action in menus.device_group.actions():
        menus.device_group.removeAction(action)
    for label, device in [("Automatic", None)] + [(d, d) for d in devices]:
        action = menus.device.addAction(label)
        action.setCheckable(True)
        action.setData(device)
        menus.device_group.addAction(action)
        action.triggered.connect(lambda _=False, d=device: chosen(d))


def check_device(menus: Menus, device: str | None) -> None:
    for action in menus.device_group.actions():
        action.setChecked(action.data() == device)
