"""The model's input step: resize, center-crop, normalise, and the way back for display.

`Preprocess` gives the same tensor as torchvision's `weights.transforms()` (PIL resize and
crop, no torchvision import) and maps results (tensors, CAMs) back onto the picture, and
boxes both ways between the picture's pixels and the model input's (occlusion edits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from inspector.core.inputs.images import as_rgb

if TYPE_CHECKING:
    import torch

_PRESET_ATTRS = ("crop_size", "resize_size", "mean", "std", "interpolation")
_INTERPOLATIONS = ("nearest", "nearest-exact", "bilinear", "bicubic", "box", "hamming", "lanczos")


@dataclass(frozen=True)
class Preprocess:
    """Resize, center-crop and normalize, as torchvision's ImageClassification preset does.

    crop_size is (height, width) of the model input. resize_size resizes the shorter side to
    that many pixels first (keeping the aspect ratio); None resizes straight to crop_size.
    """

    crop_size: tuple[int, int]
    resize_size: int | None
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        crop = tuple(int(v) for v in self.crop_size)
        if len(crop) != 2 or min(crop) < 1:
            raise ValueError(f"crop_size must be (height, width) > 0, got {self.crop_size!r}")
        if self.resize_size is not None and int(self.resize_size) < 1:
            raise ValueError(f"resize_size must be > 0 or None, got {self.resize_size!r}")
        mean = tuple(float(v) for v in self.mean)
        std = tuple(float(v) for v in self.std)
        if len(mean) != 3 or len(std) != 3 or 0.0 in std:
            raise ValueError(f"mean and std need 3 values, std non-zero: {mean}, {std}")
        if self.interpolation not in _INTERPOLATIONS:
            raise ValueError(f"interpolation must be one of {_INTERPOLATIONS}")
        object.__setattr__(self, "crop_size", crop)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)
        if self.resize_size is not None:
            object.__setattr__(self, "resize_size", int(self.resize_size))

    @classmethod
    def from_transforms(cls, t) -> Preprocess:
        """From torchvision's ImageClassification preset (`weights.transforms()`).

        Its crop_size and resize_size are one-element lists ([224], [256]) in torchvision
        0.29; plain ints and (h, w) pairs are accepted too.
        """
        missing = [a for a in _PRESET_ATTRS if not hasattr(t, a)]
        if missing:
            raise TypeError(
                f"expected torchvision's ImageClassification preset (weights.transforms()), "
                f"got {type(t).__name__} without {', '.join(missing)}"
            )
        crop = _as_list(t.crop_size, "crop_size")
        crop_hw = (crop[0], crop[0]) if len(crop) == 1 else (crop[0], crop[1])
        resize = _as_list(t.resize_size, "resize_size") if t.resize_size is not None else None
        if resize is not None and len(resize) == 2:
            if tuple(resize) != crop_hw:
                raise ValueError(f"a resize to {resize} then a crop to {crop} is not supported")
            resize = None
        interpolation = getattr(t.interpolation, "value", t.interpolation)
        return cls(
            crop_size=crop_hw,
            resize_size=resize[0] if resize else None,
            mean=tuple(t.mean),
            std=tuple(t.std),
            interpolation=str(interpolation),
        )

    def __call__(self, img: Image.Image) -> torch.Tensor:
        """(3, H, W) float32, normalized, equal to the preset's output (tested to 1e-5).

        The same steps as torchvision's PIL path (PIL resize, center crop padded with
        zeros, /255, normalize) without importing torchvision, which costs seconds on the
        path to the app's first frames.
        """
        return self._input(self._crop(img))[0]

    def prepare(self, img: Image.Image) -> PreparedImage:
        """The model input of `img` and its picture, made now (a video's decoding thread
        does this ahead of the run, off the inference worker)."""
        x, crop = self._input(self._crop(img))
        crop.flags.writeable = False  # shared by every run of this frame
        return PreparedImage(img, x, crop, self)

    def _crop(self, img: Image.Image) -> Image.Image:
        if img.mode != "RGB":
            img = as_rgb(img)
        w, h = self.resized_size(img.size)
        if (w, h) != img.size:
            img = img.resize((w, h), _PIL_RESAMPLE[self.interpolation])
        ch, cw = self.crop_size
        left, top = _crop_start(w, cw), _crop_start(h, ch)
        if (left, top, cw, ch) != (0, 0, w, h):
            img = img.crop((left, top, left + cw, top + ch))  # outside the image: zeros
        return img

    def _input(self, crop: Image.Image) -> tuple[torch.Tensor, np.ndarray]:
        """The normalized (3, H, W) tensor of an RGB crop, and the crop's H x W x 3 uint8
        pixels, which are what `to_display` of that tensor gives back."""
        import torch

        pixels = np.array(crop, dtype=np.uint8)
        x = torch.from_numpy(pixels).permute(2, 0, 1).float().div(255)
        mean = torch.tensor(self.mean, dtype=torch.float32)[:, None, None]
        std = torch.tensor(self.std, dtype=torch.float32)[:, None, None]
        return x.sub_(mean).div_(std), pixels

    def resized_size(self, original_size: tuple[int, int]) -> tuple[int, int]:
        """(width, height) after the resize step, as torchvision computes it."""
        w, h = original_size
        if w < 1 or h < 1:
            raise ValueError(f"an image size must be positive, got {original_size}")
        if self.resize_size is None:
            return self.crop_size[1], self.crop_size[0]
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = self.resize_size, int(self.resize_size * long / short)
        return (new_short, new_long) if w <= h else (new_long, new_short)

    def crop_offset(self, original_size: tuple[int, int]) -> tuple[int, int]:
        """(left, top) of the crop in the resized image; negative where it was padded."""
        rw, rh = self.resized_size(original_size)
        ch, cw = self.crop_size
        return _crop_start(rw, cw), _crop_start(rh, ch)

    def box_to_original(self, box: Sequence[float], original_size: tuple[int, int]
                        ) -> tuple[float, float, float, float]:
        """Where a box (x0, y0, x1, y1) of model-input pixels lies on the original
        (width, height) picture, in its pixel coordinates (pixel k spans k..k+1): the inverse
        of the resize and centre crop. It may reach outside the picture where the crop was
        padded."""
        (sx, sy), (left, top) = self._scale(original_size), self.crop_offset(original_size)
        x0, y0, x1, y1 = box
        return (x0 + left) * sx, (y0 + top) * sy, (x1 + left) * sx, (y1 + top) * sy

    def box_to_input(self, box: Sequence[float], original_size: tuple[int, int]
                     ) -> tuple[tuple[int, int, int, int] | None, bool]:
        """The model-input pixels (x0, y0, x1, y1; x1, y1 exclusive) that a box of the
        original (width, height) picture covers after the resize and centre crop, and
        whether the box had to be clipped to the crop (part of it is never seen by the
        model). None, True when none of it is in the crop."""
        (sx, sy), (left, top) = self._scale(original_size), self.crop_offset(original_size)
        x0, y0, x1, y1 = box
        return pixel_box((x0 / sx - left, y0 / sy - top, x1 / sx - left, y1 / sy - top),
                         self.crop_size[1], self.crop_size[0])

    def _scale(self, original_size: tuple[int, int]) -> tuple[float, float]:
        """Original pixels per resized pixel, along x and y."""
        rw, rh = self.resized_size(original_size)
        return original_size[0] / rw, original_size[1] / rh

    def to_display(self, x: torch.Tensor) -> np.ndarray:
        """Un-normalize a (3, H, W) or (1, 3, H, W) input into an H x W x 3 uint8 image."""
        if x.dim() == 4 and x.shape[0] == 1:
            x = x[0]
        if x.dim() != 3 or x.shape[0] != 3:
            raise ValueError(f"expected a (3, H, W) or (1, 3, H, W) tensor, got {tuple(x.shape)}")
        import torch

        x = x.detach().to("cpu", dtype=torch.float32)
        mean = torch.tensor(self.mean)[:, None, None]
        std = torch.tensor(self.std)[:, None, None]
        u8 = (x * std + mean).mul(255.0).round().clamp(0, 255).to(torch.uint8)
        return u8.permute(1, 2, 0).contiguous().numpy()

    def to_original(self, m: np.ndarray, original_size: tuple[int, int]) -> np.ndarray:
        """Map an H x W map over the model input onto the original (width, height) image.

        Inverts resize + center crop with bilinear interpolation. The map may have any size
        (a 7 x 7 CAM or a 224 x 224 one): it is taken to cover the crop. Pixels of the original
        outside the crop are 0. Returns float32 (height, width).
        """
        m = np.asarray(m, dtype=np.float32)
        if m.ndim != 2 or min(m.shape) < 1:
            raise ValueError(f"expected an H x W map, got shape {m.shape}")
        w, h = original_size
        rw, rh = self.resized_size(original_size)
        left, top = self.crop_offset(original_size)
        ch, cw = self.crop_size
        x0, x1, wx, inside_x = _axis(w, rw, left, cw, m.shape[1])
        y0, y1, wy, inside_y = _axis(h, rh, top, ch, m.shape[0])
        rows = m[:, x0] * (1.0 - wx) + m[:, x1] * wx  # (map height, w)
        out = rows[y0] * (1.0 - wy)[:, None]
        out += rows[y1] * wy[:, None]
        out *= inside_y[:, None] & inside_x[None, :]
        return out


@dataclass(frozen=True, eq=False)
class PreparedImage:
    """An RGB picture with its model input made ahead of the run (`Preprocess.prepare`).
    Session.run takes it as an image: a model whose Preprocess equals `preprocess` runs `x`
    as it is, any other preprocesses `image` (a model loaded since it was made)."""

    image: Image.Image
    x: torch.Tensor  # (3, H, W) float32, normalized
    display: np.ndarray  # H x W x 3 uint8, read-only: the crop the model sees
    preprocess: Preprocess

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size


def pixel_box(box: Sequence[float], width: int, height: int
              ) -> tuple[tuple[int, int, int, int] | None, bool]:
    """The whole pixels of a width x height picture that a box in continuous coordinates
    (pixel k spans k..k+1) touches, as (x0, y0, x1, y1) with x1, y1 exclusive, and whether
    the box reached past the picture's edges (clipped); None when it touches no pixel."""
    eps = 1e-6  # a corner computed as 47.9999999 is on pixel 48's edge, not inside 47
    x0, y0 = math.floor(min(box[0], box[2]) + eps), math.floor(min(box[1], box[3]) + eps)
    x1, y1 = math.ceil(max(box[0], box[2]) - eps), math.ceil(max(box[1], box[3]) - eps)
    clipped = x0 < 0 or y0 < 0 or x1 > width or y1 > height
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(width, x1), min(height, y1)
    if x1 <= x0 or y1 <= y0:
        return None, True
    return (x0, y0, x1, y1), clipped


def _as_list(value, name: str) -> list[int]:
    values = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    if len(values) not in (1, 2):
        raise ValueError(f"{name} must have 1 or 2 values, got {value!r}")
    return values


_PIL_RESAMPLE = {
    "nearest": Image.Resampling.NEAREST,
    "nearest-exact": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "box": Image.Resampling.BOX,
    "hamming": Image.Resampling.HAMMING,
    "lanczos": Image.Resampling.LANCZOS,
}


def _crop_start(size: int, crop: int) -> int:
    # torchvision's center_crop: pads by (crop - size) // 2 on the leading side when the crop
    # is larger, otherwise starts at int(round((size - crop) / 2)) (round half to even).
    if crop > size:
        return -((crop - size) // 2)
    return int(round((size - crop) / 2.0))


def _axis(n_out: int, n_resized: int, start: int, n_crop: int, n_map: int):
    """Source indices and weights along one axis, for pixel centers of the original image."""
    crop_coord = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_resized / n_out) - start
    inside = (crop_coord >= 0.0) & (crop_coord < n_crop)
    u = np.clip(crop_coord * (n_map / n_crop) - 0.5, 0.0, n_map - 1.0)
    i0 = np.floor(u).astype(np.intp)
    i1 = np.minimum(i0 + 1, n_map - 1)
    return i0, i1, (u - i0).astype(np.float32), inside
