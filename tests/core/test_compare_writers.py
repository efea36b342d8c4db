"""cka.png (batch.compare_models.writers.cka_figure): the heatmap's cells carry the viridis colour of
their value, top row A's first layer, and the caption is wrapped inside the picture however
long the models' names are."""

from __future__ import annotations

import numpy as np
from PIL import ImageDraw

from inspector.batch.compare_models.writers import ESTIMATOR_TEXT, caption, cka_figure, viridis


def _doc(rows: int, cols: int, name_b: str = "build", estimator: str = "minibatch") -> dict:
    values = np.linspace(0.0, 1.0, rows * cols).reshape(rows, cols)
    values[0, 0] = np.nan
    return {"model_a": "demo_shapes", "model_b": name_b, "images": 12,
            "layers_a": [f"a{i}" for i in range(rows)], "layers_b": [f"b{j}" for j in range(cols)],
            "cka": [[None if np.isnan(v) else float(v) for v in row] for row in values],
            "estimator": estimator}


def _ink_columns(img, top: int, bottom: int) -> np.ndarray:
    """The x of every column with a non-white pixel between rows top and bottom."""
    band = np.asarray(img.convert("L"))[top:bottom]
    return np.nonzero((band < 200).any(axis=0))[0]


def test_the_caption_stays_inside_a_narrow_figure():
    doc = _doc(23, 3, name_b="a_model_file_function_with_a_long_name")
    img = cka_figure(doc)
    assert img.width == 420  # three columns: the figure's narrowest
    values = np.array([[np.nan if v is None else v for v in row] for row in doc["cka"]])
    second = viridis(values)[0, 1]  # the colour of the first row's second cell
    top = int(np.nonzero((np.asarray(img) == second).all(axis=2))[0].min())
    ink = _ink_columns(img, 0, top - 2)
    assert ink.size and ink.max() < img.width - 5  # nothing written up to the edge (cut off)
    # All of the caption's words are written: the wrapped lines need more than two rows.
    measure = ImageDraw.Draw(img)
    assert measure.textlength(caption(doc) + ESTIMATOR_TEXT["minibatch"]) > img.width


def test_cells_have_their_values_colour():
    doc = _doc(4, 5, estimator="exact")
    img = cka_figure(doc)
    rgb = np.asarray(img).astype(int)
    values = np.array([[np.nan if v is None else v for v in row] for row in doc["cka"]])
    colours = viridis(values).astype(int)
    # Find the heatmap: the block of pixels with the last cell's colour (bottom right).
    ys, xs = np.nonzero((rgb == colours[-1, -1]).all(axis=2))
    cell = xs.max() - xs.min() + 1
    x1, y1 = xs.max() + 1, ys.max() + 1
    x0, y0 = x1 - 5 * cell, y1 - 4 * cell
    for r in range(4):
        for c in range(5):
            centre = rgb[y0 + r * cell + cell // 2, x0 + c * cell + cell // 2]
            assert tuple(centre) == tuple(colours[r, c]), (r, c)
    assert tuple(colours[0, 0]) == (128, 128, 128)  # an undefined pair is grey
