"""Deletion and insertion (Petsiuk et al. 2018, RISE), as torch-cam's DeletionInsertionMetric
computes them for a given map.

The P pixel positions of the model input are ranked by the map (at the input's size; a
map of another size is resized bilinearly first), most relevant first, ties in reading
order (the first pixel first: a stable descending sort). Each step perturbs ceil(P / steps)
more positions, up to all P; every channel of a position is perturbed together.

- Deletion replaces the ranked positions with the deletion baseline: point k has the first
  counts[k] positions replaced, the rest as in the input.
- Insertion starts from the insertion baseline and restores them: point k has the first
  counts[k] positions of the input, the rest of the baseline.

The curve is the score (scores.Scorer: a class probability) at each point, against the
fraction of positions actually perturbed (the last step may be shorter), and its AUC is the
trapezoid rule over those fractions (torch.trapezoid, float32, as torch-cam).

The score of the input itself (deletion's first point, insertion's last) is the run's own
when given (`p0`); the all-baseline inputs (deletion's last point, insertion's first) do not
depend on the map, so they are scored once for every map. Deletion and insertion of M maps
at S steps are M * 2 * (S - 1) forwards, plus one per distinct baseline: 39 at 20 steps with
one baseline (torch-cam's count), 40 with RISE's two.

Baselines (names.BASELINES): zero (the normalised input's zero, the data set's mean
colour), blur (RISE's insertion substrate: scipy.ndimage.gaussian_filter of an 11 x 11 delta
with sigma 5 as the kernel, per channel, zero padding), mean (the image's own mean colour).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.hookset import ModelState


@dataclass(frozen=True)
class Curve:
    """A score against the fraction of pixel positions perturbed."""

    fractions: np.ndarray  # float32 (n,), ascending, 0..1
    scores: np.ndarray  # float32 (n,)
    auc: float  # the trapezoid rule over the fractions
    baseline: str  # what replaced the pixels: a BASELINES name, or ROAD's imputation

    @property
    def mean(self) -> float:
        """The mean score over the points (ROAD's summary number)."""
        return float(np.mean(self.scores))

    def points(self, digits: int = 6) -> list[list[float]]:
        """[[fraction, score], ...] for JSON."""
        return [[round(float(f), digits), round(float(s), digits)]
                for f, s in zip(self.fractions, self.scores, strict=True)]


def curve(fractions: torch.Tensor, scores: torch.Tensor, baseline: str) -> Curve:
    f, s = fractions.float().cpu(), scores.float().cpu()
    return Curve(f.numpy(), s.numpy(), float(torch.trapezoid(s, f)), baseline)


def as_maps(maps, hw: tuple[int, int], device) -> torch.Tensor:
    """(M, H, W) float32 on `device` from one (H, W) map or several, numpy or torch; a map
    of another size than `hw` resized bilinearly (torch-cam's resize)."""
    m = torch.as_tensor(np.asarray(maps) if not isinstance(maps, torch.Tensor) else maps)
    m = m.detach().float()
    if m.ndim == 2:
        m = m[None]
    if m.ndim != 3:
        raise ValueError(f"expected an (H, W) map or (M, H, W) maps, got shape {tuple(m.shape)}")
    if tuple(m.shape[-2:]) != tuple(hw):
        m = F.interpolate(m[:, None], size=tuple(hw), mode="bilinear", align_corners=False)[:, 0]
    return m.to(device)


def pixel_ranks(maps: torch.Tensor) -> torch.Tensor:
    """(M, P) rank of every pixel position of each (M, H, W) map: 0 the most relevant; ties
    ranked in reading order (torch.argsort(descending=True, stable=True), as torch-cam)."""
    flat = maps.flatten(1)
    order = torch.argsort(flat, dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order)
    positions = torch.arange(flat.shape[1], device=flat.device).expand_as(order)
    return ranks.scatter_(1, order, positions)


def curve_counts(positions: int, steps: int) -> list[int]:
    """Positions perturbed at each point: 0, s, 2s, ... below P, then P; s = ceil(P / steps)."""
    step = -(-positions // steps)
    return [*range(0, positions, step), positions]


@lru_cache(maxsize=1)
def _rise_kernel() -> np.ndarray:
    """RISE's blur kernel: scipy.ndimage.gaussian_filter(delta of 11 x 11, sigma=5) (mode
    'reflect', which is numpy's 'symmetric'; truncate 4: radius 20), computed without scipy."""
    radius, sigma, size = 20, 5.0, 11
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    delta = np.zeros(size)
    delta[size // 2] = 1.0
    padded = np.pad(delta, radius, mode="symmetric")
    k1 = np.array([np.dot(taps, padded[i : i + 2 * radius + 1][::-1]) for i in range(size)])
    return np.outer(k1, k1)


def rise_blur(x: torch.Tensor) -> torch.Tensor:
    """RISE's blurred input: the same 11 x 11 kernel on each channel, zero padding 5 (the
    border fades towards 0, the mean colour of a normalised input)."""
    k = torch.from_numpy(_rise_kernel()).to(x.device, x.dtype)
    c = x.shape[1]
    return F.conv2d(x, k.expand(c, 1, *k.shape), padding=k.shape[-1] // 2, groups=c)


def baseline_of(x: torch.Tensor, name: str) -> torch.Tensor:
    """The baseline `name` ("zero", "blur", "mean") for the input x (B, C, H, W)."""
    if name == "zero":
        return torch.zeros_like(x)
    if name == "blur":
        return rise_blur(x)
    if name == "mean":
        return x.mean(dim=(2, 3), keepdim=True).expand_as(x).contiguous()
    raise ValueError(f"unknown baseline '{name}': zero, blur or mean")


def curve_forwards(maps: int, positions: int, steps: int, same_baseline: bool) -> int:
    """The forwards of deletion and insertion of `maps` maps (the input's own score given)."""
    interior = max(0, len(curve_counts(positions, steps)) - 2)
    return maps * 2 * interior + (1 if same_baseline else 2)


def deletion_insertion(forwarder: Forwarder, x: torch.Tensor, maps, *, steps: int = 20,
                       deletion_baseline: str = "zero", insertion_baseline: str = "blur",
                       p0: float | None = None) -> list[tuple[Curve, Curve]]:
    """The (deletion, insertion) curves of each map, for x (1, C, H, W) the model input.

    maps: (H, W) or (M, H, W), numpy or torch; p0: the input's own score when known (the
    run's), else one more forward. The perturbed inputs of all maps share the batches.
    """
    x = x[:1].detach()
    _, c, h, w = x.shape
    positions = h * w
    m = as_maps(maps, (h, w), x.device)
    ranks = pixel_ranks(m)
    counts = curve_counts(positions, steps)
    fractions = torch.tensor(counts, dtype=torch.float32) / positions
    same = deletion_baseline == insertion_baseline
    with ModelState(forwarder.scorer.model, training=False), torch.inference_mode():
        if p0 is None:
            p0 = float(forwarder.score(x)[0])
        d_base = baseline_of(x, deletion_baseline)
        i_base = d_base if same else baseline_of(x, insertion_baseline)
        ends, interior = _curve_scores(forwarder, x, d_base, i_base, same, ranks,
                                       counts[1:-1])
    d_end, i_start = ends[0], ends[-1]
    first = torch.tensor([p0], dtype=torch.float32)
    out = []
    for j in range(len(m)):
        deletion = torch.cat([first, interior[0, j], d_end[None]])
        insertion = torch.cat([i_start[None], interior[1, j], first])
        out.append((curve(fractions, deletion, deletion_baseline),
                    curve(fractions, insertion, insertion_baseline)))
    return out


def _curve_scores(forwarder: Forwarder, x, d_base, i_base, same: bool, ranks,
                  counts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(the all-baseline inputs' scores (1 or 2,), (2, M, len(counts)) scores: deletion then
    insertion at the interior points of each map). The baselines lead the first batch, so
    the batches are those of the same number of plain forwards; rows are made in one
    preallocated buffer."""
    n_maps, positions = ranks.shape
    c = x.shape[1]
    ends = (d_base if same else torch.cat([d_base, i_base])).reshape(-1, c, positions)
    n_ends = len(ends)
    per_curve = n_maps * len(counts)
    rows = n_ends + 2 * per_curve
    scores = torch.empty(rows, dtype=torch.float32)
    xf, df, inf = (t.reshape(1, c, positions) for t in (x, d_base, i_base))
    count_of = torch.tensor(counts or [0], device=x.device)
    batch = forwarder.per_batch
    buffer = torch.empty((min(batch, rows), c, positions), dtype=x.dtype, device=x.device)
    for start in range(0, rows, batch):
        stop = min(rows, start + batch)
        out = buffer[: stop - start]
        lo = min(max(n_ends - start, 0), stop - start)  # rows of this batch that are ends
        if lo:
            out[:lo] = ends[start : start + lo]
        if lo < stop - start:
            r = torch.arange(start + lo - n_ends, stop - n_ends, device=x.device)
            first = (ranks[(r % per_curve) // len(counts)]
                     < count_of[r % len(counts)][:, None])[:, None]  # (n, 1, P)
            split = min(max(per_curve - int(r[0]), 0), len(r))  # rows before it: deletion
            body = out[lo:]
            if split:
                _select(first[:split], df, xf, body[:split])
            if split < len(r):
                _select(first[split:], xf, inf, body[split:])
        scores[start:stop] = forwarder.score(out.view(-1, c, *x.shape[-2:]))
    return scores[:n_ends], scores[n_ends:].reshape(2, n_maps, len(counts))


def _select(first: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = torch.where(first, a, b) for a (n, 1, P) mask and (1, C, P) inputs, bit for bit
    (b * 0 + a * 1 and b * 1 + a * 0 are exact for finite values) and about 5x faster on
    the CPU than where's broadcast of the mask over the channels."""
    on = first.to(out.dtype)
    torch.mul(b, 1 - on, out=out)
    out.addcmul_(a, on)
