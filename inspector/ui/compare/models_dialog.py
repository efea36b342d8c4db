"""File ▸ Compare with model…: `network-inspector compare-models` from the window, model A
being the one loaded.

The dialog holds model B (a catalog name or a model file's function, and its weights file;
both empty: A with other weights is not asked for, so B is A itself), the images (the strip's,
or a folder), the estimator, the batch size and the output folder; and it says, before B
loads, what the comparison costs in memory (batch.compare_models.memory) and whether it fits. Run
starts the ModelPairRunner; its progress shows here, Cancel stops it after the forward
running. A finished comparison is shown in the Model comparison pane (`finished(folder)`).

Run remembers model B, its weights, the folder of images, the atlases and an output folder
the user chose (AppSettings, "compare/..."): the next dialog starts from them. Without a
chosen one, the output folder is one per pair of models under the user's data folder
(ui.shell.data_folder), following model B as it is changed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.compare.models_runner import CompareRequest, CompareResult, ModelPairRunner
from inspector.ui.shell.data_folder import output_folder

AUTO = "automatic (exact up to 4 blocks)"
WEIGHTS_FILTER = "Weights (*.pt *.pth *.safetensors *.bin);;All files (*)"
# The choices Run remembers (AppSettings keys under "last/"), and the line edits holding them.
REMEMBERED = {"compare/weights_b": "weights_b", "compare/folder": "folder",
              "compare/atlas_a": "atlas_a", "compare/atlas_b": "atlas_b"}


class CompareModelsDialog(QDialog):
    finished_folder = Signal(object)  # Path of a finished comparison's folder

    def __init__(self, parent: QWidget | None, runner: ModelPairRunner, spec_a,
                 model_a: str, weights_a_bytes: int, tree, strip: list[str],
                 catalog: list[str] | None = None, settings=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare with model")
        self.runner, self.spec_a, self.tree = runner, spec_a, tree
        self.weights_a_bytes, self.strip = weights_a_bytes, list(strip)
        self.settings = settings  # ui.shell.app_settings.AppSettings, or None (remember nothing)
        form = self._options_form(spec_a, model_a, catalog)
        self._restore_choices()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox()
        self.run_button = self.buttons.addButton("Run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.run)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.memory)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        runner.progress.connect(self._progress)
        runner.compared.connect(self._finished)
        self.update_memory()
        self._set_running(runner.running)

    def _options_form(self, spec_a, model_a: str, catalog) -> QFormLayout:
        """The options, one row each (the widgets are kept: request reads them)."""
        self.a_text = spec_a.factory or spec_a.name or model_a  # how A was asked for
        self.model_b = QComboBox()
        self.model_b.setEditable(True)
        self.model_b.addItems(list(dict.fromkeys([self.a_text, *(catalog or [])])))
        self.model_b.setCurrentText(self.a_text)
        self.model_b.setToolTip("--model-b: a catalog name or path/to/file.py:function "
                                "(default: A's architecture)")
        self.weights_b = QLineEdit()
        self.weights_b.setPlaceholderText("a state_dict (.pt) or .safetensors for model B")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_weights)
        weights_row = QHBoxLayout()
        weights_row.addWidget(self.weights_b, 1)
        weights_row.addWidget(browse)
        self.use_strip = QRadioButton(f"The {len(self.strip)} images in the strip")
        self.use_folder = QRadioButton("A folder:")
        group = QButtonGroup(self)
        group.addButton(self.use_strip)
        group.addButton(self.use_folder)
        (self.use_strip if len(self.strip) >= 4 else self.use_folder).setChecked(True)
        self.use_strip.setEnabled(bool(self.strip))
        self.folder = QLineEdit()
        folder_button = QPushButton("Browse…")
        folder_button.clicked.connect(self._browse_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.use_folder)
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(folder_button)
        self.estimator = QComboBox()
        self.estimator.addItems([AUTO, "exact", "minibatch"])
        self.estimator.setToolTip(
            "exact: the biased CKA over all images (inflated for few images); minibatch: "
            "Nguyen et al. 2021's unbiased estimator over minibatches of a seeded random order")
        self.batch_size = QSpinBox()
        self.batch_size.setRange(4, 4096)
        self.batch_size.setValue(32)
        self.batch_size.setToolTip("--batch-size: images per forward, the minibatch size")
        self.out = QLineEdit(str(self.default_out()))
        self.out.setToolTip("--out: cka.json, cka.png and the resumable shards go here "
                            "(by default a folder per pair of models under the user's data "
                            "folder)")
        self.model_b.currentTextChanged.connect(self._follow_default_out)
        self.weights_b.textChanged.connect(self._follow_default_out)
        self._default_out = self.out.text()
        self.memory = QLabel("")
        self.memory.setWordWrap(True)
        for widget in (self.model_b, self.weights_b, self.batch_size):
            signal = getattr(widget, "currentTextChanged", None) or getattr(
                widget, "textChanged", None) or widget.valueChanged
            signal.connect(self.update_memory)
        form = QFormLayout()
        form.addRow("Model A", QLabel(f"{model_a} (the model loaded; its own copy runs)"))
        form.addRow("Model B", self.model_b)
        form.addRow("Weights B", weights_row)
        form.addRow("Images", self.use_strip)
        form.addRow("", folder_row)
        form.addRow("Estimator", self.estimator)
        form.addRow("Batch size", self.batch_size)
        form.addRow("Output folder", self.out)
        form.addRow("Atlases", self._atlas_row())
        return form

    def _atlas_row(self) -> QHBoxLayout:
        """Optional atlas folders of A and B: a clicked cell's channels get their crops."""
        self.atlas_a, self.atlas_b = QLineEdit(), QLineEdit()
        row = QHBoxLayout()
        for side, edit in (("A", self.atlas_a), ("B", self.atlas_b)):
            edit.setPlaceholderText(f"an atlas folder of model {side} (optional)")
            edit.setToolTip(f"--atlas-{side.lower()}: a folder written by File \u25b8 New "
                            f"atlas\u2026 or `network-inspector atlas` for model {side}; the "
                            f"matched channels then show their top crops from it")
            row.addWidget(edit, 1)
        return row

    # -- the remembered choices ---------------------------------------------------------------------
    def default_out(self) -> Path:
        """The output folder when none was chosen: one per pair of models, in the data folder."""
        b = self.model_b.currentText().strip() or self.a_text
        weights = self.weights_b.text().strip()
        return output_folder("comparisons", self.a_text, b, Path(weights).stem if weights else "")

    def _follow_default_out(self, *_args) -> None:
        """While the output folder is the default one, it follows model B."""
        if self.out.text().strip() == self._default_out:
            self.out.setText(str(self.default_out()))
        self._default_out = str(self.default_out())

    def _restore_choices(self) -> None:
        if self.settings is None:
            return
        model_b = self.settings.value("compare/model_b", "")
        if model_b:
            self.model_b.setCurrentText(model_b)
        for key, name in REMEMBERED.items():
            text = self.settings.value(key, "")
            if text:
                getattr(self, name).setText(text)
        if self.settings.value("compare/use_folder", False) and self.folder.text():
            self.use_folder.setChecked(True)
        self._follow_default_out()
        out = self.settings.value("compare/out", "")
        if out:
            self.out.setText(out)

    def _remember_choices(self) -> None:
        if self.settings is None:
            return
        self.settings.set_value("compare/model_b", self.model_b.currentText().strip())
        for key, name in REMEMBERED.items():
            self.settings.set_value(key, getattr(self, name).text().strip())
        self.settings.set_value("compare/use_folder", self.use_folder.isChecked())
        out = self.out.text().strip()
        # The default follows the models; only a folder the user chose is kept as it is.
        self.settings.set_value("compare/out", "" if out == str(self.default_out()) else out)

    # -- the options ------------------------------------------------------------------------------
    def spec_b(self):
        """Model B's ModelSpec; None when B is A itself (same name, no weights)."""
        name = self.model_b.currentText().strip() or self.a_text
        weights = self.weights_b.text().strip() or None
        if name == self.a_text:  # A's architecture: B is A, or A with other weights
            if weights is None:
                return None
            return dataclasses.replace(self.spec_a, checkpoint=weights, pickle=None,
                                       trust_pickle=False)
        factory = name if ".py:" in name else None
        return dataclasses.replace(self.spec_a, name=None if factory else name,
                                   factory=factory, checkpoint=weights, pickle=None,
                                   trust_pickle=False)

    def update_memory(self, *_args) -> None:
        from inspector.batch.compare_models.memory import (
            MemoryCost,
            available_bytes,
            batch_bytes,
            output_sizes,
            spec_output_sizes,
            spec_weights_bytes,
        )

        spec_b = self.spec_b()
        b = self.weights_a_bytes if spec_b is None else spec_weights_bytes(spec_b)
        batch = self.batch_size.value()
        layers = sum(1 for info in self.tree.modules.values() if info.is_leaf) if self.tree else 0
        sizes_a = output_sizes(self.tree) if self.tree else []
        sizes_b, layers_b, known = sizes_a, layers, True  # B: A's architecture
        if spec_b is None:
            sizes_b, layers_b = [], 0  # B is A: one forward, the same Gram matrices
        elif (spec_b.name, spec_b.factory) != (self.spec_a.name, self.spec_a.factory):
            probed = spec_output_sizes(spec_b)
            known = probed is not None
            sizes_b, layers_b = (probed, len(probed)) if known else ([], 0)
        cost = MemoryCost(self.weights_a_bytes, 0 if spec_b is None else b,
                          batch_bytes(batch, sizes_a, layers, sizes_b, layers_b),
                          available_bytes(), batch_b_known=known)
        name = "model A again" if spec_b is None else (spec_b.factory or spec_b.name)
        self.memory.setText(cost.describe(name, batch))
        self.cost = cost

    def inputs(self) -> list[str]:
        if self.use_strip.isChecked():
            return list(self.strip)
        folder = self.folder.text().strip()
        return [folder] if folder else []

    def request(self) -> CompareRequest | str:
        inputs = self.inputs()
        if not inputs:
            return "Choose a folder of images (or list images in the strip)."
        out = self.out.text().strip()
        if not out:
            return "Choose the output folder."
        spec_b = self.spec_b()
        if spec_b is not None and spec_b.seed is None:
            spec_b = dataclasses.replace(spec_b, seed=self.spec_a.seed)  # as --seed does
        estimator = None if self.estimator.currentText() == AUTO else self.estimator.currentText()
        atlases = [Path(e.text().strip()).expanduser() if e.text().strip() else None
                   for e in (self.atlas_a, self.atlas_b)]
        return CompareRequest(self.spec_a, spec_b, tuple(inputs), Path(out).expanduser(),
                              estimator, self.batch_size.value(), atlas_a=atlases[0],
                              atlas_b=atlases[1])

    def _browse_weights(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Weights of model B", "", WEIGHTS_FILTER)
        if path:
            self.weights_b.setText(path)

    def _browse_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "A folder of images")
        if folder:
            self.folder.setText(folder)
            self.use_folder.setChecked(True)

    # -- running ----------------------------------------------------------------------------------
    def run(self) -> None:
        if self.runner.running:
            return
        request = self.request()
        if isinstance(request, str):
            self.status.setText(request)
            return
        self._remember_choices()
        if self.runner.compare(request):
            self.progress.setRange(0, 0)  # busy while the models load
            self.status.setText("Loading the models…" if not self.runner.loaded else
                                "Running both models…")
            self._set_running(True)

    def reject(self) -> None:
        if self.runner.running:
            self.runner.cancel()
            self.status.setText("Cancelling after the forward running…")
            self.cancel_button.setEnabled(False)
            return
        super().reject()

    def _progress(self, stage: str, done: int, total: int) -> None:
        if stage != "compare":
            return
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, total))
        self.status.setText(f"{done:,} of {total:,} image forwards")

    def _finished(self, result: CompareResult) -> None:
        self._set_running(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if result.status == "ok" else 0)
        if result.status == "ok":
            self.finished_folder.emit(result.out)
            self.accept()
            return
        message = result.message or "the comparison failed"
        self.status.setText(message[:1].upper() + message[1:])

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(True)
        self.cancel_button.setText("Cancel run" if running else "Close")
        for widget in (self.model_b, self.weights_b, self.use_strip, self.use_folder,
                       self.folder, self.estimator, self.batch_size, self.out):
            widget.setEnabled(not running)
        self.use_strip.setEnabled(not running and bool(self.strip))
