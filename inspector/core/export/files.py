"""Files from a run: NPZ arrays, PNG overlays and activation mosaics, TensorBoard logs.

Everything here takes numpy arrays or CPU tensors and writes files; nothing runs a model.
TensorBoard is an optional extra: `TensorBoardLog` imports it only when created and raises
`TensorBoardMissing`, whose message says how to install it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from inspector.core.tokens import detect_layout, to_spatial

TENSORBOARD_HINT = (
    "TensorBoard logging needs the optional 'tensorboard' package: "
    "pip install 'network-inspector[tensorboard]' (or pip install tensorboard)"
)

# A mosaic larger than this many pixels a side keeps only the first channels that fit.
MAX_MOSAIC_SIDE = 4096


# -- arrays -------------------------------------------------------------------------------------


def save_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray | torch.Tensor]) -> Path:
    """Write arrays (keys may contain '/', as in 'cam/gradcam') to an NPZ.

    Not compressed: zlib saves little on float activations and took longer than the
    forward pass (measured: 0.9 s for resnet18's conv1 activation and gradient)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    plain = {k: _numpy(v) for k, v in arrays.items()}
    # np.savez appends .npz to a name without it; write to a temporary name, then move, so a
    # reader never sees half a file.
    tmp = path.with_name(path.name + ".part.npz")
    np.savez(tmp, **plain)
    os.replace(tmp, path)
    return path


def _numpy(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        v = v.detach().to("cpu")
        if v.dtype in (torch.float16, torch.bfloat16, torch.float64):
            v = v.float()
        return v.numpy()
    return np.asarray(v)


# -- colour -------------------------------------------------------------------------------------

# The "jet" colour map most CAM papers and tools use (dark blue -> cyan -> yellow -> dark red),
# as piecewise-linear channels: no matplotlib needed.
_JET_X = np.array([0.0, 0.11, 0.125, 0.34, 0.35, 0.375, 0.64, 0.65, 0.66, 0.89, 0.91, 1.0])
_JET_R = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5])
_JET_G = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
_JET_B = np.array([0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
_LUT = np.stack(
    [np.interp(np.linspace(0, 1, 256), _JET_X, c) for c in (_JET_R, _JET_G, _JET_B)], axis=1
)
_LUT = np.round(_LUT * 255).astype(np.uint8)


def colorize(m: np.ndarray) -> np.ndarray:
    """An H x W map in [0, 1] as H x W x 3 uint8 in the jet colour map."""
    m = np.nan_to_num(np.asarray(m, dtype=np.float32), nan=0.0)
    return _LUT[np.clip(np.rint(m * 255), 0, 255).astype(np.uint8)]


def overlay(image: np.ndarray, cam: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """The CAM (H x W in [0, 1], the image's size) coloured and blended over the image.
    (The PNGs analyse writes, with their legend: batch.figures.map_figure.)"""
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if cam.shape != image.shape[:2]:
        raise ValueError(f"CAM of {cam.shape} for an image of {image.shape[:2]}")
    heat = colorize(cam).astype(np.float32)
    out = image[:, :, :3].astype(np.float32) * (1.0 - alpha) + heat * alpha
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


# -- mosaics --------------------------------------------------------------------------------------


def as_channels(t: torch.Tensor | np.ndarray, input_hw: tuple[int, int] | None) -> torch.Tensor | None:
    """One image's activation as (C, h, w), whatever its layout; None when it is not spatial
    (a vector of logits). The batch's first image is taken."""
    t = torch.as_tensor(t).detach()
    if t.ndim == 3 and detect_layout((1, *t.shape), input_hw) is not None:
        t = t[None]
    if t.ndim not in (3, 4):
        return None
    layout = detect_layout(tuple(t.shape), input_hw)
    if layout is None:
        return None
    return to_spatial(t[:1], layout)[0]


def mosaic_channels(shape: tuple[int, int, int], padding: int = 1) -> int:
    """How many of the channels of a (C, h, w) activation its mosaic shows: the first ones
    that fit MAX_MOSAIC_SIDE."""
    c, h, w = shape
    per_side = max(1, (MAX_MOSAIC_SIDE + padding) // (max(h, w) + padding))
    return min(c, per_side * per_side)


def mosaic(channels: torch.Tensor, padding: int = 1, nrow: int | None = None) -> np.ndarray:
    """(C, h, w) -> a grayscale uint8 grid, each channel scaled to its own [min, max] (a
    constant channel is black), laid out by torchvision.utils.make_grid."""
    from torchvision.utils import make_grid

    c = mosaic_channels(tuple(channels.shape), padding)
    x = channels[:c].detach().float().cpu()
    x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    lo = x.amin(dim=(1, 2), keepdim=True)
    span = x.amax(dim=(1, 2), keepdim=True) - lo
    x = torch.where(span > 0, (x - lo) / span.clamp_min(1e-12), torch.zeros_like(x))
    nrow = nrow or math.ceil(math.sqrt(c))
    grid = make_grid(x[:, None], nrow=nrow, padding=padding, pad_value=0.25)
    return (grid[0] * 255).round().clamp(0, 255).to(torch.uint8).numpy()


def save_png(path: str | os.PathLike, image: np.ndarray) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Through a .part name: a write that fails (a full disk) leaves no PNG that looks whole,
    # and a stopped run's .part files are removed by the next (batch.engine.out_dir.remove_partial).
    part = path.with_name(path.name + ".part")
    try:
        # Level 1: a fraction of the default's time for files a few percent larger.
        Image.fromarray(np.ascontiguousarray(image)).save(part, format="PNG", compress_level=1)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


# -- TensorBoard ---------------------------------------------------------------------------------


class TensorBoardMissing(ImportError):
    def __init__(self) -> None:
        super().__init__(TENSORBOARD_HINT)


class TensorBoardLog:
    """A thin wrapper over torch.utils.tensorboard.SummaryWriter (images as H x W [x 3] uint8)."""

    def __init__(self, log_dir: str | os.PathLike) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise TensorBoardMissing() from e
        self.log_dir = Path(log_dir)
        self._writer = SummaryWriter(log_dir=str(self.log_dir))

    def image(self, tag: str, image: np.ndarray, step: int) -> None:
        dataformats = "HW" if image.ndim == 2 else "HWC"
        self._writer.add_image(tag, image, step, dataformats=dataformats)

    def histogram(self, tag: str, values: np.ndarray | torch.Tensor, step: int) -> None:
        v = _numpy(values).astype(np.float32, copy=False).ravel()
        v = v[np.isfinite(v)]
        if v.size:
            self._writer.add_histogram(tag, v, step)

    def text(self, tag: str, text: str, step: int = 0) -> None:
        self._writer.add_text(tag, text, step)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()

    def __enter__(self) -> TensorBoardLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
