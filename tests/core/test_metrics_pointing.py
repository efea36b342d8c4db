"""The pointing game with TorchRay's convention (a hit strictly within 15 pixels; tied
maxima: the first in reading order) and the energy-based pointing game, in the picture's
own pixels, a map laid onto a non-square picture through the preprocessing."""

from __future__ import annotations

import numpy as np
import pytest

from inspector.core.explain.metrics.pointing import boxes_mask, pointing, pointing_in_mask
from inspector.core.inputs.preprocess import Preprocess


def peak(h: int, w: int, x: int, y: int) -> np.ndarray:
    m = np.zeros((h, w), np.float32)
    m[y, x] = 1.0
    return m


def test_a_hit_is_strictly_closer_than_the_tolerance():
    m = peak(60, 80, 10, 30)
    near = pointing(m, [[24, 25, 40, 35]])  # pixel (24, 30) is 14 pixels away
    far = pointing(m, [[25, 25, 40, 35]])  # the nearest pixel is 15 away
    assert near.hit is True and far.hit is False
    assert near.point == (10, 30)
    assert pointing(m, [[25, 25, 40, 35]], tolerance=16).hit is True
    assert pointing(m, [[0, 0, 5, 5], [8, 28, 12, 32]]).hit is True  # any of the boxes


def test_tied_maxima_point_at_the_first_in_reading_order():
    m = peak(60, 80, 50, 50) + peak(60, 80, 5, 5)
    found = pointing(m, [[45, 45, 55, 55]])
    assert found.point == (5, 5) and found.hit is False


def test_energy_is_the_share_of_the_mass_inside_the_boxes():
    m = np.zeros((40, 40), np.float32)
    m[10:20, 10:20] = 0.5
    m[30, 30] = 1.0
    assert pointing(m, [[10, 10, 20, 20]]).energy == pytest.approx(50 / 51)
    assert pointing(m, [[5, 5, 35, 35]]).energy == pytest.approx(1.0)
    # A box in continuous coordinates covers every pixel it touches.
    mask, clipped = boxes_mask([[9.5, 9.5, 10.2, 10.2]], (40, 40))
    assert mask.sum() == 4 and not clipped
    clipped_box = pointing(m, [[-5, -5, 12, 12]])
    assert clipped_box.note and "edge" in clipped_box.note


def test_a_map_over_the_model_input_is_laid_onto_a_wide_picture():
    pre = Preprocess(crop_size=(64, 64), resize_size=64, mean=(0, 0, 0), std=(1, 1, 1))
    size = (200, 100)  # width, height: resized to 128 x 64, centre crop 64 wide
    m = np.zeros((64, 64), np.float32)
    m[30:34, 30:34] = 1.0  # the crop's centre is the picture's centre
    on_picture = pre.to_original(m, size)
    assert on_picture.shape == (100, 200)
    found = pointing(on_picture, [[90, 40, 110, 60]])
    assert found.hit is True and abs(found.point[0] - 100) <= 3 and abs(found.point[1] - 50) <= 3
    assert found.energy == pytest.approx(1.0)
    assert pointing(on_picture, [[0, 0, 20, 20]]).hit is False


def test_undefined_cases_say_why():
    m = peak(20, 20, 3, 3)
    assert pointing(m, [[30, 30, 40, 40]]).undefined == "no box covers any pixel of the picture"
    flat = pointing(np.zeros((20, 20), np.float32), [[0, 0, 5, 5]])
    assert flat.hit is None and "constant" in flat.undefined


def test_an_object_mask_scores_as_the_boxes_it_covers():
    rng = np.random.default_rng(3)
    m = rng.random((30, 50)).astype(np.float32)
    boxes = [[4, 6, 18, 20], [30, 2, 44, 9]]
    mask, _ = boxes_mask(boxes, (50, 30))
    by_boxes, by_mask = pointing(m, boxes), pointing_in_mask(m, mask.astype(np.uint8) * 255)
    assert (by_mask.hit, by_mask.point) == (by_boxes.hit, by_boxes.point)
    assert by_mask.energy == pytest.approx(by_boxes.energy, abs=1e-12)
    # A mask of any shape, not only boxes: an L whose corner is 15 px from the peak misses.
    ell = np.zeros((40, 40), bool)
    ell[20:, 20] = ell[39, 20:] = True
    far = peak(40, 40, 5, 20)  # 15 px left of the L's upright
    assert pointing_in_mask(far, ell).hit is False
    assert pointing_in_mask(peak(40, 40, 6, 20), ell).hit is True
    assert pointing_in_mask(m, np.zeros((30, 50))).undefined == "the object's mask covers no pixel"
    with pytest.raises(ValueError, match="must match"):
        pointing_in_mask(m, np.ones((30, 49)))
