"""Help ▸ About: what it shows, the Copy button, and that it never imports torch itself."""

from __future__ import annotations

import platform
import sys
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QSettings, Qt, qVersion
from PySide6.QtGui import QGuiApplication

from inspector import __version__
from inspector.resources import ICON_SIZES
from inspector.ui.window.about_dialog import AboutDialog, app_icon, torch_rows


def fake_torch(cuda="12.8", available=True, initialized=True, names=("Fake A", "Fake B")):
    """Enough of torch's API for torch_rows, with GPUs this machine may not have."""

    def device_name(i):
        if not initialized:
            raise AssertionError("asked for a GPU's name before CUDA was initialised")
        return names[i]

    return SimpleNamespace(
        __version__="9.9.9",
        version=SimpleNamespace(cuda=cuda, hip=None),
        cuda=SimpleNamespace(
            is_available=lambda: available,
            device_count=lambda: len(names) if available else 0,
            is_initialized=lambda: initialized,
            get_device_name=device_name,
        ),
        backends=SimpleNamespace(
            cudnn=SimpleNamespace(version=lambda: 91002),
            mps=SimpleNamespace(is_available=lambda: False),
        ),
        get_num_threads=lambda: 3,
    )


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def test_shows_version_device_settings_file_python_and_qt(qtbot, settings, tmp_path):
    dialog = AboutDialog(device="cuda:1", settings=settings)
    qtbot.addWidget(dialog)
    values = {label: field.text() for label, field in dialog.value_labels.items()}
    assert values["Network Inspector"].startswith(__version__)
    assert values["Device in use"] == "cuda:1"
    assert values["Settings"] == str(tmp_path / "settings.ini")
    assert values["Python"].startswith(platform.python_version())
    assert values["Qt"].startswith(qVersion())
    for label in ("PyTorch", "CUDA", "torchvision", "Resources", "Platform"):
        assert values[label], label


def test_without_a_model_it_says_so(qtbot, settings):
    dialog = AboutDialog(settings=settings)
    qtbot.addWidget(dialog)
    assert dialog.value_labels["Device in use"].text() == "no model loaded"


def test_default_settings_location_is_the_applications(qtbot):
    dialog = AboutDialog()
    qtbot.addWidget(dialog)
    assert dialog.value_labels["Settings"].text() == QSettings().fileName()


def test_copy_puts_every_row_on_the_clipboard(qtbot, settings):
    dialog = AboutDialog(device="cpu", settings=settings)
    qtbot.addWidget(dialog)
    QGuiApplication.clipboard().setText("something else")
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    text = QGuiApplication.clipboard().text()
    assert text == dialog.text()
    lines = text.splitlines()
    assert len(lines) == len(dialog.rows)
    for (label, value), line in zip(dialog.rows, lines):
        assert line == f"{label}: {value}"
    assert "Device in use: cpu" in lines
    assert dialog.copied.text()  # the user sees that it worked


def test_never_imports_torch_while_the_engine_is_loading(qtbot, settings, monkeypatch):
    # As at start-up, before the engine's background import has finished.
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    dialog = AboutDialog(settings=settings)
    qtbot.addWidget(dialog)
    assert "torch" not in sys.modules
    rows = dict(dialog.rows)
    assert "still loading" in rows["PyTorch"] or rows["PyTorch"] == "not installed"
    assert rows["CUDA"] == "known once PyTorch has loaded"


def test_cuda_rows_name_the_gpus_once_cuda_is_up():
    rows = dict(torch_rows(fake_torch()))
    assert rows["PyTorch"] == "9.9.9"
    assert rows["CUDA"] == "built with CUDA 12.8; 2 GPUs available: Fake A, Fake B"
    assert rows["cuDNN"] == "91002"
    assert rows["CPU threads"] == "3"


def test_cuda_rows_do_not_initialise_cuda():
    rows = dict(torch_rows(fake_torch(initialized=False, names=("Fake A",))))
    assert rows["CUDA"] == "built with CUDA 12.8; 1 GPU available"


def test_cuda_rows_for_cpu_builds_and_missing_gpus():
    assert dict(torch_rows(fake_torch(cuda=None)))["CUDA"] == "CPU-only build"
    no_gpu = dict(torch_rows(fake_torch(available=False)))
    assert no_gpu["CUDA"] == "built with CUDA 12.8; no usable GPU found"
    assert "cuDNN" not in no_gpu


def test_a_broken_driver_still_opens_the_dialog():
    torch = fake_torch()

    def broken():
        raise RuntimeError("driver too old")

    torch.cuda.is_available = broken
    rows = dict(torch_rows(torch))
    assert rows["CUDA"] == "unknown (RuntimeError: driver too old)"


def test_real_torch_is_described_as_built():
    torch = pytest.importorskip("torch")
    rows = dict(torch_rows(torch))
    assert rows["PyTorch"] == torch.__version__
    if torch.version.cuda:
        assert rows["CUDA"].startswith(f"built with CUDA {torch.version.cuda}")
    else:
        assert rows["CUDA"].startswith(("CPU-only build", "built with ROCm"))


def test_app_icon_has_every_rendered_size(qtbot):
    icon = app_icon()
    assert not icon.isNull()
    assert sorted(size.width() for size in icon.availableSizes()) == list(ICON_SIZES)
    assert not icon.pixmap(32, 32).isNull()


def test_takes_the_windows_app_settings_too(qtbot, tmp_path):
    from inspector.ui.shell.app_settings import AppSettings

    settings = AppSettings.in_file(str(tmp_path / "app.ini"))
    dialog = AboutDialog(device="cpu", settings=settings)
    qtbot.addWidget(dialog)
    assert dialog.value_labels["Settings"].text() == str(tmp_path / "app.ini")
