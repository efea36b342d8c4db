"""inspector.resources finds the resources folder in a checkout, a frozen app, or where
INSPECTOR_RESOURCES points; and the icons it names exist at every size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PIL import Image

from inspector import resources

CHECKOUT = Path(__file__).resolve().parents[2] / "resources"


@pytest.fixture(autouse=True)
def plain(monkeypatch):
    monkeypatch.delenv(resources.ENV, raising=False)
    monkeypatch.delattr(sys, "_MEIPASS", raising=False)


def test_a_checkout_uses_its_resources_folder():
    assert resources.resources_dir() == CHECKOUT.resolve()


def test_the_environment_variable_wins_even_when_the_folder_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(resources.ENV, str(tmp_path / "elsewhere"))
    # An explicit choice is used as given, so that errors name it.
    assert resources.resources_dir() == (tmp_path / "elsewhere").resolve()


def test_a_pyinstaller_bundle_uses_the_bundled_folder(monkeypatch, tmp_path):
    (tmp_path / "resources").mkdir()
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resources.resources_dir() == (tmp_path / "resources").resolve()


def test_the_icon_exists_at_every_size():
    for size in resources.ICON_SIZES:
        with Image.open(resources.icon_png(size)) as image:
            assert image.size == (size, size)
            assert image.mode == "RGBA"
            assert image.getpixel((0, 0))[3] == 0  # transparent corners: a rounded tile
    assert resources.icon_svg().read_text().lstrip().startswith("<?xml")
    with pytest.raises(ValueError, match="no 20 px icon"):
        resources.icon_png(20)
