"""Cheap statistics and previews of a tensor, computed where the tensor lives.

A hook runs this on the worker thread for every captured tensor, so it must cost little.
On the CPU, float32 tensors (nearly all of them) go through one fused pass
(`fused_stats`, a compiled kernel) that reads each value once. Elsewhere (GPUs, other
dtypes, tensors with NaN or inf, or where the kernel was not built) torch reductions run on the tensor's
device: each one pass along the contiguous last dimension of a (batch, channel, rest)
view, nothing of the size of the tensor allocated but the sign trick's temporary, and
the results cross to the CPU as one small tensor (one device sync per tensor).
`torch.std_mean` costs 2-3x a forward on resnet50; sum and norms cost a fraction of that.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from inspector.core.records.frames import TensorStats
from inspector.core.stats import fused as fused_stats
from inspector.core.stats.previews import PREVIEW_ELEMENTS, PREVIEW_SIZE, pool_factor


def _bcr_view(x: torch.Tensor) -> torch.Tensor:
    """(batch, channel, rest) view; a copy only for non-contiguous tensors."""
    if x.ndim >= 2:
        return x.reshape(x.shape[0], x.shape[1], -1)
    return x.reshape(1, 1, -1)


def tensor_stats(x: torch.Tensor, abs_mean: bool = True) -> TensorStats:
    """Per-tensor and per-channel mean, std, min, max, zero fraction (channel = dim 1).

    abs_mean: also mean |x| (a gradient-flow plot needs it). Without it, the field is
    still exact for tensors with no negative values (it equals the mean), and for any
    tensor on the fused CPU path (which gets it for free); else NaN.
    """
    # The common case first, with as few torch calls as possible: each costs a few
    # microseconds in a hook (caches are cold after a convolution), and resnet50 has 158
    # leaf outputs.
    a = fused_array(x)
    if a is not None:
        fused = array_stats(a)
        if fused is not None:
            return fused
    x = x.detach()
    if x.is_complex():
        x = x.abs()
    if x.dtype == torch.bool or not x.is_floating_point():
        x = x.float()
    if x.numel() == 0:
        empty = np.zeros(0, np.float32)
        return TensorStats(0.0, 0.0, 0.0, 0.0, 0.0, 0, empty, empty, empty, empty, empty)
    # float32 CPU tensors got their one chance above (not ready, non-finite, or no numpy
    # view): torch reductions, which count NaN and inf exactly.
    return _torch_stats(x, _bcr_view(x), abs_mean)


def fused_array(x: torch.Tensor) -> np.ndarray | None:
    """The numpy view of x (no copy) when the fused kernel can take it: a non-empty float32
    CPU strided tensor, with the kernel available. None: use torch reductions."""
    if not (x.dtype is torch.float32 and x.is_cpu and x.layout is torch.strided):
        return None
    if not fused_stats.available():
        return None
    try:
        a = (x.detach() if x.requires_grad else x).numpy()
    except RuntimeError:  # a lazily negated or conjugated view
        return None
    return a if a.size else None


def array_stats(a: np.ndarray) -> TensorStats | None:
    """Statistics of a fused_array() (channel = dim 1); None: a NaN or inf, use torch."""
    b, c = (a.shape[0], a.shape[1]) if a.ndim >= 2 else (1, 1)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    mean, std, lo, hi, zero, a1, per, finite = fused_stats.moments(a, b, c)
    if not finite:
        return None  # NaN or inf somewhere: torch's reductions count them exactly
    return TensorStats(
        mean=mean,
        std=std,
        min=lo,
        max=hi,
        zero_fraction=zero,
        numel=a.size,
        channel_mean=per[0],
        channel_std=per[1],
        channel_min=per[2],
        channel_max=per[3],
        channel_zero_fraction=per[4],
        abs_mean=a1,
        nonfinite=0,
    )


def _torch_stats(x: torch.Tensor, v: torch.Tensor, abs_mean: bool) -> TensorStats:
    """Torch reductions, on the tensor's device: GPUs, other dtypes, non-finite values."""
    b, c, n_per = v.shape
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    if v.dtype != acc:
        v = v.to(acc)  # half-precision partial sums and products round visibly
    # Sums are taken around each row's first value, as in the fused kernel: without the
    # shift, a float32 tensor with mean 1e4 and std 1e-2 gets a std of about 2. A NaN or
    # inf first value shifts by 0 instead: inf - inf would turn the row's inf mean into NaN.
    shift = torch.nan_to_num(v[..., :1], nan=0.0, posinf=0.0, neginf=0.0)
    d = v - shift
    sums = d.sum(-1, dtype=acc)
    sq = torch.linalg.vector_norm(d, 2, dim=-1, dtype=acc).square()
    del d
    # One pass each, chosen by measurement on resnet50's activations (CPU): amin/amax
    # separately are ~3x faster than aminmax(dim=); counting non-zeros as |sign|^2 is ~5x
    # faster than count_nonzero or vector_norm(ord=0).
    lo, hi = v.amin(-1), v.amax(-1)
    sign = v.sign()
    nonzero = torch.linalg.vector_norm(sign, 2, dim=-1, dtype=acc).square()
    l1 = torch.linalg.vecdot(v, sign, dim=-1).to(acc) if abs_mean else torch.zeros_like(sums)
    del sign
    # Everything crosses to the CPU at once: (7, batch, channels).
    packed = torch.stack(
        [shift[..., 0], sums, sq, l1, nonzero, lo.to(acc), hi.to(acc)]
    ).cpu().numpy().astype(np.float64)
    k, s, ss, a1, nz, mn, mx = packed
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # Rows have equal counts: merge (count, mean, M2) over the batch, then channels.
        row_mean = k + s / n_per
        row_m2 = np.maximum(ss - s * s / n_per, 0.0)
        ch_mean = row_mean.mean(0)
        ch_m2 = row_m2.sum(0) + n_per * ((row_mean - ch_mean) ** 2).sum(0)
        n = float(n_per * b)
        mean = float(ch_mean.mean())
        m2 = float(ch_m2.sum() + n * ((ch_mean - mean) ** 2).sum())
        # |sign|^2 summed in float32 is a count off by rounding: round it back
        nz, mn, mx, a1 = np.rint(nz).sum(0), mn.min(0), mx.max(0), a1.sum()
    total = n * c
    nonfinite = 0
    if not (np.isfinite(row_mean).all() and np.isfinite(row_m2).all()):
        # Rare path: count exactly only when something overflowed or went NaN (the sign
        # of NaN is NaN, so the non-zero count needs recounting too).
        nonfinite = int((~torch.isfinite(x)).sum())
        nz = (v != 0).sum((0, -1)).cpu().numpy().astype(np.float64)
    nan = math.nan
    with np.errstate(invalid="ignore"):
        return TensorStats(
            mean=mean,
            std=math.sqrt(m2 / total) if m2 == m2 else nan,
            min=float(mn.min()),
            max=float(mx.max()),
            zero_fraction=float(1.0 - nz.sum() / total),
            numel=int(x.numel()),
            channel_mean=ch_mean.astype(np.float32),
            channel_std=np.sqrt(ch_m2 / n).astype(np.float32),
            channel_min=mn.astype(np.float32),
            channel_max=mx.astype(np.float32),
            channel_zero_fraction=(1.0 - nz / n).astype(np.float32),
            abs_mean=float(a1 / total) if abs_mean else (mean if mn.min() >= 0 else nan),
            nonfinite=nonfinite,
        )


def preview(x: torch.Tensor, channels: int | None = None, size: int = PREVIEW_SIZE,
            elements: int = PREVIEW_ELEMENTS) -> np.ndarray:
    """A small float32 copy of the first batch item, for display.

    (B, C, H, W) -> every channel (or the first `channels`), each averaged over f x f cells
    so that all of them hold about `elements` values, a side at most `size` (see
    previews.pool_factor); (B, N, D) tokens -> at most (4*size, 4*size); (B, F) -> at most
    64*size values; higher ranks keep their middle slices. Always a copy: the caller may
    overwrite x in place afterwards.
    """
    x = x.detach()
    if not x.is_floating_point():
        x = x.float()
    item = x[0] if x.ndim >= 2 else x.reshape(-1)
    while item.ndim > 3:  # e.g. 3-D convolutions: keep the middle depth slice
        item = item.select(1, item.shape[1] // 2)
    if item.ndim == 3:
        if channels is not None:
            item = item[:channels]
        c, h, w = item.shape
        f = pool_factor(c, h, w, size, elements)
        if f > 1:
            # Means of f x f cells, one f for both sides (the picture keeps its aspect).
            # The same cells on both paths; the compiled one is cheaper on the CPU.
            cpu32 = item.device.type == "cpu" and item.dtype == torch.float32
            if cpu32 and fused_stats.available():
                return fused_stats.area_pool(item.contiguous().numpy(), f)  # a new array
            item = F.avg_pool2d(item.float(), f, ceil_mode=True, count_include_pad=False)
    elif item.ndim == 2:
        n, d = item.shape
        cap = 4 * size
        if n > cap or d > cap:
            item = F.adaptive_avg_pool2d(item[None].float(), (min(n, cap), min(d, cap)))[0]
    elif item.ndim == 1 and item.shape[0] > 64 * size:
        item = F.adaptive_avg_pool1d(item[None, None].float(), 64 * size)[0, 0]
    # .to(copy=True) so that a later in-place op on the live tensor cannot reach the preview;
    # contiguous: a channels-last map comes as a permuted view (Capture._emit).
    return item.to(device="cpu", dtype=torch.float32, copy=True,
                   memory_format=torch.contiguous_format).numpy()
