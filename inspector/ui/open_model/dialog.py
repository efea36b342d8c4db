"""The Open Model dialog: what to load and on which device.

Six ways in, one tab each: a model from the catalog (the bundled demo and torchvision's
classifiers, searchable, each marked with whether pretrained weights are on this machine),
a checkpoint (state_dict or safetensors) for a chosen architecture, a Python file with a
factory function, a whole pickled model, which needs the user's explicit trust because
unpickling runs code, a timm model and a Hugging Face folder (ui.open_model.hub_tabs). Random
weights take the seed below the tabs. The dialog only builds a `core.models.base.ModelSpec`;
loading happens on the worker.

This module imports core's models (and so torch) when the dialog is built: the window opens
it only once the engine is loaded.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStringListModel, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QCompleter,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inspector.ui.open_model.hub_tabs import HfTab, TimmTab
from inspector.ui.open_model.hub_tabs import PathRow as _FileRow

CATALOG, CHECKPOINT, FACTORY, PICKLE, TIMM, HF = range(6)
TAB_NAMES = ["Catalog", "Checkpoint", "Python file", "Pickled model", "timm", "Hugging Face"]
NEW_SEED = -1  # the seed box's "a new seed each load"
CHECKPOINT_FILTER = "Checkpoints (*.pt *.pth *.safetensors *.bin *.ckpt);;All files (*)"
PICKLE_WARNING = (
    "<b>Loading a pickled model runs code from the file.</b> A pickle can do anything your "
    "user account can: read or delete files, install programs. Open only a file you made "
    "yourself or got from someone you trust. If the file holds only weights (a state_dict), "
    "use the Checkpoint tab instead: it never runs code."
)


def weights_note(name: str) -> str:
    """How a catalog model will run here, in plain words."""
    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import family_for
    from inspector.core.models.torchvision_models import cached_weights_path

    family = family_for(ModelSpec(name=name))
    if family is not None and not family.name.startswith("torchvision"):
        return "bundled, trained weights"
    return "pretrained weights on this machine" if cached_weights_path(name) else \
        "random weights (no pretrained file here)"


class ModelDialog(QDialog):
    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        catalog: list[str] | None = None,
        devices: list[str] | None = None,
        device: str | None = None,
        settings=None,
    ) -> None:
        super().__init__(parent)
        from inspector.core.models import load as models

        self.setWindowTitle("Open model")
        self.resize(560, 520)
        self._settings = settings
        names = catalog if catalog is not None else models.list_models()

        self.tabs = QTabWidget()
        self.tabs.addTab(self._catalog_tab(names), TAB_NAMES[CATALOG])
        self.tabs.addTab(self._checkpoint_tab(names), TAB_NAMES[CHECKPOINT])
        self.tabs.addTab(self._factory_tab(), TAB_NAMES[FACTORY])
        self.tabs.addTab(self._pickle_tab(), TAB_NAMES[PICKLE])
        self.timm = TimmTab(CHECKPOINT_FILTER, self._start_dir)
        self.timm.changed.connect(self._update_ok)
        self.timm.activated.connect(self.accept)
        self.tabs.addTab(self.timm, TAB_NAMES[TIMM])
        self.hf = HfTab(self._start_dir)
        self.hf.changed.connect(self._update_ok)
        self.tabs.addTab(self.hf, TAB_NAMES[HF])
        self.tabs.currentChanged.connect(self._update_ok)

        self.device = QComboBox()
        self.device.addItem("Automatic (GPU when there is one)", None)
        for d in devices if devices is not None else models.available_devices():
            self.device.addItem(d, d)
        if device:
            at = self.device.findData(device)
            if at >= 0:
                self.device.setCurrentIndex(at)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.seed = QSpinBox()
        self.seed.setRange(NEW_SEED, 2**31 - 1)
        self.seed.setSpecialValueText("a new seed each load")
        self.seed.setValue(NEW_SEED)
        self.seed.setToolTip("Random weights (a model without pretrained weights here) are "
                             "drawn from this seed: the same seed, the same weights")
        bottom = QFormLayout()
        bottom.addRow("Device:", self.device)
        bottom.addRow("Seed for random weights:", self.seed)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(bottom)
        layout.addWidget(self.buttons)
        if settings is not None:
            self.tabs.setCurrentIndex(settings.value("model_dialog/tab", CATALOG, minimum=0,
                                                     maximum=self.tabs.count() - 1))
        self._update_ok()

    # -- tabs ------------------------------------------------------------------------------
    def _catalog_tab(self, names: list[str]) -> QWidget:
        page = QWidget()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search models…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter_catalog)
        self.catalog = QListWidget()
        for name in names:
            note = weights_note(name)
            item = QListWidgetItem(f"{name}    —  {note}")
            item.setData(Qt.ItemDataRole.UserRole, name)
            if note.startswith("random"):
                item.setForeground(self.palette().placeholderText())
            self.catalog.addItem(item)
        self.catalog.itemSelectionChanged.connect(self._update_ok)
        self.catalog.itemDoubleClicked.connect(lambda _item: self.accept())
        self.search.returnPressed.connect(self._accept_single_match)
        layout = QVBoxLayout(page)
        layout.addWidget(self.search)
        layout.addWidget(self.catalog, 1)
        if self.catalog.count():
            self.catalog.setCurrentRow(0)
        return page

    def _checkpoint_tab(self, names: list[str]) -> QWidget:
        page = QWidget()
        self.arch = QComboBox()
        self.arch.setEditable(True)
        self.arch.addItems(names)
        completer = QCompleter(QStringListModel(names, self), self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.arch.setCompleter(completer)
        self.arch.currentTextChanged.connect(self._update_ok)
        self.checkpoint = _FileRow("Open checkpoint", CHECKPOINT_FILTER, self._start_dir)
        self.checkpoint.edit.textChanged.connect(self._update_ok)
        form = QFormLayout(page)
        form.addRow("Architecture:", self.arch)
        form.addRow("Weights file:", self.checkpoint)
        _add_note(form, "A state_dict saved with torch.save (.pt, .pth) or a .safetensors file. "
                  "It is read with weights_only=True: no code from the file runs. A "
                  "classifier, detection or segmentation model fine-tuned on its own classes "
                  "takes their number from the file. Keys that do not fit the architecture "
                  "are listed by name.")
        return page

    def _factory_tab(self) -> QWidget:
        page = QWidget()
        self.factory_file = _FileRow("Open Python file", "Python files (*.py)", self._start_dir)
        self.factory_file.edit.textChanged.connect(self._update_ok)
        self.factory_function = QLineEdit("build_model")
        self.factory_function.textChanged.connect(self._update_ok)
        form = QFormLayout(page)
        form.addRow("Python file:", self.factory_file)
        form.addRow("Function:", self.factory_function)
        _add_note(form, "The function is called with no arguments and returns an nn.Module. "
                  "The file runs as Python code, so use files you trust. A module-level "
                  "CLASSES list names the classes.")
        return page

    def _pickle_tab(self) -> QWidget:
        page = QWidget()
        warning = QLabel(PICKLE_WARNING)
        warning.setWordWrap(True)
        warning.setStyleSheet(
            "QLabel { background: #fdecea; color: #7f1d1d; border: 1px solid #e57373;"
            " border-radius: 4px; padding: 8px; }"
        )
        self.pickle_file = _FileRow("Open pickled model", CHECKPOINT_FILTER, self._start_dir)
        self.pickle_file.edit.textChanged.connect(self._update_ok)
        self.trust = QCheckBox("I trust this file and accept that opening it runs its code")
        self.trust.toggled.connect(self._update_ok)
        layout = QVBoxLayout(page)
        layout.addWidget(warning)
        form = QFormLayout()
        form.addRow("Model file:", self.pickle_file)
        layout.addLayout(form)
        layout.addWidget(self.trust)
        layout.addStretch(1)
        return page

    # -- behaviour ---------------------------------------------------------------------------
    def _start_dir(self) -> str:
        if self._settings is not None:
            return str(self._settings.value("model_dialog/dir", str(Path.home())))
        return str(Path.home())

    def _filter_catalog(self, text: str) -> None:
        needle = text.strip().lower()
        first_visible = None
        for i in range(self.catalog.count()):
            item = self.catalog.item(i)
            hidden = needle not in item.data(Qt.ItemDataRole.UserRole).lower()
            item.setHidden(hidden)
            if not hidden and first_visible is None:
                first_visible = item
        current = self.catalog.currentItem()
        if first_visible is not None and (current is None or current.isHidden()):
            self.catalog.setCurrentItem(first_visible)
        self._update_ok()

    def _accept_single_match(self) -> None:
        if self._current_catalog_name():
            self.accept()

    def _current_catalog_name(self) -> str | None:
        item = self.catalog.currentItem()
        if item is None or item.isHidden():
            return None
        return item.data(Qt.ItemDataRole.UserRole)

    def _problem(self) -> str | None:
        """Why Open is disabled, or None when the current tab is complete."""
        tab = self.tabs.currentIndex()
        if tab == CATALOG:
            return None if self._current_catalog_name() else "Choose a model"
        if tab == TIMM:
            return self.timm.problem()
        if tab == HF:
            return self.hf.problem()
        if tab == CHECKPOINT:
            if not self.arch.currentText().strip():
                return "Choose the architecture"
            return None if Path(self.checkpoint.path()).is_file() else "Choose the weights file"
        if tab == FACTORY:
            if not Path(self.factory_file.path()).is_file():
                return "Choose the Python file"
            fn = self.factory_function.text().strip()
            return None if fn.isidentifier() else "Name the factory function"
        if not Path(self.pickle_file.path()).is_file():
            return "Choose the model file"
        return None if self.trust.isChecked() else "Confirm that you trust this file"

    def _update_ok(self, *_args) -> None:
        if not hasattr(self, "buttons"):
            return  # signals from the tabs while the dialog is still being built
        problem = self._problem()
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        ok.setEnabled(problem is None)
        ok.setToolTip(problem or "")

    def accept(self) -> None:
        if self._problem() is not None:
            return
        if self._settings is not None:
            self._settings.set_value("model_dialog/tab", self.tabs.currentIndex())
            # The next Browse starts where this file (or folder) is.
            used = {CHECKPOINT: self.checkpoint, FACTORY: self.factory_file,
                    PICKLE: self.pickle_file, HF: getattr(self.hf, "folder", None),
                    TIMM: getattr(self.timm, "weights", None)}.get(self.tabs.currentIndex())
            if used is not None and used.path():
                self._settings.set_value("model_dialog/dir", str(Path(used.path()).parent))
        super().accept()

    def spec(self):
        """The core.models.base.ModelSpec for what the user chose."""
        from inspector.core.models.base import ModelSpec

        common = {"device": self.device.currentData(),
                  "seed": None if self.seed.value() == NEW_SEED else self.seed.value()}
        tab = self.tabs.currentIndex()
        if tab == CATALOG:
            return ModelSpec(name=self._current_catalog_name(), **common)
        if tab == CHECKPOINT:
            return ModelSpec(name=self.arch.currentText().strip(),
                             checkpoint=self.checkpoint.path(), **common)
        if tab == FACTORY:
            factory = f"{self.factory_file.path()}:{self.factory_function.text().strip()}"
            return ModelSpec(name=None, factory=factory, **common)
        if tab == TIMM:
            return ModelSpec(**self.timm.fields(), **common)
        if tab == HF:
            return ModelSpec(**self.hf.fields(), **common)
        return ModelSpec(name=None, pickle=self.pickle_file.path(), trust_pickle=True,
                         **common)


def spec_label(spec) -> str:
    """A short name for a ModelSpec in menus and the status bar."""
    if spec.pickle:
        return f"{Path(spec.pickle).name} (trusted pickle)"
    if spec.factory:
        file, _, fn = spec.factory.rpartition(":")
        return f"{Path(file).name}:{fn}"
    if spec.name and spec.name.startswith("hf:"):
        return f"{Path(spec.name[3:]).name} (Hugging Face)"
    if spec.checkpoint:
        return f"{spec.name} + {Path(spec.checkpoint).name}"
    return spec.name or "?"


def _add_note(form: QFormLayout, text: str) -> None:
    """A wrapped explanation under a tab's fields."""
    note = QLabel(text)
    note.setWordWrap(True)
    form.addRow(note)
