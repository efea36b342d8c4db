"""16-bit, 32-bit and float images to 8 bits: by their type's range, or stretched to their data's.

The default scales a value as a fraction of its type's range, as torchvision's
`transforms.v2.ToDtype(torch.float32, scale=True)` does (uint16 / 65535, uint8 / 255): a
16-bit PNG and its 8-bit twin (every value x 257) give the same model input, and a dark
16-bit image stays dark. What each of Pillow's high-depth modes counts as its type:

- "I;16", "I;16B", "I;16L", "I;16N" (16-bit PNG, TIFF, JPEG 2000): 0..65535.
- "I" (32-bit signed): the sample depth the file declares, a TIFF's BitsPerSample and
  SampleFormat (0..2**31 - 1 for signed 32-bit, as ToDtype does for int32). Without one,
  16 bits: Pillow opens 16-bit PGM/PPM as "I", with their maxval scaled to 65535.
  Negative values are below the range and show as black.
- "F" (32-bit float, TIFF): 0..1, the convention of torchvision and of float images in numpy.
  Values outside are clipped; NaN and infinities are black.

`stretch=True` maps the data's own finite min..max to 0..255 instead: a 12-bit sensor image
stored in 16 bits (0..4095) or a depth map then uses the whole range. That choice belongs
to the user (the image pane's "Stretch levels", `analyse --stretch`) and is recorded with
each run; a constant image has no range and is scaled by its type's either way.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

HIGH_DEPTH_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N", "F"})
_TIFF_BITS, _TIFF_SAMPLE_FORMAT = 258, 339
_SIGNED, _FLOAT = 2, 3


def type_range(im: Image.Image) -> tuple[float, float]:
    """(low, high) of the values `im`'s type can hold; call it on the image as opened (a
    transposed copy no longer has the file's tags)."""
    if im.mode == "F":
        return 0.0, 1.0
    if im.mode != "I":
        return 0.0, 65535.0
    tags = getattr(im, "tag_v2", None)
    bits = tags.get(_TIFF_BITS) if tags is not None else None
    bits = bits[0] if isinstance(bits, tuple) and bits else bits
    if not isinstance(bits, int) or not 1 <= bits <= 32:
        return 0.0, 65535.0
    fmt = tags.get(_TIFF_SAMPLE_FORMAT)
    fmt = fmt[0] if isinstance(fmt, tuple) and fmt else fmt
    if fmt == _FLOAT:
        return 0.0, 1.0
    if fmt == _SIGNED:
        return 0.0, float(2 ** (bits - 1) - 1)
    return 0.0, float(2**bits - 1)


def to_rgb8(
    im: Image.Image,
    *,
    stretch: bool = False,
    value_range: tuple[float, float] | None = None,
    notes: list[str] | None = None,
) -> Image.Image:
    """A gray RGB image of a high-depth one, by its type's range (`value_range`, default
    `type_range(im)`) or, with `stretch`, by its data's finite min..max. Adds to `notes`
    what was done, in words."""
    notes = notes if notes is not None else []
    lo, hi = value_range or type_range(im)
    a = np.array(im, dtype=np.float32)  # one working copy, scaled in place (large scans)
    finite = np.isfinite(a)
    if stretch:
        values = a[finite]
        if values.size and values.max() > values.min():
            lo, hi = float(values.min()), float(values.max())
            notes.append(f"{im.mode} values {lo:g}..{hi:g} stretched to 0..255")
        else:
            notes.append(f"{im.mode} image is constant: scaled by its type's range {lo:g}..{hi:g}")
    else:
        notes.append(f"{im.mode} values scaled by the type's range {lo:g}..{hi:g}")
    a -= lo
    a *= 255.0 / (hi - lo)
    a[~finite] = 0.0
    np.clip(a, 0.0, 255.0, out=a)
    gray = np.rint(a, out=a).astype(np.uint8)
    return Image.fromarray(np.repeat(gray[:, :, None], 3, axis=2))
