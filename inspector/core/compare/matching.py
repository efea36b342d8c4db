"""Channels of two layers matched one to one by their correlation, and the channels left over.

The matching maximises the summed correlation (core.compare.assignment, the Hungarian
problem) over the live channels, with the signed correlation as Li et al. 2015 used it: after
a ReLU an anti-correlated channel is no match. A channel of A is *lost* (B has no such
feature) when it is left unmatched (A is wider) or when its best correlation with any
channel of B is below the threshold; a channel of B is *new* likewise. The best partner of
any channel (the semi-matching), not its assigned one, decides: a channel is not called lost
only because the assignment gave its best partner to another. A dead channel (no variance)
is listed as dead, not as lost or new.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inspector.core.compare.assignment import linear_sum_assignment

THRESHOLD = 0.5


@dataclass(frozen=True)
class ChannelMatch:
    """pairs: (channel of A, channel of B, correlation), the matched pairs, correlation
    descending; lost: (channel of A, its best channel of B, that correlation), new likewise
    for B's channels; dead_a, dead_b: channels without variance."""

    pairs: tuple[tuple[int, int, float], ...]
    lost: tuple[tuple[int, int, float], ...]
    new: tuple[tuple[int, int, float], ...]
    dead_a: tuple[int, ...]
    dead_b: tuple[int, ...]
    threshold: float


def match_channels(corr, threshold: float = THRESHOLD, dead_a=(), dead_b=()) -> ChannelMatch:
    """The matching of the (Ca, Cb) correlation matrix `corr`."""
    corr = np.asarray(corr, dtype=np.float64)
    dead_a, dead_b = sorted(set(dead_a)), sorted(set(dead_b))
    live_a = np.setdiff1d(np.arange(corr.shape[0]), dead_a)
    live_b = np.setdiff1d(np.arange(corr.shape[1]), dead_b)
    sub = corr[np.ix_(live_a, live_b)]
    rows, cols = linear_sum_assignment(sub, maximize=True)
    pairs = sorted(((int(live_a[r]), int(live_b[c]), float(sub[r, c]))
                    for r, c in zip(rows, cols, strict=True)), key=lambda p: (-p[2], p[0]))
    matched_a = {a for a, _, _ in pairs}
    matched_b = {b for _, b, _ in pairs}
    lost, new = [], []
    if sub.size:
        best_b, best_a = sub.argmax(1), sub.argmax(0)
        for k, a in enumerate(live_a):
            r = float(sub[k, best_b[k]])
            if int(a) not in matched_a or r < threshold:
                lost.append((int(a), int(live_b[best_b[k]]), r))
        for k, b in enumerate(live_b):
            r = float(sub[best_a[k], k])
            if int(b) not in matched_b or r < threshold:
                new.append((int(b), int(live_a[best_a[k]]), r))
    return ChannelMatch(tuple(pairs), tuple(lost), tuple(new), tuple(dead_a), tuple(dead_b),
                        float(threshold))
