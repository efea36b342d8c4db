"""Image files in: decoding, checked and explained.

`load_image` turns any file Pillow can read into an upright 8-bit RGB image or raises an
`ImageLoadError` that names the file and says, in words a user understands, what is wrong.
`expand_paths` turns what the user dropped or typed (files and folders) into a sorted list of
image files. What happens next (resize, crop, normalise) is `preprocess.Preprocess`.

No torch here: the GUI uses `load_image` and `IMAGE_EXTENSIONS` before torch is imported
(importing torchvision takes seconds, and the window is shown first).
"""

from __future__ import annotations

import os
import re
import struct
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image, ImageOps, JpegImagePlugin, UnidentifiedImageError

from inspector.core.inputs.high_depth import HIGH_DEPTH_MODES, to_rgb8, type_range

# Formats the stock Pillow wheels decode. Folder expansion keeps only these, so a folder of
# photos with sidecar files (.xmp, .txt, .json) expands to the photos.
IMAGE_EXTENSIONS = frozenset(
    {
        ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".apng", ".bmp", ".dib", ".gif",
        ".tif", ".tiff", ".webp", ".avif", ".ppm", ".pgm", ".pbm", ".pnm", ".pfm",
        ".tga", ".ico", ".jp2", ".j2k", ".jpx", ".qoi", ".sgi", ".rgb", ".pcx",
    }
)  # fmt: skip

# The pixel count above which Pillow itself refuses to open a file (DecompressionBombError at
# 2 x Image.MAX_IMAGE_PIXELS with its default). Hard-coded rather than read from Pillow, whose
# limit is a process-wide setting that any other code may change or set to None.
MAX_PIXELS = 178_956_970

# Above this (Pillow's DecompressionBombWarning threshold, half of MAX_PIXELS) an image is
# decoded reduced: the model sees about 224 pixels and the window at most a screen, while a
# 100-megapixel image takes over a gigabyte through decoding and conversion. JPEG decodes
# at 1/2, 1/4 or 1/8 scale directly (Image.draft); other formats are decoded and then
# reduced (Image.reduce) before any conversion copies them.
LARGE_PIXELS = MAX_PIXELS // 2

# Transparent images are composited over white: almost every transparent image a user has
# (logos, icons, cut-out product shots) was made to be seen on a white page, browsers and
# file viewers show it that way, and ImageNet's product photos are on white. What the model
# sees is then what the user expects it to see.
BACKGROUND = (255, 255, 255)


class ImageLoadError(Exception):
    """A file that cannot be used as an image; `str()` is "<path>: <reason>"."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(path, reason)  # keeps the exception picklable
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


# --------------------------------------------------------------------------- loading


def load_image(
    path: str | os.PathLike[str],
    *,
    background: tuple[int, int, int] = BACKGROUND,
    stretch: bool = False,
) -> Image.Image:
    """Decode `path` into an upright RGB image, fully loaded (the file is closed on return).

    EXIF orientation is applied. 16-bit, 32-bit and float images are scaled by their type's
    range (16-bit / 65535, as torchvision's ToDtype(scale=True)), or with `stretch` by their
    data's own min..max (see core.inputs.high_depth); transparency is composited over `background`,
    CMYK and palette images are converted. `img.info` keeps "source_format", "source_mode",
    "source_size" (width, height in the file), "load_notes" (what was changed, in words)
    and "size_note" (the note that says it was decoded reduced, or None).

    Raises ImageLoadError for anything that is not a readable image, and for images over
    MAX_PIXELS; a JPEG over the limit is decoded at 1/2, 1/4 or 1/8 scale instead (see
    _open_checked). An image over LARGE_PIXELS is decoded reduced to fit under it, and its
    note says so in one line (Pillow's own DecompressionBombWarning is not printed).
    """
    path = Path(path)
    with _opened(path) as fp:
        im, file_size, notes = _open_checked(fp, path)
        fmt = im.format or path.suffix.lstrip(".").upper() or "image"
        source = (im.format, im.mode, file_size)
        try:
            im.load()
        except MemoryError:
            raise ImageLoadError(path, f"not enough memory to decode {_size(im.size)}") from None
        except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, ...
            raise ImageLoadError(path, _decode_reason(fmt, exc)) from exc

    try:
        value_range = type_range(im) if im.mode in HIGH_DEPTH_MODES else None  # file's tags
        im = _upright(_reduced(im, notes))
        rgb = _to_rgb(im, background, notes, stretch, value_range)
    except MemoryError:
        raise ImageLoadError(path, f"not enough memory to convert {_size(im.size)}") from None
    except ValueError as exc:  # a mode Pillow cannot convert (LAB without a profile, ...)
        raise ImageLoadError(path, f"cannot convert {source[1]} {fmt} data to RGB ({exc})") from exc
    rgb.info = {
        "source_format": source[0],
        "source_mode": source[1],
        "source_size": source[2],
        "load_notes": tuple(notes),
        "size_note": next((n for n in notes if n.startswith(_REDUCED)), None),
    }
    return rgb


def check_image(path: str | os.PathLike[str]) -> None:
    """ImageLoadError when `path` is no image load_image could decode, judged by its header
    alone (no pixel is decoded): for options checked before any work, on any thread."""
    path = Path(path)
    with _opened(path) as fp:
        _open_checked(fp, path)


@contextmanager
def _opened(path: Path) -> Iterator:
    """The file open for reading, its failures (missing, a folder, unreadable, empty) as
    ImageLoadError; Pillow's own limit warning silenced inside."""
    if path.is_dir():
        raise ImageLoadError(path, "is a folder, not an image file")
    try:
        with open(path, "rb") as fp, warnings.catch_warnings():
            # Pillow warns on stderr above its own limit, in words meant for a programmer;
            # load_image enforces its limits itself and says what it did in its notes.
            # (catch_warnings is not thread-safe: two threads loading at once can leave
            # this one filter in place for the process, which hides only that warning.)
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            if os.fstat(fp.fileno()).st_size == 0:
                raise ImageLoadError(path, "file is empty")
            yield fp
    except FileNotFoundError:
        raise ImageLoadError(path, "file not found") from None
    except PermissionError:
        raise ImageLoadError(path, "permission denied (the file cannot be read)") from None
    except IsADirectoryError:
        raise ImageLoadError(path, "is a folder, not an image file") from None
    except OSError as exc:  # e.g. an I/O error on a failing disk or a vanished network share
        raise ImageLoadError(path, f"cannot read the file ({exc.strerror or exc})") from exc


def _open_checked(fp, path: Path) -> tuple[Image.Image, tuple[int, int], list[str]]:
    """Open (header only) and enforce MAX_PIXELS before any pixel is decoded.

    Returns the opened image, its size in the file, and notes on what was changed.

    Pillow's own check runs inside Image.open: it warns (DecompressionBombWarning) above
    Image.MAX_IMAGE_PIXELS and raises DecompressionBombError above twice that, before the
    plugin's size is available to us. On that error the header is re-read without Pillow's
    check so the message can say how large the image claims to be, and so a large JPEG can
    still be decoded: JPEG's DCT can decode at 1/2, 1/4 or 1/8 scale (Image.draft) at a
    fraction of the memory and time. A 20000 x 20000 photo is plausible (stitched panoramas,
    scans), and the model sees 224 pixels anyway, so a JPEG over the limit is decoded at the
    smallest reduction that fits under it. Other formats cannot decode reduced and are refused.
    Under MAX_PIXELS but over LARGE_PIXELS, a JPEG is set to decode reduced the same way.
    """
    notes: list[str] = []
    try:
        im = Image.open(fp)
    except Image.DecompressionBombError:
        im = _open_without_pillow_limit(fp)
        if im is None:
            raise ImageLoadError(
                path, f"image is over the {_megapixels(MAX_PIXELS)}-megapixel limit"
            ) from None
    except UnidentifiedImageError:
        raise ImageLoadError(path, _not_an_image_reason(fp)) from None
    except (SyntaxError, ValueError, EOFError, struct.error) as exc:
        raise ImageLoadError(path, f"corrupt image header ({exc})") from None
    except OSError as exc:
        if exc.errno is not None:  # a real I/O error, reported as such by load_image
            raise
        # Pillow's own OSErrors: "Unsupported BMP compression", "unknown TIFF mode", ...
        raise ImageLoadError(path, f"unsupported or corrupt image ({exc})") from None

    w, h = im.size
    if w * h <= _reduce_above():
        return im, (w, h), notes
    too_big = f"image is {_size(im.size)}, over the {_megapixels(MAX_PIXELS)}-megapixel limit"
    jpeg = isinstance(im, JpegImagePlugin.JpegImageFile)
    if w * h > MAX_PIXELS and not jpeg:
        raise ImageLoadError(path, too_big)
    scale = _scale_under(w, h, _reduce_above())
    # draft keeps the largest reduction whose result is at least the requested size.
    if jpeg and scale is not None and im.draft(None, (w // scale, h // scale)) is not None:
        notes.append(_reduced_note(scale, (w, h)))
    if im.size[0] * im.size[1] > MAX_PIXELS:
        raise ImageLoadError(path, too_big)
    return im, (w, h), notes  # other formats over LARGE_PIXELS are reduced once decoded


def _reduce_above() -> int:
    return min(LARGE_PIXELS, MAX_PIXELS)  # read at each call: tests lower either


def _scale_under(w: int, h: int, limit: int) -> int | None:
    """The smallest of 2, 4, 8 that brings w x h to at most `limit` pixels."""
    return next((s for s in (2, 4, 8) if -(-w // s) * -(-h // s) <= limit), None)


def _reduced(im: Image.Image, notes: list[str]) -> Image.Image:
    """A decoded image still over LARGE_PIXELS (a format that cannot decode reduced) reduced
    by whole cells to fit, before the conversions that copy it."""
    w, h = im.size
    scale = _scale_under(w, h, _reduce_above()) if w * h > _reduce_above() else None
    if scale is None:
        return im
    exif = im.getexif()  # a TIFF's orientation is in its tags, which a new image lacks
    if im.mode in ("P", "PA", "1") or "transparency" in im.info:
        # Averages of palette indices or of a transparent colour key mean nothing.
        im = im.convert("RGBA" if im.has_transparency_data else "RGB")
    elif im.mode.startswith("I;16"):  # Image.reduce has no 16-bit integer modes
        im = im.convert("I")
    out = im.reduce(scale)
    if exif:
        out.info["exif"] = exif.tobytes()
    notes.append(_reduced_note(scale, (w, h)))
    return out


_REDUCED = "decoded at 1/"


def _reduced_note(scale: int, size: tuple[int, int]) -> str:
    return (f"{_REDUCED}{scale} scale: the file is {_size(size)}, more than the model "
            f"input and the screen need")


def _open_without_pillow_limit(fp) -> Image.Image | None:
    """The plugin walk Image.open does, without its pixel check; only on its bomb error."""
    fp.seek(0)
    prefix = fp.read(16)
    Image.init()
    for fmt in Image.ID:
        factory, accept = Image.OPEN[fmt]
        if accept is not None:
            verdict = accept(prefix)
            if not verdict or isinstance(verdict, str):
                continue
        fp.seek(0)
        try:
            return factory(fp, "")
        except Image.DecompressionBombError:  # plugins that check again in their own _open
            return None
        except (SyntaxError, IndexError, TypeError, ValueError, EOFError, struct.error):
            continue
    return None


# Signatures of files people drop by mistake, and of images stock Pillow cannot read.
_SIGNATURES = (
    (0, b"%PDF", "a PDF document, not an image"),
    (0, b"PK\x03\x04", "a zip archive, not an image"),
    (4, b"ftypheic", "a HEIC image, which Pillow cannot read without the pillow-heif plugin"),
    (4, b"ftypheix", "a HEIC image, which Pillow cannot read without the pillow-heif plugin"),
    (4, b"ftypmif1", "a HEIF image, which Pillow cannot read without the pillow-heif plugin"),
    (4, b"ftypisom", "an MP4 video, not an image"),
)


def _not_an_image_reason(fp) -> str:
    fp.seek(0)
    head = fp.read(4096)
    for offset, magic, reason in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return reason
    if b"\0" not in head:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as exc:  # a multi-byte character cut at 4096 is still text
            text = head[: exc.start].decode("utf-8") if exc.start > len(head) - 4 else None
        if text is not None:
            if "<svg" in text[:1024].lower():
                return "an SVG (vector) image, which Pillow cannot read"
            return "not an image file (looks like text)"
    return "not an image file (unknown format)"


def _decode_reason(fmt: str, exc: Exception) -> str:
    message = str(exc)
    if isinstance(exc, EOFError) or "truncated" in message.lower():
        return f"truncated {fmt} data (the file ends before the image does)"
    return f"corrupt {fmt} data ({message or type(exc).__name__})"


def _upright(im: Image.Image) -> Image.Image:
    # A corrupt EXIF block must not make a readable image unreadable: keep it as stored.
    try:
        return ImageOps.exif_transpose(im)
    except Exception:
        return im


def as_rgb(
    im: Image.Image, *, stretch: bool = False, background: tuple[int, int, int] = BACKGROUND
) -> Image.Image:
    """An image in memory (a script's, a pasted one) as the RGB image load_image would make
    of it: high-depth modes scaled as load_image does, transparency over `background`."""
    return _to_rgb(im, background, [], stretch, None)


def _to_rgb(
    im: Image.Image,
    background: tuple[int, int, int],
    notes: list[str],
    stretch: bool = False,
    value_range: tuple[float, float] | None = None,
) -> Image.Image:
    if im.mode in HIGH_DEPTH_MODES:
        return to_rgb8(im, stretch=stretch, value_range=value_range, notes=notes)
    if im.mode == "RGB" and "transparency" not in im.info:
        return im
    if im.has_transparency_data:
        rgba = im.convert("RGBA")
        if rgba.getextrema()[3][0] < 255:
            notes.append(f"transparency shown over RGB{tuple(background)}")
        out = Image.new("RGBA", im.size, (*background, 255))
        out.alpha_composite(rgba)
        return out.convert("RGB")
    # "1" maps to 0/255; "CMYK" uses Pillow's plain formula (no ICC colour management, as
    # in torchvision's own PIL pipeline); "P", "L", "YCbCr", "HSV" convert directly.
    return im.convert("RGB")


def _size(size: tuple[int, int]) -> str:
    w, h = size
    return f"{w} x {h} ({_megapixels(w * h)} megapixels)"


def _megapixels(n: int) -> str:
    mp = n / 1e6
    return f"{mp:.0f}" if mp >= 10 else f"{mp:.2g}"


# --------------------------------------------------------------------------- paths


def expand_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    on_missing: Callable[[ImageLoadError], None] | None = None,
) -> list[Path]:
    """Image files named by `paths`, folders expanded recursively, naturally sorted.

    A file given by name is kept when its extension is in IMAGE_EXTENSIONS (so dropping a
    mixed selection keeps the images). Inside folders, hidden files and folders (".name")
    are skipped and symlinked folders are not followed (no loops). Duplicates (the same file
    reached twice, also through a symlink) appear once. Order is natural: "img2" < "img10".

    A path that does not exist raises ImageLoadError, after all paths were checked, naming the
    first missing one; pass `on_missing` to have each reported to it instead and get the rest.
    """
    found: list[Path] = []
    missing: list[ImageLoadError] = []

    def keep(p: Path) -> None:
        if p.suffix.lower() in IMAGE_EXTENSIONS:
            found.append(p)

    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in files:
                    if not name.startswith("."):
                        keep(Path(root, name))
        elif p.exists():
            keep(p)
        else:
            missing.append(ImageLoadError(p, "no such file or folder"))
    if missing:
        if on_missing is None:
            raise missing[0]
        for err in missing:
            on_missing(err)
    # Sorted before removing duplicates, so which name of a file is kept does not depend on
    # the order os.walk happens to list a folder in.
    unique: dict[str, Path] = {}
    for p in sorted(found, key=_natural_key):
        unique.setdefault(os.path.realpath(p), p)
    return list(unique.values())


def _natural_key(p: Path) -> tuple:
    # re.split with a capture group alternates text, number, text, ... so equal positions
    # always compare str with str and int with int.
    return tuple(
        [int(t) if t.isdigit() else t.casefold() for t in re.split(r"(\d+)", part)]
        for part in p.parts
    ) + (str(p),)
