"""What the attention explorer shows, from one image's attention (numpy only, so that the
window computes a clicked patch's maps without the engine):

- where a query token attends: its row of a block's attention over the patch tokens, per
  head and fused over the heads; the class token is the default query (a model without one:
  the mean over the patch queries);
- each head's mean attention distance, in patches (Dosovitskiy et al. 2020, Fig. 7): over
  the patch queries, the mean of sum_k a[q, k] |pos_q - pos_k| with a renormalised over the
  patch keys (prefix tokens have no position). Small: a local head; large: a global one.
"""

from __future__ import annotations

import numpy as np

FUSIONS = ("mean", "max", "min")


def query_index(row: int, col: int, prefix: int, grid: tuple[int, int]) -> int:
    """The token of patch (row, col): prefix tokens first, then the patches row by row."""
    gh, gw = grid
    if not (0 <= row < gh and 0 <= col < gw):
        raise ValueError(f"patch ({row}, {col}) is outside the {gh} x {gw} grid")
    return prefix + row * gw + col


def query_maps(attention: np.ndarray, query: int | None, prefix: int, grid: tuple[int, int],
               class_token: bool = True) -> np.ndarray:
    """(heads, gh, gw): where `query` attends in one block's attention (heads, N', N), over
    the patch keys. query None: the class token, or the mean over the patch queries without
    one. `attention` may hold only some query rows (N' < N): then row 0 is the class token's."""
    a = np.asarray(attention, dtype=np.float32)
    heads = a.shape[0]
    if query is None:
        rows = a[:, 0] if class_token or a.shape[1] == 1 else a[:, prefix:].mean(axis=1)
    else:
        rows = a[:, query]
    return rows[:, prefix:].reshape(heads, *grid)


def fuse(maps: np.ndarray, fusion: str) -> np.ndarray:
    """(heads, h, w) -> (h, w): the mean, max or min over the heads."""
    if fusion == "mean":
        return maps.mean(axis=0)
    if fusion == "max":
        return maps.max(axis=0)
    if fusion == "min":
        return maps.min(axis=0)
    raise ValueError(f"unknown head fusion '{fusion}': {', '.join(FUSIONS)}")


def patch_distances(grid: tuple[int, int]) -> np.ndarray:
    """(P, P): the distance in patches between every two patches of the grid."""
    gh, gw = grid
    yy, xx = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
    pos = np.stack([yy.ravel(), xx.ravel()], axis=-1).astype(np.float64)
    return np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(-1))


def mean_attention_distance(attention: np.ndarray, prefix: int, grid: tuple[int, int]
                            ) -> np.ndarray:
    """(..., heads) mean attention distance in patches of attention (..., heads, N, N)."""
    a = np.asarray(attention, dtype=np.float64)[..., prefix:, prefix:]
    a = a / np.maximum(a.sum(axis=-1, keepdims=True), 1e-12)
    d = patch_distances(grid)
    return (a * d).sum(axis=-1).mean(axis=-1)
