"""Help ▸ About: the versions, the device in use and where the settings are, with a Copy
button that puts it all on the clipboard for a bug report. Also the app's icon.

Opening it never imports torch: while the engine is still loading (torch takes seconds to
import) the dialog says so instead of blocking the window.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from PySide6.QtCore import QSettings, QSize, Qt, qVersion
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inspector import __version__
from inspector.resources import ICON_SIZES, icon_png, is_frozen, resources_dir

TAGLINE = ("Look inside a PyTorch model while it runs: activations, gradients and class "
           "activation maps.")


def app_icon() -> QIcon:
    """The app icon with every rendered size, so each place that shows it gets a sharp one."""
    icon = QIcon()
    for size in ICON_SIZES:
        path = icon_png(size)
        if path.is_file():
            icon.addFile(str(path), QSize(size, size))
    return icon


def _installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _module_version(module: str, dist: str) -> str:
    """A package's version without importing it (it may be slow to import, or absent)."""
    loaded = sys.modules.get(module)
    version = getattr(loaded, "__version__", None) or _installed_version(dist)
    return str(version) if version else "not installed"


def torch_rows(torch) -> list[tuple[str, str]]:
    """PyTorch, its CUDA build and the GPUs it sees; ``torch`` None while it is loading."""
    if torch is None:
        installed = _installed_version("torch")
        loading = "still loading" if installed else "not installed"
        return [("PyTorch", f"{installed} ({loading})" if installed else loading),
                ("CUDA", "known once PyTorch has loaded")]
    rows = [("PyTorch", str(torch.__version__))]
    try:
        cuda = getattr(torch.version, "cuda", None)
        hip = getattr(torch.version, "hip", None)
        if cuda:
            build = f"built with CUDA {cuda}"
        elif hip:
            build = f"built with ROCm {hip}"
        else:
            build = "CPU-only build"
        if (cuda or hip) and torch.cuda.is_available():
            count = torch.cuda.device_count()
            gpus = f"{count} GPU{'s' if count != 1 else ''} available"
            # Names need CUDA initialised; only ask when the app already did (a model on a
            # GPU), because initialising it here would stall the window.
            if torch.cuda.is_initialized():
                names = ", ".join(torch.cuda.get_device_name(i) for i in range(count))
                gpus += f": {names}"
        elif cuda or hip:
            gpus = "no usable GPU found"
        else:
            gpus = ""
        rows.append(("CUDA", f"{build}; {gpus}" if gpus else build))
        if cuda and torch.cuda.is_available():
            cudnn = torch.backends.cudnn.version()
            rows.append(("cuDNN", str(cudnn) if cudnn else "not available"))
        if sys.platform == "darwin":
            mps = torch.backends.mps.is_available()
            rows.append(("Apple MPS", "available" if mps else "not available"))
        rows.append(("CPU threads", str(torch.get_num_threads())))
    except Exception as e:  # noqa: BLE001 - a broken driver must not stop the dialog opening
        rows.append(("CUDA", f"unknown ({type(e).__name__}: {e})"))
    return rows


def settings_location(settings=None) -> str:
    """Where the settings are stored: a QSettings, an AppSettings (its ``qs``), or the
    application's default QSettings."""
    qs = getattr(settings, "qs", settings)
    if qs is None:
        qs = QSettings()
    return qs.fileName()


def about_rows(device: str | None = None, settings=None) -> list[tuple[str, str]]:
    """Everything the dialog shows, as (label, value) pairs, in order."""
    import PySide6

    frozen = " (frozen app)" if is_frozen() else ""
    rows = [
        ("Network Inspector", f"{__version__}{frozen}"),
        ("Device in use", device or "no model loaded"),
        *torch_rows(sys.modules.get("torch")),
        ("torchvision", _module_version("torchvision", "torchvision")),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()}), "
                   f"{sys.executable}"),
        ("Qt", f"{qVersion()} (PySide6 {PySide6.__version__})"),
        ("pyqtgraph", _module_version("pyqtgraph", "pyqtgraph")),
        ("NumPy", _module_version("numpy", "numpy")),
        ("Settings", settings_location(settings)),
        ("Resources", str(resources_dir())),
        ("Platform", platform.platform()),
    ]
    return rows


def report_text(rows: list[tuple[str, str]]) -> str:
    return "\n".join(f"{label}: {value}" for label, value in rows) + "\n"


class AboutDialog(QDialog):
    """``device``: where the loaded model runs (None: no model yet); ``settings``: the
    window's AppSettings or QSettings (None: the application's default settings)."""

    def __init__(self, parent: QWidget | None = None, device: str | None = None,
                 settings=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Network Inspector")
        self.rows = about_rows(device, settings)

        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(QSize(96, 96)))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        title = QLabel(f"<h2 style='margin:0'>Network Inspector</h2>"
                       f"<p>Version {__version__}</p><p>{TAGLINE}</p>")
        title.setWordWrap(True)
        header = QHBoxLayout()
        header.addWidget(icon)
        header.addWidget(title, 1)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.value_labels: dict[str, QLabel] = {}
        for label, value in self.rows:
            field = QLabel(value)
            field.setWordWrap(True)
            field.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            form.addRow(f"{label}:", field)
            self.value_labels[label] = field

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy these details to the clipboard, for a bug report")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy)
        buttons.rejected.connect(self.reject)
        self.copied = QLabel("")

        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addLayout(form)
        layout.addWidget(self.copied)
        layout.addWidget(buttons)
        self.setMinimumWidth(560)

    def text(self) -> str:
        """What Copy puts on the clipboard: one `label: value` line per row."""
        return report_text(self.rows)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        self.copied.setText("Copied to the clipboard.")
