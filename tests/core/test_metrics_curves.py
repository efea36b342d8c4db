"""Deletion, insertion, Average Drop and ROAD on models small enough to check by hand: which
pixels each point perturbs, ties, the counts and the AUC, how many forwards they cost, a
constant map, an output that is not class scores, a cancel, and the imputation's solve."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from inspector.core.explain.metrics.confidence import confidence_change
from inspector.core.explain.metrics.curves import (
    curve_counts,
    deletion_insertion,
    pixel_ranks,
)
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.imputation import impute, stencil
from inspector.core.explain.metrics.names import MetricOptions, metric_name, parse_metrics
from inspector.core.explain.metrics.road import kept_count, road, road_keep_masks
from inspector.core.explain.metrics.score_maps import score_maps
from inspector.core.explain.metrics.scores import class_probability
from inspector.core.hookset import RunCancelled


class RegionModel(nn.Module):
    """Class 0's logit is the input summed over `region` (flat positions), class 1's is 0;
    counts its forwarded inputs."""

    def __init__(self, region) -> None:
        super().__init__()
        self.region = torch.tensor(region)
        self.inputs = 0

    def forward(self, x):
        self.inputs += len(x)
        s = x.flatten(2).sum(1)[:, self.region].sum(1)
        return torch.stack([s, torch.zeros_like(s)], dim=1)


def p_of(model, x) -> float:
    with torch.no_grad():
        return float(model(x).softmax(-1)[0, 0])


def test_counts_ties_and_the_perturbed_pixels_of_each_point():
    assert curve_counts(10, 3) == [0, 4, 8, 10]
    assert curve_counts(10, 20) == list(range(11))  # steps >= P: every position a step
    counts = curve_counts(128 * 128, 20)  # steps of 820: the last one is 804
    assert len(counts) == 21 and counts[-3:] == [14760, 15580, 16384]
    m = torch.tensor([[1.0, 0, 0, 1, 0], [0, 0, 1, 0, 0]])  # ties: reading order first
    assert pixel_ranks(m[None])[0].tolist() == [0, 3, 4, 1, 5, 6, 7, 2, 8, 9]
    model = RegionModel([0, 3, 9])
    x = torch.ones(1, 2, 2, 5)
    forwarder = Forwarder(class_probability(model, 0), x)
    (d, i), = deletion_insertion(forwarder, x, m, steps=3, deletion_baseline="zero",
                                 insertion_baseline="zero")
    order = [0, 3, 7, 1, 2, 4, 5, 6, 8, 9]
    for k, count in enumerate([0, 4, 8, 10]):
        deleted, inserted = x.clone().flatten(2), torch.zeros(1, 2, 10)
        deleted[..., order[:count]] = 0
        inserted[..., order[:count]] = 1
        assert d.scores[k] == pytest.approx(p_of(model, deleted.reshape(x.shape)), abs=1e-6)
        assert i.scores[k] == pytest.approx(p_of(model, inserted.reshape(x.shape)), abs=1e-6)
    assert np.allclose(d.fractions, [0, 0.4, 0.8, 1.0])
    assert d.auc == pytest.approx(float(torch.trapezoid(torch.from_numpy(d.scores),
                                                        torch.from_numpy(d.fractions))))


def test_forwards_one_baseline_39_rise_40_and_maps_share_the_batches():
    model = RegionModel(list(range(0, 100, 3)))
    x = torch.randn(1, 3, 10, 10, generator=torch.Generator().manual_seed(0))
    p0 = p_of(model, x)
    g = torch.Generator().manual_seed(1)
    maps = torch.rand(3, 10, 10, generator=g)  # 100 positions: 20 steps of 5
    for (dbase, ibase), expected in ((("zero", "zero"), 39), (("zero", "blur"), 40)):
        model.inputs = 0
        forwarder = Forwarder(class_probability(model, 0), x, batch_size=16)
        deletion_insertion(forwarder, x, maps[0], steps=20, deletion_baseline=dbase,
                           insertion_baseline=ibase, p0=p0)
        assert model.inputs == expected == forwarder.forwards
    # Three maps in one call: 3 x 38 interior points and the two shared baselines, the same
    # curves as one map at a time.
    model.inputs = 0
    together = deletion_insertion(Forwarder(class_probability(model, 0), x, batch_size=16),
                                  x, maps, p0=p0)
    assert model.inputs == 3 * 38 + 2
    for j in range(3):
        (d, i), = deletion_insertion(Forwarder(class_probability(model, 0), x), x, maps[j],
                                     p0=p0)
        assert np.allclose(d.scores, together[j][0].scores, atol=1e-6)
        assert np.allclose(i.scores, together[j][1].scores, atol=1e-6)


def test_average_drop_and_increase():
    model = RegionModel([0, 1])
    x = torch.ones(1, 1, 1, 4)
    forwarder = Forwarder(class_probability(model, 0), x)
    p = p_of(model, x)
    half = torch.tensor([[0.5, 0.5, 1.0, 1.0]])
    (drop, up), = confidence_change(forwarder, x, half)
    q = p_of(model, x * half[None, None])
    assert drop == pytest.approx((p - q) / (p + 1e-7)) and not up
    negative = -torch.ones(1, 1, 1, 4)  # masking a negative input raises the score
    (drop, up), = confidence_change(Forwarder(class_probability(model, 0), negative),
                                    negative, half)
    assert drop == 0.0 and up


def test_a_constant_map_is_undefined_and_the_json_has_no_nan():
    model = RegionModel([0])
    x = torch.ones(1, 1, 4, 4)
    options = MetricOptions(metrics=("deletion", "insertion", "avgdrop", "road"), steps=4)
    forwarder = Forwarder(class_probability(model, 0), x)
    scores = score_maps(forwarder, x, {"gradcam": np.zeros((4, 4), np.float32),
                                       "saliency": np.full((4, 4), 0.7, np.float32)}, options)
    for method, title in (("gradcam", "Grad-CAM"), ("saliency", "Saliency")):
        s = scores[method]
        assert s.undefined == f"{title}'s map is constant on this image: its faithfulness " \
                              f"is undefined"
        entry = s.as_json(options.metrics)
        json.dumps(entry, allow_nan=False)
        assert entry["deletion"] is None and entry["road_morf"] is None
        assert entry["undefined"] == s.undefined


def test_an_output_that_is_not_class_scores_is_one_sentence():
    x = torch.ones(1, 3, 4, 4)
    for model, shape in ((nn.Conv2d(3, 3, 1), "(1, 3, 4, 4)"), (nn.Sequential(
            nn.Flatten(), nn.Linear(48, 1)), "(1, 1)")):
        with pytest.raises(ValueError) as e:
            class_probability(model, 0)(x)
        assert str(e.value) == (f"the model's output is {shape}, not class scores: the "
                                f"metrics need a class probability")


def test_a_cancel_stops_between_batches_and_inside_a_long_solve():
    model = RegionModel([0, 5])
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) > 1:
            raise RunCancelled()

    forwarder = Forwarder(class_probability(model, 0), x, batch_size=4, progress=progress,
                          total=100)
    with pytest.raises(RunCancelled):
        deletion_insertion(forwarder, x, torch.rand(16, 16), p0=0.5)
    assert model.inputs == 2 * 4  # two batches of 4 (the baselines lead the first)
    big = torch.randn(3, 96, 96, generator=torch.Generator().manual_seed(1))
    keep = torch.zeros(96, 96, dtype=torch.bool)
    keep[0, 0] = True  # one pixel kept: a long solve
    checks = []

    def check():
        checks.append(1)
        raise RunCancelled()

    with pytest.raises(RunCancelled):
        impute(big, keep, check=check)
    assert checks == [1]
    # The next computation works.
    (d, _), = deletion_insertion(Forwarder(class_probability(model, 0), x), x,
                                 torch.rand(16, 16), p0=0.5)
    assert np.isfinite(d.scores).all()


def test_imputation_solves_the_neighbour_mean_system():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 10, 12, generator=g)
    keep = torch.rand(10, 12, generator=g) > 0.4
    ours = impute(x, keep).double()
    # The same system written out: each removed pixel is the weighted mean of its in-image
    # neighbours (1/6 sides, 1/12 corners, renormalised at the border).
    h, w = keep.shape
    removed = [(r, c) for r in range(h) for c in range(w) if not keep[r, c]]
    index = {p: k for k, p in enumerate(removed)}
    a = torch.zeros(len(removed), len(removed), dtype=torch.float64)
    b = torch.zeros(len(removed), 2, dtype=torch.float64)
    for (r, c), k in index.items():
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                if (dr, dc) == (0, 0) or not (0 <= rr < h and 0 <= cc < w):
                    continue
                weight = 1 / 12 if dr and dc else 1 / 6
                a[k, k] += weight
                if keep[rr, cc]:
                    b[k] += weight * x[:, rr, cc].double()
                else:
                    a[k, index[(rr, cc)]] -= weight
    u = torch.linalg.solve(a, b)
    for (r, c), k in index.items():
        assert torch.allclose(ours[:, r, c], u[k], atol=1e-6)
    assert torch.equal(ours[:, keep], x[:, keep].double())
    # One removed pixel amid kept ones: exactly its neighbours' weighted mean.
    one = torch.ones(5, 5, dtype=torch.bool)
    one[2, 2] = False
    y = torch.randn(1, 5, 5, generator=g)
    mean = stencil(y.double()[None] * one.double())[0, 0, 2, 2]  # weights sum to 1 inside
    assert float(impute(y, one)[0, 2, 2]) == pytest.approx(float(mean), abs=1e-6)


def test_road_keeps_the_rank_rules_count_on_a_map_full_of_ties():
    m = torch.zeros(12, 12)
    m[3:9, 3:9] = torch.rand(6, 6, generator=torch.Generator().manual_seed(0)) + 0.1
    assert (m == 0).float().mean() > 0.7  # the value rule would keep nothing at 10..70
    for morf in (True, False):
        masks = road_keep_masks(m, range(10, 100, 10), morf)
        assert [int(k.sum()) for k in masks] == [kept_count(144, p) for p in range(10, 100, 10)]
    model = RegionModel(list(range(40, 100)))
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    morf, lerf = road(Forwarder(class_probability(model, 0), x), x, m, noise=0.0)
    assert np.isfinite(morf.scores).all() and np.isfinite(lerf.scores).all()
    assert list(morf.fractions) == sorted(morf.fractions)


def test_metric_names_and_options():
    assert parse_metrics("Road, deletion,avg-drop") == ("deletion", "avgdrop", "road")
    assert metric_name("Average_Drop") == "avgdrop"
    with pytest.raises(ValueError) as e:
        parse_metrics("deletion,foo")
    assert str(e.value) == ("unknown metric 'foo'; known: deletion, insertion, avgdrop, "
                            "road, sanity, pointing")
    options = MetricOptions()
    assert (options.deletion_baseline, options.insertion_baseline) == ("zero", "blur")
    assert "RISE" in options.protocol() and "20 steps" in options.protocol()
    zero = MetricOptions(baseline="zero")
    assert (zero.deletion_baseline, zero.insertion_baseline) == ("zero", "zero")
    for bad in ({"steps": 0}, {"baseline": "black"}, {"road_percentiles": (0, 50)}):
        with pytest.raises(ValueError):
            MetricOptions(**bad)
