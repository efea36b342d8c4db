"""A procedural data set of drawn shapes: the demo model's training and test data.

Every image is drawn with Pillow from a random generator seeded by (seed, index) alone, so
item i of a data set is the same on every machine and in every DataLoader worker, and a
test set is just another seed.

What the label means: every image has one *main* shape, and that shape's class is the
label. Some images also hold a *distractor*: a shape of another class, never overlapping
the main one (their boxes are at least ``GAP`` pixels apart) and always clearly smaller:
its area in pixels is at most ``DISTRACTOR_MAX_AREA`` times the main shape's. (Area, not
radius: a star fills 40% of the area of a circle of the same radius, so a rule on radii
let a distractor circle outweigh a main star.) Both bounding boxes are returned so that a
class activation map can be scored (the pointing game).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter
from torch.utils.data import Dataset

CLASSES: tuple[str, ...] = (
    "circle",
    "square",
    "triangle",
    "star",
    "cross",
    "ring",
    "crescent",
    "heart",
)
IMAGE_SIZE = 128
# Radii are of the circle the shape is inscribed in, in pixels of the 128 x 128 image.
MAIN_RADIUS = (14.0, 30.0)
MAIN_RADIUS_WITH_DISTRACTOR = (16.0, 26.0)  # smaller, to leave room for a second shape
DISTRACTOR_RADIUS_MIN = 8.0
DISTRACTOR_MAX_AREA = 0.4
GAP = 3  # pixels between the two boxes, so that neither shape touches the other
SUPERSAMPLE = 4  # shapes are drawn 4x larger and reduced: smooth edges
MIN_CONTRAST = 110.0  # Euclidean RGB distance between a shape and the background under it
MIN_LUMA_CONTRAST = 70.0  # and brightness difference (0..255)


@dataclass(frozen=True)
class ShapeInfo:
    """One drawn shape: its class and its box (x0, y0, x1, y1), in pixels, end exclusive."""

    label: int
    box: tuple[int, int, int, int]
    radius: float
    area: float  # in pixels (antialiased edge pixels count in part)

    @property
    def name(self) -> str:
        return CLASSES[self.label]


@dataclass(frozen=True)
class ShapeSample:
    image: Image.Image  # RGB, IMAGE_SIZE x IMAGE_SIZE
    target: ShapeInfo  # the main shape; its class is the label
    distractor: ShapeInfo | None


# ---------------------------------------------------------------------------------------
# Shape outlines, as polygons in a unit frame (radius 1, centre 0), rotated by the caller.


def _regular(n: int, phase: float = 0.0) -> np.ndarray:
    a = phase + np.arange(n) * 2 * math.pi / n
    return np.stack([np.cos(a), np.sin(a)], axis=1)


def _star() -> np.ndarray:
    outer = _regular(5, -math.pi / 2)
    inner = 0.42 * _regular(5, -math.pi / 2 + math.pi / 5)
    return np.stack([outer, inner], axis=1).reshape(-1, 2)


def _cross(arm: float = 0.34) -> np.ndarray:
    a, b = arm, 1.0
    pts = [(-a, -b), (a, -b), (a, -a), (b, -a), (b, a), (a, a),
           (a, b), (-a, b), (-a, a), (-b, a), (-b, -a), (-a, -a)]  # fmt: skip
    return np.array(pts, dtype=float) * 0.95


def _heart(n: int = 48) -> np.ndarray:
    t = np.linspace(0, 2 * math.pi, n, endpoint=False)
    x = 16 * np.sin(t) ** 3
    y = -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))
    pts = np.stack([x, y], axis=1)
    pts -= (pts.max(0) + pts.min(0)) / 2
    return pts / np.abs(pts).max()


_POLYGONS = {
    "square": _regular(4, math.pi / 4) * 0.98,
    "triangle": _regular(3, -math.pi / 2),
    "star": _star(),
    "cross": _cross(),
    "heart": _heart(),
}


def _draw_mask(name: str, radius: float, angle: float, stretch: float) -> Image.Image:
    """An 'L' mask of one shape centred in a square patch of side 2 * (ceil(r) + 1)."""
    half = math.ceil(radius) + 1
    size = 2 * half * SUPERSAMPLE
    c = size / 2
    r = radius * SUPERSAMPLE
    mask = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask)
    if name == "circle":
        draw.ellipse((c - r, c - r * stretch, c + r, c + r * stretch), fill=255)
    elif name == "ring":
        draw.ellipse((c - r, c - r, c + r, c + r), fill=255)
        h = r * 0.58
        draw.ellipse((c - h, c - h, c + h, c + h), fill=0)
    elif name == "crescent":
        draw.ellipse((c - r, c - r, c + r, c + r), fill=255)
        h = r * 0.85
        dx, dy = 0.55 * r * math.cos(angle), 0.55 * r * math.sin(angle)
        draw.ellipse((c + dx - h, c + dy - h, c + dx + h, c + dy + h), fill=0)
    else:
        pts = _POLYGONS[name].copy()
        pts[:, 1] *= stretch
        rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        pts = pts @ rot.T * r + c
        draw.polygon([tuple(p) for p in pts], fill=255)
    return mask.reduce(SUPERSAMPLE)


@cache
def area_factor(name: str) -> float:
    """A shape's area in pixels divided by radius squared (unstretched), measured once."""
    r = 40.0
    return _area(_draw_mask(name, r, 0.3, 1.0)) / r**2


# ---------------------------------------------------------------------------------------
# Backgrounds


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _background(rng: np.random.Generator) -> np.ndarray:
    """A float32 HxWx3 image in [0, 255]: gradient, coloured blobs, stripes, lines, noise.

    Variations are kept moderate (tens of levels across a shape) so that a shape's
    contrast with the background, chosen from the mean under it, holds along all its edge.
    """
    s = IMAGE_SIZE
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
    base = rng.uniform(20, 235, size=3).astype(np.float32)
    a = rng.uniform(0, 2 * math.pi)
    ramp = np.cos(a) * (xx - 0.5) + np.sin(a) * (yy - 0.5)  # in [-0.71, 0.71]
    img = base + ramp[..., None] * rng.uniform(-70, 70, size=3).astype(np.float32)

    # Low-frequency coloured blobs: a small random grid upscaled smoothly.
    g = int(rng.integers(2, 9))
    grid = rng.uniform(0, 255, size=(g, g, 3)).astype(np.uint8)
    blobs = Image.fromarray(grid).resize((s, s), Image.BICUBIC)
    img += (np.asarray(blobs, np.float32) - 127.5) * rng.uniform(0.05, 0.35)

    kind = rng.random()
    if kind < 0.3:  # stripes or a checker pattern: texture the net must learn to ignore
        f = rng.uniform(3, 14)
        b = rng.uniform(0, 2 * math.pi)
        wave = np.sin(2 * math.pi * f * (np.cos(b) * xx + np.sin(b) * yy))
        if rng.random() < 0.4:
            wave = wave * np.sin(2 * math.pi * f * (-np.sin(b) * xx + np.cos(b) * yy))
        img += wave[..., None] * (rng.uniform(8, 25) * rng.choice([-1, 1], size=3))
    elif kind < 0.55:  # thin random lines: clutter that is not a shape
        layer = Image.new("L", (s, s), 0)
        draw = ImageDraw.Draw(layer)
        for _ in range(int(rng.integers(2, 8))):
            p = rng.uniform(-10, s + 10, size=4)
            draw.line(tuple(p), fill=int(rng.integers(120, 256)), width=int(rng.integers(1, 3)))
        img += (np.asarray(layer, np.float32)[..., None] / 255) * rng.uniform(-60, 60, size=3)

    sigma = rng.uniform(2, 12)
    img += rng.normal(0, sigma, size=(s, s, 1) if rng.random() < 0.5 else (s, s, 3))
    return np.clip(img, 0, 255)


def _pick_colour(rng: np.random.Generator, under: np.ndarray) -> np.ndarray:
    """A colour clearly visible on the background under the shape.

    Brightness must differ (so the shape shows even in grey) as well as colour; shapes are
    lighter or darker than their background at random.
    """
    lum = float(_luma(under))
    for _ in range(40):
        col = rng.uniform(0, 255, size=3).astype(np.float32)
        if (abs(float(_luma(col)) - lum) >= MIN_LUMA_CONTRAST
                and float(np.linalg.norm(col - under)) >= MIN_CONTRAST):  # fmt: skip
            return col
    # Rare (a mid-grey background): black or white, whichever is farther, is always visible.
    return np.full(3, 0.0 if lum > 127.5 else 255.0, dtype=np.float32)


def _paste(img: np.ndarray, mask: Image.Image, x0: int, y0: int, colour, rng) -> None:
    m = np.asarray(mask, np.float32)[..., None] / 255
    h, w = m.shape[:2]
    region = img[y0 : y0 + h, x0 : x0 + w]
    # A slight shading across the shape so it is not a flat stencil.
    shade = 1 + rng.uniform(-0.12, 0.12) * np.linspace(-1, 1, w, dtype=np.float32)[None, :, None]
    fill = np.clip(colour * shade, 0, 255)
    region[:] = region * (1 - m) + fill * m


def _area(mask: Image.Image) -> float:
    return float(np.asarray(mask, np.float64).sum() / 255)


def _box_of(mask: Image.Image, x0: int, y0: int) -> tuple[int, int, int, int]:
    bx0, by0, bx1, by1 = mask.point(lambda v: 255 if v >= 64 else 0).getbbox()
    return (x0 + bx0, y0 + by0, x0 + bx1, y0 + by1)


def _place(rng, radius: float, avoid=None) -> tuple[int, int] | None:
    """Top-left corner of a patch for a shape of this radius, away from ``avoid``'s box."""
    half = math.ceil(radius) + 1
    lo, hi = 1, IMAGE_SIZE - 2 * half - 1
    for _ in range(50):
        x0, y0 = (int(v) for v in rng.integers(lo, hi + 1, size=2))
        if avoid is None:
            return x0, y0
        ax0, ay0, ax1, ay1 = avoid
        # The patch (2*half square) must not come within GAP of the other shape's box.
        if (x0 + 2 * half + GAP <= ax0 or x0 >= ax1 + GAP
                or y0 + 2 * half + GAP <= ay0 or y0 >= ay1 + GAP):  # fmt: skip
            return x0, y0
    return None


def render(seed: int, index: int, distractor: bool | None = None) -> ShapeSample:
    """Draw item ``index`` of the data set ``seed``.

    ``distractor``: None lets the generator decide (half the images have one); True or
    False forces it. Forcing changes the random stream, so a forced image is not the same
    as the unforced image at the same index.
    """
    code = {None: 0, False: 1, True: 2}[distractor]
    rng = np.random.default_rng([int(seed), int(index), code])
    img = _background(rng)
    want_distractor = rng.random() < 0.5 if distractor is None else distractor

    label = int(rng.integers(len(CLASSES)))
    radius = rng.uniform(*(MAIN_RADIUS_WITH_DISTRACTOR if want_distractor else MAIN_RADIUS))
    angle = rng.uniform(0, 2 * math.pi)
    stretch = rng.uniform(0.85, 1.15)
    mask = _draw_mask(CLASSES[label], radius, angle, stretch)
    x0, y0 = _place(rng, radius)
    side = mask.size[0]
    under = img[y0 : y0 + side, x0 : x0 + side].reshape(-1, 3).mean(0)
    _paste(img, mask, x0, y0, _pick_colour(rng, under), rng)
    area = _area(mask)
    target = ShapeInfo(label, _box_of(mask, x0, y0), radius, area)

    other = None
    if want_distractor:
        d_stretch = rng.uniform(0.85, 1.15)
        # Classes whose smallest allowed size still fits under the area limit.
        fits = [
            c for c in range(len(CLASSES))
            if c != label and area_factor(CLASSES[c]) * d_stretch * DISTRACTOR_RADIUS_MIN**2
            <= DISTRACTOR_MAX_AREA * area
        ]  # fmt: skip
        if fits:
            d_label = fits[int(rng.integers(len(fits)))]
            k = area_factor(CLASSES[d_label]) * d_stretch
            hi = math.sqrt(DISTRACTOR_MAX_AREA * area / k)
            spot = None
            for _ in range(10):
                d_radius = rng.uniform(DISTRACTOR_RADIUS_MIN, hi)
                spot = _place(rng, d_radius, avoid=target.box)
                if spot is not None:
                    break
                hi = max(DISTRACTOR_RADIUS_MIN, hi * 0.85)
            if spot is not None:
                d_angle = rng.uniform(0, 2 * math.pi)
                d_mask = _draw_mask(CLASSES[d_label], d_radius, d_angle, d_stretch)
                limit = DISTRACTOR_MAX_AREA * area
                if _area(d_mask) > limit:  # the area factor is approximate: shrink to fit
                    d_radius *= math.sqrt(limit / _area(d_mask)) * 0.99
                    d_mask = _draw_mask(CLASSES[d_label], d_radius, d_angle, d_stretch)
                dx, dy = spot
                d_side = d_mask.size[0]
                d_under = img[dy : dy + d_side, dx : dx + d_side].reshape(-1, 3).mean(0)
                _paste(img, d_mask, dx, dy, _pick_colour(rng, d_under), rng)
                other = ShapeInfo(d_label, _box_of(d_mask, dx, dy), d_radius, _area(d_mask))

    # Camera-like finish: a little blur sometimes, then sensor noise over everything.
    out = Image.fromarray(img.astype(np.uint8))
    if rng.random() < 0.25:
        out = out.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.9)))
    arr = np.asarray(out, np.float32) + rng.normal(
        0, rng.uniform(0, 6), size=(IMAGE_SIZE,) * 2 + (1,)
    )
    out = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return ShapeSample(out, target, other)


NO_BOX = (-1, -1, -1, -1)


class ShapesDataset(Dataset):
    """``length`` drawn images; item i depends only on (seed, i).

    Each item is a dict: ``image`` uint8 tensor (3, H, W), ``label`` (the main shape's
    class), ``box`` (its x0, y0, x1, y1), ``distractor`` (its class, or -1) and
    ``distractor_box`` (or -1s). Normalisation is left to the model's preprocessing.
    """

    def __init__(self, length: int, seed: int, distractor: bool | None = None):
        if length < 0:
            raise ValueError(f"ShapesDataset: length must be >= 0, got {length}")
        self.length = int(length)
        self.seed = int(seed)
        self.distractor = distractor

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.length:
            raise IndexError(f"ShapesDataset: index {i} out of range 0..{self.length - 1}")
        s = render(self.seed, i, self.distractor)
        d = s.distractor
        return {
            "image": torch.from_numpy(np.array(s.image)).permute(2, 0, 1).contiguous(),
            "label": torch.tensor(s.target.label),
            "box": torch.tensor(s.target.box),
            "distractor": torch.tensor(d.label if d else -1),
            "distractor_box": torch.tensor(d.box if d else NO_BOX),
        }
