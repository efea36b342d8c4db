"""Matched channels: the numpy linear assignment against scipy's, the streaming correlation
against numpy's, the matching of a permuted copy, dead channels, grids pooled."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inspector.core.compare.assignment import linear_sum_assignment
from inspector.core.compare.channels import ChannelCorrelation, ChannelRead, reads_for
from inspector.core.compare.matching import match_channels


def test_assignment_equals_scipy():
    scipy_opt = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(0)
    for t in range(60):
        r, c = (int(v) for v in rng.integers(1, 30, 2))
        cost = rng.standard_normal((r, c))
        ties = t % 3 == 0
        if ties:
            cost = np.round(cost * 2)
        for maximize in (False, True):
            rows, cols = linear_sum_assignment(cost, maximize)
            ref_rows, ref_cols = scipy_opt.linear_sum_assignment(cost, maximize)
            assert cost[rows, cols].sum() == pytest.approx(cost[ref_rows, ref_cols].sum(),
                                                           abs=1e-9)
            assert len(set(cols.tolist())) == len(cols) == min(r, c)
            if not ties:  # a unique optimum: the same assignment
                assert rows.tolist() == ref_rows.tolist()
                assert cols.tolist() == ref_cols.tolist()


def test_assignment_edges():
    rows, cols = linear_sum_assignment(np.zeros((0, 3)))
    assert rows.size == cols.size == 0
    assert linear_sum_assignment([[5.0]])[1].tolist() == [0]
    with pytest.raises(ValueError, match="not finite"):
        linear_sum_assignment([[1.0, np.nan]])
    with pytest.raises(ValueError, match="matrix"):
        linear_sum_assignment([1.0, 2.0])


def test_streaming_correlation_is_pearsons_in_any_grouping():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(300, 6, generator=g) * 3 + 50  # a large offset: the centred sums matter
    b = torch.cat([a[:, :2] * 2 + 0.1 * torch.randn(300, 2, generator=g),
                   torch.randn(300, 3, generator=g)], 1)
    ref = np.corrcoef(a.double().numpy().T, b.double().numpy().T)[:6, 6:]
    whole = ChannelCorrelation()
    whole.add(a, b)
    parts = [ChannelCorrelation() for _ in range(3)]
    for k in range(6):
        parts[k % 3].add(a[50 * k:50 * (k + 1)], b[50 * k:50 * (k + 1)])
    merged = ChannelCorrelation()
    for part in parts[::-1]:
        merged.merge(ChannelCorrelation.from_state(part.state()))
    for corr in (whole, merged):
        assert np.abs(corr.corr().numpy() - ref).max() <= 1e-5


def test_a_permuted_copy_matches_back_and_a_dead_channel_is_dead():
    g = torch.Generator().manual_seed(1)
    t = torch.relu(torch.randn(4, 8, 5, 5, generator=g))
    t[:, 3] = 0  # a dead channel
    perm = torch.randperm(8, generator=g)
    read = ChannelRead()
    corr = ChannelCorrelation()
    for _ in range(3):
        corr.add(read.samples(t), read.samples(t[:, perm]))
    dead_a, dead_b = corr.dead()
    assert dead_a == [3] and dead_b == [int((perm == 3).nonzero())]
    match = match_channels(corr.corr().numpy(), dead_a=dead_a, dead_b=dead_b)
    assert len(match.pairs) == 7
    for a, b, r in match.pairs:
        assert int(perm[b]) == a and r == pytest.approx(1.0, abs=1e-6)
    assert match.lost == () and match.new == ()


def test_lost_and_new_channels():
    corr = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.1]])  # A has 2 channels, B has 3
    match = match_channels(corr, threshold=0.5)
    assert [(a, b) for a, b, _ in match.pairs] == [(0, 0), (1, 1)]
    assert [a for a, _, _ in match.lost] == [1]  # its best is 0.3 < 0.5
    assert sorted(b for b, _, _ in match.new) == [1, 2]  # 2 is unmatched, 1 below 0.5


def test_grids_are_pooled_to_the_coarser_one():
    read_a, read_b, grid, note = reads_for((1, 64, 16, 16), (1, 96, 8, 8))
    assert grid == (8, 8) and "8x8" in note
    assert read_a.samples(torch.zeros(2, 64, 16, 16)).shape == (2 * 64, 64)
    assert read_b.samples(torch.zeros(2, 96, 8, 8)).shape == (2 * 64, 96)
    with pytest.raises(ValueError, match="aspect"):
        reads_for((1, 4, 16, 16), (1, 4, 8, 4))
    _, read_vec, grid, note = reads_for((1, 4, 16, 16), (1, 10))
    assert grid is None and "images only" in note
    assert read_vec.samples(torch.zeros(3, 10)).shape == (3, 10)
