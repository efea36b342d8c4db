"""File ▸ New atlas…: `network-inspector atlas` from the window, for the model loaded.

The dialog holds the command's options (the folders, images and videos to rank; the layers;
--top, --every, the output folder, the device, --batch-size, --workers, --shard-size and
--resume) and runs them with an AtlasRunner (runner.py: run_atlas on a thread of its
own). It shows the progress; Cancel stops the run at the next batch and leaves the dialog
open, ready for the next run (with "Resume" ticked, that run continues from the finished
shards). What went wrong is the command's own sentence, under the progress bar and in the
window's status bar. A finished atlas is opened in the Dataset dock (`opened(folder)`).

It starts with the images the window has loaded. Without an output folder the user chose
(remembered by Run, AppSettings "atlas/out"), the atlas goes to a folder per model and
layers under the user's data folder (ui.shell.data_folder), following the layers typed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.atlas.runner import STAGES, AtlasRequest, AtlasResult, AtlasRunner
from inspector.ui.shell.data_folder import output_folder

INPUT_FILTER = ("Images and videos (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp *.mp4 "
                "*.mkv *.mov *.avi *.webm);;All files (*)")


def _spin(low: int, high: int, value: int, tip: str) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setValue(value)
    spin.setToolTip(tip)
    return spin


class AtlasDialog(QDialog):
    """The atlas command's options, its progress, Run and Cancel."""

    opened = Signal(object)  # Path: the folder of a finished atlas, to open in the dock

    def __init__(self, parent: QWidget | None, runner: AtlasRunner, model_label: str,
                 spec, seed: int | None, devices: list[str], layers: str = "",
                 start_dir: str = "", inputs=(), settings=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("New atlas")
        self.runner, self.spec, self.seed = runner, spec, seed
        self._start_dir = start_dir
        self.settings = settings  # ui.shell.app_settings.AppSettings, or None (remember nothing)
        self._model_name = spec.factory or spec.name or model_label
        form = self._options_form(model_label, layers, devices)
        self.add_inputs(inputs)
        self._default_out = str(self.default_out())
        chosen = settings.value("atlas/out", "") if settings is not None else ""
        self.out.setText(chosen or self._default_out)
        self.layers.textChanged.connect(self._follow_default_out)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox()
        self.run_button = self.buttons.addButton("Run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.run)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        runner.progress.connect(self._progress)
        runner.finished.connect(self._finished)
        self._set_running(runner.running)

    # -- the options ---------------------------------------------------------------------------
    def _options_form(self, model_label: str, layers: str, devices: list[str]) -> QFormLayout:
        """The command's options, one row each (the widgets are kept: request reads them)."""
        self.inputs = QListWidget()
        self.inputs.setToolTip("Folders (searched recursively for images), image files and "
                               "videos, as `network-inspector atlas` takes them")
        self.inputs.setMaximumHeight(90)
        add_folder = QPushButton("Add folder…")
        add_folder.clicked.connect(self._add_folder)
        add_files = QPushButton("Add files…")
        add_files.clicked.connect(self._add_files)
        remove = QPushButton("Remove")
        remove.clicked.connect(lambda: [self.inputs.takeItem(self.inputs.row(i))
                                        for i in self.inputs.selectedItems()])
        input_buttons = QHBoxLayout()
        for button in (add_folder, add_files, remove):
            input_buttons.addWidget(button)
        input_buttons.addStretch(1)
        self.layers = QLineEdit(layers)
        self.layers.setPlaceholderText("features.3, layer4")
        self.layers.setToolTip("--layers: comma-separated modules whose channels to rank, "
                               "named as in the module tree")
        self.top = _spin(1, 1000, 9, "--top: images kept per channel")
        self.every = _spin(1, 1_000_000, 1, "--every: of a video, rank every Nth frame, "
                                            "counting from frame 0 (1: every frame)")
        self.out = QLineEdit()
        self.out.setPlaceholderText("the folder the atlas is written to (created)")
        self.out.setToolTip("--out: atlas.json, crops/ and the resumable shards go here (by "
                            "default a folder per model and layers under the user's data "
                            "folder)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_out)
        out_row = QHBoxLayout()
        out_row.addWidget(self.out, 1)
        out_row.addWidget(browse)
        self.device = QComboBox()
        self.device.addItems(devices)
        self.device.setToolTip("--device: where the atlas's own copy of the model runs")
        self.batch_size = _spin(1, 4096, 32, "--batch-size: images per forward")
        self.workers = _spin(0, 64, 0, "--workers: processes decoding images (0: on the "
                                       "atlas's own thread)")
        self.shard_size = _spin(1, 1_000_000, 256, "--shard-size: images per shard, the unit "
                                                   "that Resume does not redo")
        self.resume = QCheckBox("Resume: continue a cancelled or killed run in this folder")
        self.resume.setToolTip("--resume: finished shards are not redone")
        model = QLabel(model_label)
        model.setToolTip("The atlas is made with the model loaded in the window (its own copy "
                         "of it, on its own thread)")
        form = QFormLayout()
        form.addRow("Model", model)
        form.addRow("Images", self.inputs)
        form.addRow("", input_buttons)
        form.addRow("Layers", self.layers)
        form.addRow("Top images", self.top)
        form.addRow("Video frames: every", self.every)
        form.addRow("Output folder", out_row)
        form.addRow("Device", self.device)
        form.addRow("Batch size", self.batch_size)
        form.addRow("Workers", self.workers)
        form.addRow("Shard size", self.shard_size)
        form.addRow("", self.resume)
        return form

    def default_out(self) -> Path:
        """The output folder when none was chosen: one per model and layers."""
        return output_folder("atlases", self._model_name, self.layers.text().strip())

    def _follow_default_out(self, *_args) -> None:
        """While the output folder is the default one, it follows the layers."""
        if self.out.text().strip() == self._default_out:
            self.out.setText(str(self.default_out()))
        self._default_out = str(self.default_out())

    def _remember_choices(self) -> None:
        if self.settings is None:
            return
        out = self.out.text().strip()
        self.settings.set_value("atlas/out", "" if out == self._default_out else out)

    def add_inputs(self, paths) -> None:
        for path in paths:
            self.inputs.addItem(str(path))

    def input_paths(self) -> list[str]:
        return [self.inputs.item(i).text() for i in range(self.inputs.count())]

    def request(self) -> AtlasRequest | str:
        """The options as the runner takes them, or the sentence that says what is missing."""
        layers = tuple(n.strip() for n in self.layers.text().split(",") if n.strip())
        out = self.out.text().strip()
        if not self.input_paths():
            return "Add a folder, images or videos to rank."
        if not layers:
            return "Name at least one layer (select it in the module tree, or type its name)."
        if not out:
            return "Choose the output folder."
        spec = dataclasses.replace(self.spec, device=self.device.currentText() or None)
        return AtlasRequest(spec=spec, inputs=tuple(self.input_paths()), layers=layers,
                            out=Path(out).expanduser(), top=self.top.value(),
                            every=self.every.value(), batch_size=self.batch_size.value(),
                            workers=self.workers.value(), shard_size=self.shard_size.value(),
                            resume=self.resume.isChecked(), seed=self.seed)

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "A folder of images", self._start_dir)
        if folder:
            self.add_inputs([folder])
            self._start_dir = folder
            if self.settings is not None:
                self.settings.set_value("atlas/input_dir", folder)

    def _add_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Images or videos", self._start_dir,
                                                INPUT_FILTER)
        self.add_inputs(files)

    def _browse_out(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The atlas's folder", self._start_dir)
        if folder:
            self.out.setText(folder)

    # -- running -------------------------------------------------------------------------------
    def run(self) -> None:
        if self.runner.running:
            return
        request = self.request()
        if isinstance(request, str):
            self.status.setText(request)
            return
        self._remember_choices()
        if self.runner.start(request):
            self.progress.setRange(0, 0)  # busy until the first figures (the model loads)
            self.status.setText("Loading the model…")
            self._set_running(True)

    def reject(self) -> None:
        """Cancel: stops a run going on (the dialog stays for the next), else closes."""
        if self.runner.running:
            self.runner.cancel()
            self.status.setText("Cancelling after the batch running…")
            self.cancel_button.setEnabled(False)
            return
        super().reject()

    def _progress(self, stage: str, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, total))
        self.status.setText(f"{STAGES.get(stage, stage)}: {done:,} of {total:,} images")

    def _finished(self, result: AtlasResult) -> None:
        self._set_running(False)
        if result.status != "cancelled":  # a cancel leaves the bar where the run stopped
            self.progress.setRange(0, 1)
        if result.status == "ok":
            self.progress.setValue(1)
            self.status.setText(result.message if result.code else "Done.")
            self.opened.emit(result.out)
            if result.code == 0:
                self.accept()
            return
        if result.status == "failed":
            self.progress.setValue(0)
        self.status.setText(_sentence(result.message or "the atlas failed"))

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(True)
        self.cancel_button.setText("Cancel run" if running else "Close")
        for widget in (self.inputs, self.layers, self.top, self.every, self.out, self.device,
                       self.batch_size, self.workers, self.shard_size, self.resume):
            widget.setEnabled(not running)


def _sentence(message: str) -> str:
    message = message.strip()
    return (message[:1].upper() + message[1:]) if message else message
