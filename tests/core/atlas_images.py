"""A small drawn image folder for the atlas tests: shapes in colours, and broken files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

BROKEN = ("notes.png", "cut.png")  # a text file named .png, a PNG cut short


def draw_folder(folder: Path, count: int = 60, size: tuple[int, int] = (48, 40),
                seed: int = 0) -> Path:
    """`count` images of `size` (width, height): a noisy background and one or two shapes in
    random colours and places; plus the files named in BROKEN."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    w, h = size
    for i in range(count):
        base = rng.integers(0, 256, 3)
        noise = rng.integers(-20, 21, (h, w, 3))
        img = Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(1, 3))):
            x0, y0 = int(rng.integers(0, w - 8)), int(rng.integers(0, h - 8))
            x1, y1 = x0 + int(rng.integers(6, w // 2)), y0 + int(rng.integers(6, h // 2))
            colour = tuple(int(c) for c in rng.integers(0, 256, 3))
            kind = int(rng.integers(0, 3))
            if kind == 0:
                draw.ellipse((x0, y0, x1, y1), fill=colour)
            elif kind == 1:
                draw.rectangle((x0, y0, x1, y1), fill=colour)
            else:
                draw.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=colour)
        sub = folder / ("a" if i % 2 else "b")
        sub.mkdir(exist_ok=True)
        img.save(sub / f"img{i:03d}.png")
    (folder / BROKEN[0]).write_text("this is not a picture\n")
    whole = folder / "b" / "img000.png"
    data = whole.read_bytes()
    (folder / BROKEN[1]).write_bytes(data[: len(data) // 2])
    return folder
