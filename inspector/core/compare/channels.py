"""Matched channels: the Pearson correlation of every channel of a layer of model A with every
channel of a layer of model B, over images and positions (Li, Yosinski, Clune, Lipson &
Hopcroft 2015, "Convergent learning: do different neural networks learn the same
representations?"), streamed over a folder.

Each output is read as samples x channels, a sample being one position of one image, the
same position in both models (`ChannelRead`). Where the two layers' grids differ, the finer
one is average-pooled to the coarser one (each cell still covers the same part of the
picture; no position is invented); where one side has no positions, or the two have position
counts that no pooling relates, each channel is averaged over its positions and the
correlation is over images only.

The sums are kept as counts, means and centred (co)moments in float64, and two of them merge
with Chan, Golub & LeVeque's formulas, so shards and Ray workers give the same matrix whatever
the order of their batches (up to float64 rounding); within a batch the products are one
float32 GEMM of the batch-centred samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional

# Below this variance (relative to the channel's mean squared, plus one) a channel is dead:
# it says the same thing everywhere, so no correlation is defined for it.
DEAD_VARIANCE = 1e-12


@dataclass(frozen=True)
class ChannelRead:
    """How to read a layer's output as (samples, channels): its layout (channels last, or
    tokens first as (N, B, D)), the grid (h, w) to average-pool a spatial output to, and
    whether to average over positions instead (correlation over images only)."""

    channels_last: bool = False
    seq_first: bool = False
    grid: tuple[int, int] | None = None
    mean_positions: bool = False

    def samples(self, t: torch.Tensor) -> torch.Tensor:
        """(B * positions, C) float32."""
        t = t.detach()
        if self.seq_first:
            t = t.transpose(0, 1)
        if t.ndim == 2:
            return t.float()
        if self.channels_last:
            t = t.movedim(-1, 1)
        if self.mean_positions:
            return t.flatten(2).float().mean(2)
        if self.grid is not None and t.ndim == 4 and tuple(t.shape[-2:]) != self.grid:
            t = functional.adaptive_avg_pool2d(t.float(), self.grid)
        return t.flatten(2).transpose(1, 2).reshape(-1, t.shape[1]).float()


def reads_for(shape_a, shape_b, layout_a: tuple[bool, bool] = (False, False),
              layout_b: tuple[bool, bool] = (False, False)
              ) -> tuple[ChannelRead, ChannelRead, tuple[int, ...] | None, str]:
    """The reads of two layers whose outputs (batch of one) have these shapes, and their
    layouts (channels_last, seq_first): (read A, read B, the common grid or None, a note ""
    or what was done). ValueError for grids of different aspect ratios."""
    pa, pb = _positions(shape_a, *layout_a), _positions(shape_b, *layout_b)
    if pa is None or pb is None:
        note = "" if pa is None and pb is None else (
            "one layer has no positions: each channel is averaged over its positions, and "
            "the correlation is over images only")
        return (ChannelRead(*layout_a, mean_positions=pa is not None),
                ChannelRead(*layout_b, mean_positions=pb is not None), None, note)
    if pa == pb:
        return ChannelRead(*layout_a), ChannelRead(*layout_b), pa, ""
    if len(pa) == 2 and len(pb) == 2:
        (ha, wa), (hb, wb) = pa, pb
        if ha * wb != hb * wa:
            raise ValueError(f"the layers' grids {ha}x{wa} and {hb}x{wb} have different "
                             f"aspect ratios: their positions cover different parts of the "
                             f"picture")
        grid = pa if ha * wa <= hb * wb else pb
        note = f"the finer grid is average-pooled to {grid[0]}x{grid[1]}"
        return ChannelRead(*layout_a, grid=grid), ChannelRead(*layout_b, grid=grid), grid, note
    return (ChannelRead(*layout_a, mean_positions=True), ChannelRead(*layout_b,
            mean_positions=True), None,
            "the layers have different numbers of positions: each channel is averaged over "
            "its positions, and the correlation is over images only")


def _positions(shape, channels_last: bool, seq_first: bool) -> tuple[int, ...] | None:
    shape = tuple(shape)
    if seq_first:
        shape = (shape[1], shape[0], *shape[2:])
    if len(shape) <= 2:
        return None
    if channels_last:
        shape = (shape[0], shape[-1], *shape[1:-1])
    rest = shape[2:]
    return None if all(s == 1 for s in rest) else rest


class ChannelCorrelation:
    """Streaming Pearson correlation of A's channels with B's: counts, means, centred
    moments and co-moments in float64 (see the module docstring)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean_a = self.mean_b = self.m2_a = self.m2_b = self.cross = None

    def add(self, a: torch.Tensor, b: torch.Tensor) -> None:
        """One batch of samples: a (S, Ca), b (S, Cb), row s of both the same sample."""
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"{a.shape[0]} samples of A but {b.shape[0]} of B")
        if a.shape[0] == 0:
            return
        mean_a, mean_b = a.double().mean(0), b.double().mean(0)
        ca, cb = a.float() - mean_a.float(), b.float() - mean_b.float()
        part = ChannelCorrelation()
        part.n = a.shape[0]
        part.mean_a, part.mean_b = mean_a.cpu(), mean_b.cpu()
        part.m2_a = (ca.double() ** 2).sum(0).cpu()
        part.m2_b = (cb.double() ** 2).sum(0).cpu()
        part.cross = (ca.T @ cb).double().cpu()
        self.merge(part)

    def merge(self, other: ChannelCorrelation) -> None:
        if other.n == 0:
            return
        if self.n == 0:
            self.n = other.n
            self.mean_a, self.mean_b = other.mean_a.clone(), other.mean_b.clone()
            self.m2_a, self.m2_b = other.m2_a.clone(), other.m2_b.clone()
            self.cross = other.cross.clone()
            return
        n1, n2 = self.n, other.n
        n = n1 + n2
        da, db = other.mean_a - self.mean_a, other.mean_b - self.mean_b
        w = n1 * n2 / n
        self.cross += other.cross + torch.outer(da, db) * w
        self.m2_a += other.m2_a + da * da * w
        self.m2_b += other.m2_b + db * db * w
        self.mean_a += da * (n2 / n)
        self.mean_b += db * (n2 / n)
        self.n = n

    def dead(self) -> tuple[list[int], list[int]]:
        """The channels of A and of B that have no variance."""
        return _dead(self.m2_a, self.mean_a, self.n), _dead(self.m2_b, self.mean_b, self.n)

    def corr(self) -> torch.Tensor:
        """(Ca, Cb) float64; 0 where either channel is dead."""
        if self.n == 0:
            raise ValueError("no samples")
        den = torch.sqrt(torch.outer(self.m2_a, self.m2_b))
        dead_a, dead_b = self.dead()
        out = torch.where(den > 0, self.cross / den.clamp_min(1e-300), torch.zeros_like(den))
        out[dead_a, :] = 0
        out[:, dead_b] = 0
        return out.clamp(-1, 1)

    def state(self) -> dict[str, torch.Tensor]:
        if self.n == 0:
            return {"n": torch.tensor(0)}
        return {"n": torch.tensor(self.n), "mean_a": self.mean_a, "mean_b": self.mean_b,
                "m2_a": self.m2_a, "m2_b": self.m2_b, "cross": self.cross}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> ChannelCorrelation:
        out = cls()
        out.n = int(state["n"])
        if out.n:
            for name in ("mean_a", "mean_b", "m2_a", "m2_b", "cross"):
                setattr(out, name, state[name].double().clone())
        return out


def _dead(m2: torch.Tensor, mean: torch.Tensor, n: int) -> list[int]:
    var = m2 / n
    return torch.nonzero(var <= DEAD_VARIANCE * (1 + mean * mean)).flatten().tolist()
