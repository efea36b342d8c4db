"""Render the app icon's PNGs (and the Windows .ico and macOS .icns) from its SVG source.

    .venv/bin/python packaging/render_icons.py          # rewrite resources/icons/*
    .venv/bin/python packaging/render_icons.py --check  # exit 1 if a PNG is missing or stale

Qt's own SVG renderer (PySide6.QtSvg, part of PySide6-Essentials) draws them, so no other
tool is needed; the .ico and .icns are packed from those PNGs by Pillow. Run it after
editing resources/icons/network-inspector.svg and commit the results: the app, the desktop
entry and the frozen builds use the PNGs, never the SVG at run time.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # so `inspector` imports from this checkout, installed or not

from inspector.resources import ICON_NAME, ICON_SIZES  # noqa: E402

ICONS = ROOT / "resources" / "icons"
SVG = ICONS / f"{ICON_NAME}.svg"
WINDOW_ICON_SIZE = 256  # `network-inspector.png`: the one file older code loads as the icon
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # the largest size a .ico holds is 256
ICNS_SIZES = (16, 32, 64, 128, 256, 512, 1024)  # 1024: the 512 px @2x entry of a Retina .icns


def render_png(svg: Path, size: int) -> bytes:
    """The SVG drawn on a transparent size x size image, as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"render_icons: {svg} is not an SVG that Qt can draw")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter, QRectF(0, 0, size, size))
    finally:
        painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.convertToFormat(QImage.Format.Format_ARGB32).save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def outputs(pngs: dict[int, bytes]) -> dict[Path, bytes]:
    """Every file this script writes, and its bytes."""
    from PIL import Image

    files = {ICONS / f"{ICON_NAME}-{size}.png": data for size, data in pngs.items()}
    files[ICONS / f"{ICON_NAME}.png"] = pngs[WINDOW_ICON_SIZE]
    # Drawn at 1024 rather than upscaled by Pillow, which would blur the Retina entry.
    pngs = {**pngs, 1024: render_png(SVG, 1024)}
    images = {size: Image.open(io.BytesIO(data)).convert("RGBA") for size, data in pngs.items()}

    ico = io.BytesIO()
    # Pillow keeps the appended image whose size matches each entry of `sizes`.
    images[256].save(ico, "ICO", sizes=[(s, s) for s in ICO_SIZES],
                     append_images=[images[s] for s in ICO_SIZES if s != 256])
    files[ICONS / f"{ICON_NAME}.ico"] = ico.getvalue()

    icns = io.BytesIO()
    images[1024].save(icns, "ICNS", append_images=[images[s] for s in ICNS_SIZES if s != 1024])
    files[ICONS / f"{ICON_NAME}.icns"] = icns.getvalue()
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a PNG is missing or differs from the SVG")
    args = parser.parse_args(argv)

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no display needed
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # noqa: F841
    pngs = {size: render_png(SVG, size) for size in ICON_SIZES}
    if args.check:
        stale = [size for size, data in pngs.items()
                 if not _same_pixels(ICONS / f"{ICON_NAME}-{size}.png", data)]
        if stale:
            print(f"render_icons: stale or missing PNGs for sizes {stale}; run "
                  f"packaging/render_icons.py", file=sys.stderr)
            return 1
        print(f"render_icons: {len(pngs)} PNGs match {SVG.name}")
        return 0
    for path, data in outputs(pngs).items():
        path.write_bytes(data)
        print(f"wrote {path.relative_to(ROOT)} ({len(data):,} bytes)")
    return 0


def _same_pixels(path: Path, data: bytes) -> bool:
    # Compare pixels, not bytes: PNG encoders of other Qt versions compress differently.
    from PIL import Image, ImageChops

    if not path.is_file():
        return False
    old = Image.open(path).convert("RGBA")
    new = Image.open(io.BytesIO(data)).convert("RGBA")
    if old.size != new.size:
        return False
    # Anti-aliasing may differ by a level or two between Qt versions.
    return max(high for _low, high in ImageChops.difference(old, new).getextrema()) <= 8


if __name__ == "__main__":
    raise SystemExit(main())
