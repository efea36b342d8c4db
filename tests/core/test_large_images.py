"""Images between Pillow's warning and its refusal (89-179 megapixels) load reduced, with
one line that says so instead of Pillow's DecompressionBombWarning (core.inputs.images)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inspector.core.inputs import images
from inspector.core.inputs.images import load_image

ORIENTATION = 0x0112


def load_quietly(path, **kwargs):
    """load_image, with every warning recorded (each would print on stderr by default)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        img = load_image(path, **kwargs)
    return img, [f"{w.category.__name__}: {w.message}" for w in seen]


def test_a_90_megapixel_jpeg_decodes_at_half_scale_without_pillows_warning(tmp_path):
    # 10000 x 9000 = 90 M pixels, just over Pillow's 89.5 M warning threshold. Grey and flat,
    # so the test writes it quickly and holds 90 MB, not 270.
    path = tmp_path / "scan.jpg"
    Image.new("L", (10000, 9000), 128).save(path, quality=50)
    img, seen = load_quietly(path)
    assert seen == []
    # Decoded at 1/2 scale: a quarter of the pixels (68 MB as RGB instead of 270 MB).
    assert img.size == (5000, 4500)
    assert img.info["source_size"] == (10000, 9000)
    (note,) = img.info["load_notes"]
    assert note.startswith("decoded at 1/2 scale: the file is 10000 x 9000 (90 megapixels)")
    assert "\n" not in note
    assert np.asarray(img)[::500, ::500].std() < 2  # still the flat grey, now RGB


@pytest.fixture
def lower_limits(monkeypatch):
    """Pillow warns above 4,000 pixels and refuses above 8,000; the app reduces above 4,000
    and refuses above 8,000: the real limits, 22,000 times smaller."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4_000)
    monkeypatch.setattr(images, "MAX_PIXELS", 8_000)
    monkeypatch.setattr(images, "LARGE_PIXELS", 4_000, raising=False)


def gradient(w: int, h: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 255 // (w - 1), yy * 255 // (h - 1), np.full_like(xx, 90)],
                    -1).astype(np.uint8)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "TIFF", "WEBP"])
def test_each_format_over_the_warning_threshold_is_reduced_with_one_note(tmp_path,
                                                                          lower_limits, fmt):
    arr = gradient(100, 60)  # 6,000 pixels: over the warning, under the refusal
    path = tmp_path / f"big.{fmt.lower()}"
    Image.fromarray(arr).save(path, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    img, seen = load_quietly(path)
    assert seen == []
    assert img.size == (50, 30)
    assert img.info["load_notes"] == (
        "decoded at 1/2 scale: the file is 100 x 60 (0.006 megapixels), more than the model "
        "input and the screen need",)
    expected = np.asarray(Image.fromarray(arr).reduce(2)).astype(int)
    assert np.abs(np.asarray(img).astype(int) - expected).mean() < 3


def test_a_palette_image_is_reduced_in_colour_not_in_palette_indices(tmp_path, lower_limits):
    # Index 0 is red and index 1 blue: averaging indices would give index 0 or 1, never purple.
    im = Image.new("P", (100, 60))
    im.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    im.putdata([(x + y) % 2 for y in range(60) for x in range(100)])  # a checkerboard
    im.save(tmp_path / "checker.png")
    img, _ = load_quietly(tmp_path / "checker.png")
    assert img.size == (50, 30)
    assert np.asarray(img)[5, 5].tolist() == [128, 0, 128]


def test_a_reduced_tiff_keeps_its_orientation(tmp_path, lower_limits):
    arr = gradient(100, 60)
    exif = Image.Exif()
    exif[ORIENTATION] = 6  # stored sideways: turn 90 degrees clockwise to show
    Image.fromarray(arr).save(tmp_path / "sideways.tif", exif=exif)
    img, _ = load_quietly(tmp_path / "sideways.tif")
    assert img.size == (30, 50)
    upright = np.asarray(Image.fromarray(arr).reduce(2).transpose(Image.Transpose.ROTATE_270))
    assert np.abs(np.asarray(img).astype(int) - upright.astype(int)).mean() < 3


def test_an_image_under_the_threshold_is_decoded_in_full(tmp_path, lower_limits):
    Image.fromarray(gradient(60, 60)).save(tmp_path / "small.png")  # 3,600 pixels
    img, seen = load_quietly(tmp_path / "small.png")
    assert seen == [] and img.size == (60, 60) and img.info["load_notes"] == ()


def test_analyse_says_which_images_it_decoded_reduced(tmp_path, monkeypatch, capsys):
    """The window said so in its status bar; `analyse` said nothing. (The app's limits are
    lowered, not Pillow's: the model input's resize makes a picture over those.)"""
    import json

    from inspector import cli

    monkeypatch.setattr(images, "MAX_PIXELS", 8_000)
    monkeypatch.setattr(images, "LARGE_PIXELS", 4_000, raising=False)

    Image.fromarray(gradient(100, 60)).save(tmp_path / "big.png")
    Image.fromarray(gradient(40, 30)).save(tmp_path / "small.png")
    out = tmp_path / "out"
    assert cli.main(["analyse", "--quiet", "--no-tensorboard", "--out", str(out),
                     str(tmp_path / "big.png"), str(tmp_path / "small.png")]) == 0
    err = capsys.readouterr().err
    assert "note: big.png was decoded at 1/2 scale: the file is 100 x 60" in err, err
    assert "small.png was" not in err
    entries = {Path(e["path"]).name: e for e in json.loads((out / "summary.json").read_text())["images"]}
    assert entries["big.png"]["note"].startswith("big.png was decoded at 1/2 scale")
    assert "note" not in entries["small.png"]
