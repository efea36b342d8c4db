"""The PNG figures `analyse` writes, each readable on its own.

`map_figure`: a class activation map or an input attribution over the whole original
picture, with the jet colour bar (0 to 1: each map is scaled to [0, 1] per image), the
class explained and its probability, and the part of the picture the model never saw
(outside the centre crop) hatched and said to be so. `mosaic_figure`: an activation
mosaic with its grey scale (each channel from its own minimum, black, to its maximum,
white) and what it shows.

PIL only (Image, ImageDraw and its built-in font, scalable since Pillow 10.1; older ones get
its fixed bitmap font), numpy arrays in and out, nothing that needs a display.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from inspector.core.export.files import colorize

Box = tuple[int, int, int, int]  # (left, top, right, bottom), right and bottom exclusive

# A figure's shorter side is enlarged (by a whole factor, each pixel repeated) to at least
# this many pixels, so that its legend is legible without covering most of the picture.
MIN_SIDE = 256
TEXT = (255, 255, 255)
PANEL_DIM = 0.35  # what stays of the picture under a legend's panel
HATCH_DIM = 0.45  # what stays of the picture outside the crop, between the hatch lines
HATCH_LINE = 210  # the hatch lines' grey


@dataclass(frozen=True)
class Figure:
    image: np.ndarray  # H x W x 3 (map) or H x W (mosaic) uint8
    bar: Box  # the colour bar itself, top = 1 (max), bottom = 0 (min)
    caption: Box  # the panel with the class and the method (map), or the title (mosaic)
    note: Box | None = None  # the panel saying what is hatched; None when nothing is


def figure_size(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """(w, h) of a figure of a picture of `size`: scaled down to fit max_side (a 20000-pixel
    photo), or up by a whole factor when its shorter side is under MIN_SIDE."""
    w, h = size
    if max(w, h) > max_side:
        scale = max_side / max(w, h)
        return max(1, round(w * scale)), max(1, round(h * scale))
    k = max(1, math.ceil(MIN_SIDE / max(1, min(w, h))))
    while k > 1 and max(w, h) * k > max_side:  # a thin strip: keep under max_side
        k -= 1
    return w * k, h * k


def font(px: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """PIL's built-in font at `px` pixels; its fixed bitmap font where Pillow is older than
    10.1 or was built without FreeType."""
    try:
        return ImageFont.load_default(size=px)
    except (TypeError, OSError, ImportError):
        return ImageFont.load_default()


def _font_px(w: int, h: int) -> int:
    return int(np.clip(round(min(w, h) / 24), 11, 28))


# -- a map over the picture ---------------------------------------------------------------------


def map_figure(
    picture: np.ndarray,
    heat: np.ndarray,
    seen: np.ndarray,
    caption: list[str],
    alpha: float = 0.5,
) -> Figure:
    """The map blended over the picture where the model saw it, hatched where it did not.

    picture: H x W x 3 (or H x W) uint8, the original image at the figure's size.
    heat: H x W in [0, 1], the map already mapped onto the picture (Preprocess.to_original).
    seen: H x W, 1 where the model input covered the picture (the centre crop), else 0.
    caption: lines for the top-left panel ("circle 93.1%", "Grad-CAM at layer4").
    """
    picture = np.asarray(picture)
    if picture.ndim == 2:
        picture = np.repeat(picture[:, :, None], 3, axis=2)
    picture = picture[:, :, :3]
    h, w = picture.shape[:2]
    if heat.shape != (h, w) or seen.shape != (h, w):
        raise ValueError(f"map {heat.shape} and coverage {seen.shape} for a picture of {(h, w)}")
    inside = seen >= 0.5
    out = picture.astype(np.float32)
    tint = colorize(heat).astype(np.float32)
    out[inside] = out[inside] * (1.0 - alpha) + tint[inside] * alpha
    px = _font_px(w, h)
    outside = ~inside
    if outside.any():
        _hatch(out, outside, max(6, px // 2))
    img = Image.fromarray(np.clip(np.rint(out), 0, 255).astype(np.uint8))
    f, pad = font(px), max(2, px // 4)
    draw = ImageDraw.Draw(img)
    bar, panel = _colour_bar(img, draw, f, pad, ("1", "0"))
    room = panel[0] - 2 * pad  # text keeps clear of the bar's panel
    cap = _text_panel(img, f, pad, caption, (pad, pad), room)
    note = None
    if outside.any():
        lines = _wrap("hatched: outside the model's input (the centre crop), not seen", f, room)
        height = _lines_height(f, pad, lines)
        note = _text_panel(img, f, pad, lines, (pad, max(cap[3] + pad, h - pad - height)), room)
    return Figure(np.asarray(img), bar, cap, note)


def _hatch(rgb: np.ndarray, where: np.ndarray, period: int) -> None:
    """Dim the picture where `where` is set, and draw light diagonal lines (/) there every
    `period` pixels; in place, touching only those pixels (a thin border of a big photo)."""
    ys, xs = np.nonzero(where)
    line = (xs + ys) % period < max(1, period // 4)
    rgb[ys, xs] = np.where(line[:, None], np.float32(HATCH_LINE), rgb[ys, xs] * HATCH_DIM)


def _colour_bar(img: Image.Image, draw, f, pad: int, ticks: tuple[str, str]) -> tuple[Box, Box]:
    """The colour bar in a dimmed panel at the right edge, half the picture high, with the
    top tick above it and the bottom one below; returns (bar, panel)."""
    w, h = img.size
    tick_w = max(draw.textlength(t, font=f) for t in ticks)
    line = _line_height(f)
    bar_w = max(6, line // 2)
    panel_w = int(max(bar_w, tick_w)) + 2 * pad
    bar_h = max(8, h // 2 - 2 * (line + pad))
    panel_h = bar_h + 2 * (line + pad) + 2 * pad
    x0, y0 = w - pad - panel_w, (h - panel_h) // 2
    _dim(img, (x0, y0, x0 + panel_w, y0 + panel_h))
    bx = x0 + (panel_w - bar_w) // 2
    by = y0 + pad + line + pad
    ramp = colorize(np.linspace(1.0, 0.0, bar_h, dtype=np.float32))  # bar_h x 3
    img.paste(Image.fromarray(np.repeat(ramp[:, None], bar_w, axis=1)), (bx, by))
    top, bottom = ticks
    draw.text((x0 + (panel_w - draw.textlength(top, font=f)) / 2, y0 + pad), top, fill=TEXT,
              font=f)
    draw.text((x0 + (panel_w - draw.textlength(bottom, font=f)) / 2, by + bar_h + pad), bottom,
              fill=TEXT, font=f)
    return (bx, by, bx + bar_w, by + bar_h), (x0, y0, x0 + panel_w, y0 + panel_h)


# -- a mosaic -------------------------------------------------------------------------------------


def mosaic_figure(grid: np.ndarray, title: str) -> Figure:
    """The grey mosaic (H x W uint8), enlarged as figure_size says, under a title strip and
    beside a grey scale from max (white, top) to min (black)."""
    grid = np.asarray(grid)
    gh, gw = grid.shape
    w, h = figure_size((gw, gh), max_side=1 << 30)  # a mosaic is capped where it is built
    if (w, h) != (gw, gh):
        grid = np.repeat(np.repeat(grid, h // gh, axis=0), w // gw, axis=1)
    px = _font_px(w, h)
    f, pad = font(px), max(2, px // 4)
    line = _line_height(f)
    probe = ImageDraw.Draw(Image.new("L", (1, 1)))
    bar_w = max(6, line // 2)
    side = int(max(bar_w, probe.textlength("max", font=f), probe.textlength("min", font=f)))
    side += 2 * pad
    lines = _wrap(title, f, w + side - 2 * pad)
    top = _lines_height(f, pad, lines)
    img = Image.new("L", (w + side, h + top), 32)
    img.paste(Image.fromarray(np.ascontiguousarray(grid)), (0, top))
    draw = ImageDraw.Draw(img)
    for i, text in enumerate(lines):
        draw.text((pad, pad + i * line), text, fill=255, font=f)
    bar_h = max(8, h - 2 * (line + 2 * pad))
    bx, by = w + (side - bar_w) // 2, top + pad + line + pad
    ramp = np.rint(np.linspace(255.0, 0.0, bar_h)).astype(np.uint8)
    img.paste(Image.fromarray(np.repeat(ramp[:, None], bar_w, axis=1)), (bx, by))
    draw.rectangle((bx - 1, by - 1, bx + bar_w, by + bar_h), outline=128)  # black stays visible
    for text, y in (("max", top + pad), ("min", by + bar_h + pad)):
        draw.text((w + (side - draw.textlength(text, font=f)) / 2, y), text, fill=255, font=f)
    return Figure(np.asarray(img), (bx, by, bx + bar_w, by + bar_h), (0, 0, w + side, top))


# -- text -------------------------------------------------------------------------------------------


def _line_height(f) -> int:
    left, top, right, bottom = f.getbbox("Ag")
    return int(bottom) + 3


def _lines_height(f, pad: int, lines: list[str]) -> int:
    return len(lines) * _line_height(f) + 2 * pad


def _wrap(text: str, f, width: float, max_lines: int = 3) -> list[str]:
    """Words on lines no wider than `width`; a word too long for a line, and what does not
    fit on max_lines, is cut with '...'."""
    lines: list[str] = []
    for word in text.split():
        if lines and f.getlength(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], " ".join(lines[max_lines - 1 :])]
    return [_fit(line, f, width) for line in lines]


def _fit(text: str, f, width: float) -> str:
    if f.getlength(text) <= width:
        return text
    while text and f.getlength(text + "...") > width:
        text = text[:-1]
    return text + "..."


def _text_panel(img: Image.Image, f, pad: int, lines: list[str], at: tuple[int, int],
                width: float) -> Box:
    """Lines (each wrapped to `width`) in white on a dimmed panel whose top left is `at`."""
    wrapped = [part for text in lines for part in _wrap(text, f, width, max_lines=2)]
    line = _line_height(f)
    x, y = at
    draw = ImageDraw.Draw(img)
    text_w = max((draw.textlength(t, font=f) for t in wrapped), default=0)
    box = (x, y, int(x + text_w + 2 * pad), y + _lines_height(f, pad, wrapped))
    _dim(img, box)
    draw = ImageDraw.Draw(img)
    for i, text in enumerate(wrapped):
        draw.text((x + pad, y + pad + i * line), text, fill=TEXT, font=f)
    return box


def _dim(img: Image.Image, box: Box) -> None:
    """Darken a region of the image in place (a panel that text stays readable on)."""
    region = np.asarray(img.crop(box), dtype=np.float32) * PANEL_DIM
    img.paste(Image.fromarray(region.round().astype(np.uint8)), box[:2])
