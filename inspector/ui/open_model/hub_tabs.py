"""The Open Model dialog's tabs for models from other libraries: timm and Hugging Face.

Each tab says what it needs in `problem()` (None when complete) and gives the ModelSpec
fields of the user's choice in `fields()`. Without the optional library the tab shows the
one line that installs it (core.models.base.MissingExtra's message) and Open stays disabled.
timm's list (`timm.list_models`, over a thousand names) is read when the tab is first shown,
not when the dialog opens (importing timm takes a second), and filtered as the user types.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSortFilterProxyModel, QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

REMOTE_CODE_WARNING = (
    "<b>This folder's own model code runs when it is opened.</b> A model folder whose "
    "config.json maps to code of its own (auto_map) is loaded by running the Python files "
    "inside it, which can do anything your user account can. Tick this only for a folder "
    "you made yourself or got from someone you trust."
)
WARNING_STYLE = ("QLabel { background: #fdecea; color: #7f1d1d; border: 1px solid #e57373;"
                 " border-radius: 4px; padding: 8px; }")


def _missing_label(family: str) -> QLabel | None:
    """The install line when the family's library is missing, else None."""
    from inspector.core.models.base import MissingExtra, has_module
    from inspector.core.models.load import family_named

    row = family_named(family)
    if row is None or row.module is None or has_module(row.module):
        return None
    label = QLabel(str(MissingExtra(row.module, row.extra or row.name)))
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class PathRow(QWidget):
    """A path field with a Browse button (a file, or a folder with `folder=True`)."""

    def __init__(self, caption: str, file_filter: str, start_dir: Callable[[], str],
                 folder: bool = False) -> None:
        super().__init__()
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("path/to/folder" if folder else "path/to/file")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)
        self._caption, self._filter, self._start_dir = caption, file_filter, start_dir
        self._folder = folder

    def _browse(self) -> None:
        if self._folder:
            path = QFileDialog.getExistingDirectory(self, self._caption, self._start_dir())
        else:
            path, _ = QFileDialog.getOpenFileName(self, self._caption, self._start_dir(),
                                                  self._filter)
        if path:
            self.edit.setText(path)

    def path(self) -> str:
        return self.edit.text().strip()


class TimmTab(QWidget):
    changed = Signal()
    activated = Signal()  # a double click on a name: open it

    def __init__(self, weights_filter: str, start_dir: Callable[[], str]) -> None:
        super().__init__()
        self.missing = _missing_label("timm")
        self._names: list[str] | None = None  # read on first show
        layout = QVBoxLayout(self)
        if self.missing is not None:
            layout.addWidget(self.missing)
            layout.addStretch(1)
            return
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search timm models…")
        self.search.setClearButtonEnabled(True)
        self.names = QStringListModel(self)
        self.filtered = QSortFilterProxyModel(self)
        self.filtered.setSourceModel(self.names)
        self.filtered.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.list = QListView()
        self.list.setModel(self.filtered)
        self.list.setUniformItemSizes(True)  # over a thousand rows: no per-row size hint
        self.search.textChanged.connect(self._filter)
        self.list.selectionModel().currentChanged.connect(self._current_changed)
        self.list.doubleClicked.connect(lambda _index: self.activated.emit())
        self.note = QLabel("")
        self.weights = PathRow("Open timm weights", weights_filter, start_dir)
        self.weights.edit.setPlaceholderText("optional: .safetensors or a state_dict")
        self.weights.edit.textChanged.connect(self._weights_changed)
        form = QFormLayout()
        form.addRow("Weights file:", self.weights)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.note)
        layout.addLayout(form)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.fill()

    def fill(self) -> None:
        """Read timm's model list (once)."""
        if self.missing is not None or self._names is not None:
            return
        from inspector.core.models.timm_models import list_timm_models

        self._names = list_timm_models()
        self.names.setStringList(self._names)
        self._filter(self.search.text())

    def _filter(self, text: str) -> None:
        self.filtered.setFilterFixedString(text.strip())
        current = self.list.currentIndex()
        if (not current.isValid()) and self.filtered.rowCount():
            self.list.setCurrentIndex(self.filtered.index(0, 0))
        self.changed.emit()

    def _current_changed(self, *_args) -> None:
        self._update_note()
        self.changed.emit()

    def _weights_changed(self, *_args) -> None:
        self._update_note()
        self.changed.emit()

    def _update_note(self) -> None:
        name = self.name()
        if name is None:
            self.note.setText("")
        elif self.weights.path():
            self.note.setText(f"{name} with the weights of the file below")
        else:
            from inspector.core.models.timm_models import cached_timm_weights

            cached = cached_timm_weights(name)
            self.note.setText(f"{name}: pretrained weights in the Hugging Face cache"
                              if cached else f"{name}: random weights (not in the Hugging "
                              f"Face cache; give a weights file, or a seed below)")

    def name(self) -> str | None:
        if self.missing is not None:
            return None
        index = self.list.currentIndex()
        return index.data() if index.isValid() else None

    def problem(self) -> str | None:
        if self.missing is not None:
            return self.missing.text()
        if self.name() is None:
            return "Choose a timm model"
        path = self.weights.path()
        if path and not Path(path).is_file():
            return "The weights file does not exist"
        return None

    def fields(self) -> dict:
        return {"name": f"timm:{self.name()}", "checkpoint": self.weights.path() or None}


class HfTab(QWidget):
    changed = Signal()

    def __init__(self, start_dir: Callable[[], str]) -> None:
        super().__init__()
        self.missing = _missing_label("hf")
        layout = QVBoxLayout(self)
        if self.missing is not None:
            layout.addWidget(self.missing)
            layout.addStretch(1)
            return
        self.folder = PathRow("Open a Hugging Face model folder", "", start_dir, folder=True)
        self.folder.edit.textChanged.connect(self.changed)
        form = QFormLayout()
        form.addRow("Model folder:", self.folder)
        note = QLabel("A folder written by save_pretrained (config.json and the weights) of an "
                      "image classifier: ViT, DeiT, BEiT, Swin, ConvNeXt, ResNet... It is read "
                      "from disk only, nothing is downloaded.")
        note.setWordWrap(True)
        form.addRow(note)
        warning = QLabel(REMOTE_CODE_WARNING)
        warning.setWordWrap(True)
        warning.setStyleSheet(WARNING_STYLE)
        self.trust = QCheckBox("Run the code in this folder (trust_remote_code)")
        self.trust.toggled.connect(self.changed)
        layout.addLayout(form)
        layout.addWidget(warning)
        layout.addWidget(self.trust)
        layout.addStretch(1)

    def problem(self) -> str | None:
        if self.missing is not None:
            return self.missing.text()
        folder = Path(self.folder.path())
        if not self.folder.path() or not folder.is_dir():
            return "Choose the model folder"
        if not (folder / "config.json").is_file():
            return "The folder has no config.json (not written by save_pretrained)"
        return None

    def fields(self) -> dict:
        return {"name": f"hf:{self.folder.path()}", "trust_remote_code": self.trust.isChecked()}
