"""The linear assignment problem (the Hungarian problem), in numpy: which row goes with which
column so that the summed cost is least, each row and column used at most once.

The algorithm is scipy.optimize.linear_sum_assignment's (the shortest augmenting path of
Crouse 2016, "On implementing 2D rectangular assignment algorithms", as in scipy's
rectangular_lsap.cpp), with its tie-break toward a free column: the two give the same assignment where the
optimum is unique, and the same total cost where it is not (tests/core/test_assignment.py
compares them). scipy is not a
dependency of this package for one function: its wheel is about 35 MB. This one takes about
0.5 s for 1,024 x 1,024 (scipy 0.1 s): matching the channels of one layer pair.
"""

from __future__ import annotations

import numpy as np


def linear_sum_assignment(cost, maximize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of an optimal assignment of the (R, C) matrix `cost`: min(R, C) pairs,
    rows ascending, as scipy returns them. ValueError for a matrix that is not 2-D or has a
    non-finite entry."""
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"the cost must be a matrix, got {c.ndim} dimensions")
    if c.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if not np.all(np.isfinite(c)):
        raise ValueError("the cost matrix has entries that are not finite numbers")
    if maximize:
        c = -c
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = c.T
    col4row = _solve(c)
    rows = np.arange(c.shape[0], dtype=np.int64)
    if transposed:
        order = np.argsort(col4row)
        return col4row[order], rows[order]
    return rows, col4row


def _solve(c: np.ndarray) -> np.ndarray:
    """The column of each row of a matrix with no more rows than columns."""
    nr, nc = c.shape
    u, v = np.zeros(nr), np.zeros(nc)
    col4row = np.full(nr, -1, dtype=np.int64)
    row4col = np.full(nc, -1, dtype=np.int64)
    for current in range(nr):
        shortest = np.full(nc, np.inf)
        path = np.full(nc, -1, dtype=np.int64)
        seen_rows = np.zeros(nr, dtype=bool)
        seen_cols = np.zeros(nc, dtype=bool)
        min_val, i, sink = 0.0, current, -1
        while sink < 0:
            seen_rows[i] = True
            reduced = min_val + c[i] - u[i] - v
            better = ~seen_cols & (reduced < shortest)
            path[better] = i
            shortest[better] = reduced[better]
            masked = np.where(seen_cols, np.inf, shortest)
            lowest = masked.min()
            if not np.isfinite(lowest):
                raise ValueError("no feasible assignment")
            ties = np.flatnonzero(masked == lowest)
            free = ties[row4col[ties] < 0]  # a tie that ends the path first, as scipy does
            j = int(free[0] if free.size else ties[0])
            min_val = lowest
            seen_cols[j] = True
            if row4col[j] < 0:
                sink = j
            else:
                i = int(row4col[j])
        u[current] += min_val
        others = seen_rows.copy()
        others[current] = False
        u[others] += min_val - shortest[col4row[others]]
        v[seen_cols] -= min_val - shortest[seen_cols]
        j = sink
        while True:
            i = int(path[j])
            row4col[j] = i
            col4row[i], j = j, int(col4row[i])
            if i == current:
                break
    return col4row
