"""The numba kernels behind fused_stats (imported only there, on first use).

They live at module level so that numba's on-disk cache can key them: functions built
in a closure get new intrinsic objects in each process and are recompiled every time
(about 2 s, measured).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

BLOCK = 1024  # float32 partial sums over 1024 terms, then float64


def _llvm_binary(name):
    @intrinsic
    def op(typingctx, a, b):
        def codegen(context, builder, signature, args):
            t = args[0].type
            fn = builder.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, t]))
            return builder.call(fn, args, fastmath=("fast",))

        return a(a, b), codegen

    return op


# minnum/maxnum: the loop vectoriser turns these into vminps/vmaxps; numba's min()/max()
# check for NaN and keep the loop scalar.
fmin = _llvm_binary("llvm.minnum")
fmax = _llvm_binary("llvm.maxnum")


def _jit(fastmath: bool, parallel: bool = False):
    def wrap(fn):
        # The cache spares later processes the compile; a frozen app has no source file
        # to key it on, and there numba refuses cache=True: then compile in each process.
        opts = dict(nogil=True, fastmath=fastmath, parallel=parallel)
        try:
            return numba.njit(cache=True, **opts)(fn)
        except Exception:  # noqa: BLE001
            return numba.njit(**opts)(fn)

    return wrap


PARALLEL_MIN = 1 << 16  # below this many values a parallel launch costs more than it saves


@numba.njit(inline="always", fastmath=True)
def _row(row, out):
    """out = (mean, M2, sum|x|, non-zeros, min, max) of one float32 row.

    The row is summed around a shift (its first value): sum(x - k) and sum((x - k)^2)
    keep the variance where sum(x^2)/n - mean^2 cancels catastrophically.
    """
    n = row.shape[0]
    k = row[0]
    s = 0.0
    ss = 0.0
    a = 0.0
    nz = 0.0
    lo = np.float32(np.inf)
    hi = np.float32(-np.inf)
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        s32 = np.float32(0.0)
        ss32 = np.float32(0.0)
        a32 = np.float32(0.0)
        nz32 = np.float32(0.0)
        for i in range(start, stop):
            x = row[i]
            d = x - k
            s32 += d
            ss32 += d * d
            a32 += abs(x)
            nz32 += np.float32(1.0) if x != 0 else np.float32(0.0)
            lo = fmin(lo, x)
            hi = fmax(hi, x)
        s += s32
        ss += ss32
        a += a32
        nz += nz32
    out[0] = np.float64(k) + s / n
    out[1] = max(ss - s * s / n, 0.0)
    out[2] = a
    out[3] = nz
    out[4] = lo
    out[5] = hi


@_jit(fastmath=True)
def rows_serial(v, acc):
    for r in range(v.shape[0]):
        _row(v[r], acc[r])


@_jit(fastmath=True, parallel=True)
def rows_parallel(v, acc):
    # numba's own thread pool, not torch's (see fused_stats._build).
    for r in numba.prange(v.shape[0]):
        _row(v[r], acc[r])


# Everything after the row pass: fast-math without nnan/ninf, so that LLVM may vectorise
# and reassociate but may not assume the isfinite checks true.
@_jit(fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
def tensor_moments(v, batch, channels, parallel):
    """Statistics of v, a (batch * channels, n) float32 array with rows in batch-major order.

    parallel: rows of large tensors are spread over numba's threads (see fused_stats for
    when that is allowed).

    Returns (mean, std, min, max, zero_fraction, abs_mean, per_channel, finite) where
    per_channel is a (5, channels) float32 array of mean, std, min, max, zero fraction.
    finite is False when a NaN or inf was seen (or a sum overflowed): nothing else is
    meaningful then.

    Every row has the same count, so merging (count, mean, M2) over the batch and then
    over channels needs no running division: mean of means, and M2 = sum of M2s plus
    count * sum of squared deviations of the means (Chan et al. with equal counts).
    """
    n = v.shape[1]
    acc = np.empty((v.shape[0], 6), np.float64)
    if parallel and v.size >= PARALLEL_MIN and v.shape[0] > 1:
        rows_parallel(v, acc)
    else:
        rows_serial(v, acc)
    if batch == 1:
        ch_mean = acc[:, 0].copy()
        ch_m2 = acc[:, 1].copy()
        ch_nz = acc[:, 3].copy()
        ch_lo = acc[:, 4].copy()
        ch_hi = acc[:, 5].copy()
    else:
        ch_mean = np.zeros(channels)
        ch_m2 = np.zeros(channels)
        ch_nz = np.zeros(channels)
        ch_lo = np.full(channels, np.inf)
        ch_hi = np.full(channels, -np.inf)
        for b in range(batch):
            ch_mean += acc[b * channels : (b + 1) * channels, 0]
        ch_mean /= batch
        for b in range(batch):
            part = acc[b * channels : (b + 1) * channels]
            d = part[:, 0] - ch_mean
            ch_m2 += part[:, 1] + n * d * d
            ch_nz += part[:, 3]
            ch_lo = np.minimum(ch_lo, part[:, 4])
            ch_hi = np.maximum(ch_hi, part[:, 5])
    per_count = float(n * batch)
    per = np.empty((5, channels), np.float32)
    per[0] = ch_mean
    per[1] = np.sqrt(ch_m2 / per_count)
    per[2] = ch_lo
    per[3] = ch_hi
    per[4] = 1.0 - ch_nz / per_count
    count = per_count * channels
    mean = ch_mean.mean()
    dev = ch_mean - mean
    m2 = ch_m2.sum() + per_count * (dev * dev).sum()
    lo = ch_lo.min()
    hi = ch_hi.max()
    abs_sum = acc[:, 2].sum()
    finite = np.isfinite(mean) and np.isfinite(m2) and np.isfinite(abs_sum)
    finite = finite and np.isfinite(lo) and np.isfinite(hi)
    return (
        mean,
        np.sqrt(m2 / count),
        lo,
        hi,
        1.0 - ch_nz.sum() / count,
        abs_sum / count,
        per,
        finite,
    )


@_jit(fastmath=True)
def area_pool(x, f):
    """Means of f x f cells of a (C, H, W) float32 array; edge cells are clipped and
    averaged over what they hold (torch's avg_pool2d with ceil_mode=True and
    count_include_pad=False gives the same). Always a new array.

    Rows are summed into a buffer first (contiguous, vectorised), then the buffer's
    columns: 9x faster than torch's adaptive_avg_pool2d on a 64 x 112 x 112 conv output
    (0.28 ms against 2.4, measured), which cost a preview more than its statistics.
    """
    c_n, h, w = x.shape
    oh = (h + f - 1) // f
    ow = (w + f - 1) // f
    full = w // f  # output columns whose cells are whole
    out = np.empty((c_n, oh, ow), np.float32)
    row = np.empty(w, np.float32)
    cols = np.empty(ow, np.float32)
    for c in range(c_n):
        src = x[c]
        for oi in range(oh):
            i0 = oi * f
            i1 = min(h, i0 + f)
            for j in range(w):
                row[j] = src[i0, j]
            for i in range(i0 + 1, i1):
                for j in range(w):
                    row[j] += src[i, j]
            for oj in range(ow):
                cols[oj] = 0.0
            for k in range(f):  # f strided passes vectorise; a loop over each cell does not
                for oj in range(full):
                    cols[oj] += row[oj * f + k]
            for j in range(full * f, w):
                cols[full] += row[j]
            inv = np.float32(1.0) / np.float32((i1 - i0) * f)
            for oj in range(full):
                out[c, oi, oj] = cols[oj] * inv
            if full < ow:
                out[c, oi, full] = cols[full] / np.float32((i1 - i0) * (w - full * f))
    return out
