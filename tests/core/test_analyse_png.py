"""The PNGs `analyse` writes: maps over the whole picture with a colour bar, the class and
the unseen part hatched; mosaics with their grey scale. Checked on pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from task_models import small_cnn_factory

from inspector import cli
from inspector.batch.analyse.writers import MAX_OVERLAY_SIDE
from inspector.batch.figures import (
    HATCH_DIM,
    HATCH_LINE,
    MIN_SIDE,
    PANEL_DIM,
    figure_size,
    map_figure,
    mosaic_figure,
)
from inspector.core.export.files import colorize, mosaic
from inspector.core.inputs.preprocess import Preprocess

COLOUR = np.array([200, 120, 40], np.uint8)  # no pixel of the picture is white or grey
HATCH = (HATCH_LINE,) * 3
DIMMED = tuple(int(v) for v in np.rint(COLOUR * np.float32(HATCH_DIM)))


def picture(w: int, h: int) -> np.ndarray:
    return np.broadcast_to(COLOUR, (h, w, 3)).copy()


def pixels(a: np.ndarray) -> set[tuple[int, ...]]:
    return {tuple(int(v) for v in p) for p in a.reshape(-1, a.shape[-1])}


def bright(a: np.ndarray) -> np.ndarray:
    """Text pixels: white, or nearly where the font's edges are anti-aliased (the picture,
    the maps and the panels have none this light)."""
    return a.min(axis=-1) >= 200


def bar_column(image: np.ndarray, bar) -> np.ndarray:
    x0, y0, x1, y1 = bar
    return image[y0:y1, (x0 + x1) // 2]


# -- the figures, unit by unit ------------------------------------------------------------------


def test_a_map_figure_has_a_colour_bar_from_1_at_the_top_to_0_at_the_bottom():
    heat = np.tile(np.linspace(0, 1, 320, dtype=np.float32), (280, 1))
    fig = map_figure(picture(320, 280), heat, np.ones((280, 320)), ["circle 93.1%", "Grad-CAM"])
    assert fig.image.shape == (280, 320, 3) and fig.image.dtype == np.uint8
    x0, y0, x1, y1 = fig.bar
    assert x1 - x0 >= 6 and y1 - y0 > 280 // 4  # a bar, with its ticks half the picture high
    assert x0 > 320 * 3 // 4  # at the right edge
    column = bar_column(fig.image, fig.bar)
    np.testing.assert_array_equal(column, colorize(np.linspace(1, 0, y1 - y0, dtype=np.float32)))
    # Every column of the bar is the same ramp.
    assert (fig.image[y0:y1, x0:x1] == column[:, None]).all()
    # Tick labels: white text above and below the bar.
    assert bright(fig.image[max(0, y0 - 25) : y0, x0 - 6 : x1 + 6]).any()
    assert bright(fig.image[y1 : y1 + 25, x0 - 6 : x1 + 6]).any()
    assert fig.note is None  # the model saw the whole picture: nothing hatched or said


def test_the_caption_is_white_text_on_a_dimmed_panel_at_the_top_left():
    fig = map_figure(picture(300, 300), np.zeros((300, 300), np.float32), np.ones((300, 300)),
                     ["golden retriever 93.1%", "Grad-CAM at layer4"])
    x0, y0, x1, y1 = fig.caption
    assert (x0, y0) < (10, 10) and x1 - x0 > 60 and y1 - y0 > 20
    panel = fig.image[y0:y1, x0:x1]
    white = bright(panel)
    assert white.sum() > 50  # the text
    # Around the text the panel darkens the tinted picture; below it the picture is as blended.
    blended = np.rint(COLOUR * np.float32(0.5) + colorize(np.zeros(1))[0] * np.float32(0.5))
    dimmed = np.rint(blended.astype(np.float32) * np.float32(PANEL_DIM))
    assert (panel[~white].mean(axis=0) < blended).all()
    assert tuple(panel[0, 0]) == tuple(int(v) for v in dimmed)
    np.testing.assert_array_equal(fig.image[y1 + 5, x0 + 5], blended)


def test_long_captions_are_wrapped_and_cut_to_fit_beside_the_bar():
    words = "a very long class name that goes on and on " * 4
    fig = map_figure(picture(256, 256), np.zeros((256, 256), np.float32), np.ones((256, 256)),
                     [words, "Integrated Gradients (input attribution)"])
    assert fig.caption[2] <= fig.bar[0]  # never over the colour bar
    assert fig.caption[3] < 256 // 2  # two lines per caption line at most


def test_what_the_model_never_saw_is_hatched_and_said_to_be():
    h, w = 280, 360
    seen = np.zeros((h, w), np.float32)
    seen[:, 100:260] = 1.0  # the centre crop of a wide picture
    heat = np.full((h, w), 0.75, np.float32)
    fig = map_figure(picture(w, h), heat, seen, ["circle 50.0%"])
    img = fig.image
    # Left of the crop, clear of the panels: dimmed picture and hatch lines only, both.
    strip = img[fig.caption[3] + 2 : fig.note[1] - 2, 0:95]
    assert pixels(strip) == {HATCH, DIMMED}
    hatch = (strip == HATCH_LINE).all(axis=2)
    assert 0.1 < hatch.mean() < 0.5  # lines, not a fill
    # The lines are diagonal (/): each row's pattern is the row above's, one pixel left.
    np.testing.assert_array_equal(hatch[1:, :-1], hatch[:-1, 1:])
    # Inside the crop the map is blended over the whole height.
    expected = np.rint(COLOUR * np.float32(0.5) + colorize(np.full(1, 0.75))[0] * np.float32(0.5))
    assert pixels(img[fig.caption[3] : fig.note[1], 110:250]) == {tuple(int(v) for v in expected)}
    # The note: white text at the bottom left, on a panel.
    x0, y0, x1, y1 = fig.note
    assert y1 <= h and y0 > h // 2 and x0 < 10
    assert bright(img[y0:y1, x0:x1]).sum() > 50


def test_a_mosaic_figure_keeps_the_grid_and_adds_a_title_and_its_grey_scale():
    rng = np.random.default_rng(0)
    grid = rng.integers(0, 255, (300, 280), dtype=np.uint8)
    fig = mosaic_figure(grid, "layer4: 512 channels, each from its min (black) to its max (white)")
    img = fig.image
    assert img.ndim == 2
    top = fig.caption[3]
    assert top > 10 and (img[:top] >= 200).sum() > 50  # a title in white
    np.testing.assert_array_equal(img[top : top + 300, :280], grid)
    x0, y0, x1, y1 = fig.bar
    assert x0 >= 280 and y1 - y0 > 150
    column = img[y0:y1, (x0 + x1) // 2].astype(int)
    assert column[0] == 255 and column[-1] == 0 and (np.diff(column) <= 0).all()
    assert (img[y0 - 30 : y0, 280:] >= 200).any() and (img[y1 : y1 + 30, 280:] >= 200).any()


def test_small_grids_and_pictures_are_enlarged_by_a_whole_factor_large_ones_shrunk():
    assert figure_size((400, 300), MAX_OVERLAY_SIDE) == (400, 300)
    assert figure_size((80, 60), MAX_OVERLAY_SIDE) == (400, 300)  # 5 x: 60 -> 300 >= 256
    assert figure_size((6000, 3000), MAX_OVERLAY_SIDE) == (2048, 1024)
    assert figure_size((10, 4000), MAX_OVERLAY_SIDE) == (5, 2048)
    assert min(figure_size((7, 9), MAX_OVERLAY_SIDE)) >= MIN_SIDE
    grid = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    fig = mosaic_figure(grid, "conv: 4 channels")
    k = -(-MIN_SIDE // 3)
    top = fig.caption[3]
    np.testing.assert_array_equal(fig.image[top : top + 3 * k : k, 0 : 4 * k : k], grid)


# -- what analyse writes ------------------------------------------------------------------------

FACTORY = small_cnn_factory(resize_size=36)


def find_bar(image: np.ndarray):
    """(x, top, bottom) of a column in the right quarter that runs down the jet ramp from
    1 to 0 (with both ends), or None."""
    hi, lo = colorize(np.ones(1))[0], colorize(np.zeros(1))[0]
    h, w = image.shape[:2]
    for x in range(w - 1, w * 3 // 4, -1):
        column = image[:, x]
        tops = np.flatnonzero((column == hi).all(axis=1))
        bottoms = np.flatnonzero((column == lo).all(axis=1))
        if len(tops) and len(bottoms) and bottoms[-1] > tops[0]:
            top, bottom = int(tops[0]), int(bottoms[-1]) + 1
            ramp = colorize(np.linspace(1, 0, bottom - top, dtype=np.float32))
            if (column[top:bottom] == ramp).all():
                return x, top, bottom
    return None


@pytest.fixture
def analysed(tmp_path: Path):
    model = tmp_path / "tiny_model.py"
    model.write_text(FACTORY)
    folder = tmp_path / "images"
    folder.mkdir()
    wide = picture(400, 300)
    wide[100:200, 150:250] = 20  # something for the model to look at, inside the crop
    Image.fromarray(wide).save(folder / "wide.png")
    Image.fromarray(picture(64, 48)).save(folder / "small.png")
    out = tmp_path / "out"
    rc = cli.main(["analyse", "--model", f"{model}:build", "--layers", "0", "--cam", "gradcam",
                   "--attr", "occlusion", "--occlusion-patch", "8", "--occlusion-stride", "4",
                   "--no-tensorboard", "--quiet", "--out", str(out), str(folder)])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["attributions"]["occlusion_patch"] == 8
    assert summary["attributions"]["occlusion_stride"] == 4
    return out, {Path(e["path"]).name: e for e in summary["images"]}, summary["cam_layer"]


def test_analyse_maps_cover_the_whole_picture_with_the_unseen_part_hatched(analysed):
    out, entries, cam_layer = analysed
    entry = entries["wide.png"]
    files = entry["files"]
    assert {"cam/gradcam", "attr/occlusion", "mosaic/0"} <= set(files)
    pre = Preprocess(crop_size=(32, 32), resize_size=36, mean=(0.5,) * 3, std=(0.25,) * 3)
    seen = pre.to_original(np.ones((32, 32), np.float32), (400, 300)) > 0.5
    outside = np.flatnonzero(~seen[150])  # a row through the middle
    assert outside.min() == 0 and 50 < len(outside) < 150  # both sides of a wide picture
    with np.load(out / files["npz"]) as npz:
        occlusion = npz["attr/occlusion"]
    assert occlusion.shape == (3, 32, 32) and np.abs(occlusion).max() > 0
    for key in ("cam/gradcam", "attr/occlusion"):
        img = np.asarray(Image.open(out / files[key]).convert("RGB"))
        assert img.shape == (300, 400, 3)  # the original picture, whole
        # Left of the crop, mid-height: hatched, not the untouched picture.
        strip = img[120:180, 2:40]
        assert pixels(strip) == {HATCH, DIMMED}, key
        # Inside the crop, the map is blended in: no pixel keeps the picture's colour.
        inside = img[120:180, 160:240]
        assert tuple(COLOUR) not in pixels(inside) and HATCH not in pixels(inside)
        assert find_bar(img) is not None, key
        assert bright(img[:30, :120]).sum() > 30  # the class, top left
        assert bright(img[-30:, :200]).sum() > 30  # the note, bottom left


def test_analyse_names_the_class_and_enlarges_small_pictures(analysed):
    out, entries, cam_layer = analysed
    entry = entries["small.png"]
    assert entry["error"] is None
    img = np.asarray(Image.open(out / entry["files"]["cam/gradcam"]).convert("RGB"))
    assert img.shape[1::-1] == figure_size((64, 48), MAX_OVERLAY_SIDE) == (384, 288)
    # The same figure as map_figure draws with the class and probability analyse reports.
    with np.load(out / entry["files"]["npz"]) as npz:
        cam = npz["cam/gradcam"]
    pre = Preprocess(crop_size=(32, 32), resize_size=36, mean=(0.5,) * 3, std=(0.25,) * 3)
    target = entry["target"]
    prob = next(p["prob"] for p in entry["top"] if p["index"] == target)
    label = next(p["label"] for p in entry["top"] if p["index"] == target)
    size = (384, 288)
    big = np.asarray(Image.fromarray(picture(64, 48)).resize(size, Image.Resampling.NEAREST))
    expected = map_figure(big, pre.to_original(cam, size),
                          pre.to_original(np.ones((32, 32), np.float32), size),
                          [f"{label} {prob:.1%}", f"Grad-CAM at {cam_layer}"])
    np.testing.assert_array_equal(img, expected.image)
    unlabelled = map_figure(big, pre.to_original(cam, size),
                            pre.to_original(np.ones((32, 32), np.float32), size),
                            [f"Grad-CAM at {cam_layer}"])
    assert (img != unlabelled.image).any()  # the class line is drawn


def test_analyse_mosaics_carry_their_grey_scale(analysed):
    out, entries, cam_layer = analysed
    files = entries["wide.png"]["files"]
    img = np.asarray(Image.open(out / files["mosaic/0"]))
    with np.load(out / files["npz"]) as npz:
        grid = mosaic(torch.from_numpy(npz["activation/0"][0]))
    fig = mosaic_figure(grid, "0: 8 channels, each from its min (black) to its max (white)")
    np.testing.assert_array_equal(img, fig.image)  # the tested figure, with this title
    column = img[fig.bar[1] : fig.bar[3], (fig.bar[0] + fig.bar[2]) // 2].astype(int)
    assert column[0] == 255 and column[-1] == 0 and (np.diff(column) <= 0).all()


def test_pictures_of_a_model_with_random_weights_say_so(tmp_path: Path, monkeypatch):
    """The CLI warns of random weights; a PNG passed on alone said nothing of them."""
    from inspector.batch import figures

    captions, titles = [], []
    draw_map, draw_mosaic = figures.map_figure, figures.mosaic_figure
    monkeypatch.setattr(figures, "map_figure",
                        lambda *a: captions.append(a[3]) or draw_map(*a))
    monkeypatch.setattr(figures, "mosaic_figure",
                        lambda grid, title: titles.append(title) or draw_mosaic(grid, title))
    folder = tmp_path / "images"
    folder.mkdir()
    Image.fromarray(picture(64, 48)).save(folder / "one.png")
    # No weights can be fetched here: the catalog model is built with random ones.
    rc = cli.main(["analyse", "--model", "mobilenet_v3_small", "--seed", "1", "--layers",
                   "features.0", "--cam", "gradcam", "--no-tensorboard", "--quiet", "--out",
                   str(tmp_path / "out"), str(folder)])
    assert rc == 0
    assert captions and all("random weights: an untrained network" in c for c in captions)
    assert titles and all(t.endswith("random weights (an untrained network)") for t in titles)


def test_cka_png_of_a_model_with_random_weights_says_so():
    from inspector.batch.compare_models.writers import cka_figure, random_weights

    doc = {"model_a": "resnet18", "model_b": "resnet34", "images": 8, "estimator": "exact",
           "layers_a": ["layer1", "layer2"], "layers_b": ["layer1", "layer2"],
           "cka": [[1.0, 0.5], [0.5, 1.0]], "seed_a": None, "seed_b": None}
    assert random_weights(doc) == []
    trained = cka_figure(doc)
    doc["seed_b"] = 7
    assert random_weights(doc) == ["model B (resnet34) has random weights (seed 7): an "
                                   "untrained network"]
    assert cka_figure(doc).height > trained.height  # the line is drawn above the heatmap
