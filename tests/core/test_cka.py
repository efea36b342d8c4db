"""Linear CKA (core.compare.cka) against a direct numpy transcription of the formulas
(Kornblith et al. 2019's reference code: gram_linear, center_gram, cka; Nguyen et al. 2021's
eq. 3) and against ckatorch's functions, and its properties: symmetry, invariance to
orthogonal transforms and isotropic scaling, 1 for a layer with itself, the merge of
blocks and minibatches by addition."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import numpy as np
import pytest
import torch

from inspector.core.compare.cka import ExactCKA, MinibatchCKA, cka, gram, hsic1


def np_center_gram(k, unbiased=False):
    k = k.copy()
    if unbiased:
        n = k.shape[0]
        np.fill_diagonal(k, 0)
        means = np.sum(k, 0, dtype=np.float64) / (n - 2)
        means -= np.sum(means) / (2 * (n - 1))
        k -= means[:, None]
        k -= means[None, :]
        np.fill_diagonal(k, 0)
    else:
        means = np.mean(k, 0, dtype=np.float64)
        means -= np.mean(means) / 2
        k -= means[:, None]
        k -= means[None, :]
    return k


def np_cka(x, y, debiased=False):
    """Kornblith et al.'s cka(gram_linear(x), gram_linear(y))."""
    gx, gy = np_center_gram(x @ x.T, debiased), np_center_gram(y @ y.T, debiased)
    return gx.ravel().dot(gy.ravel()) / (np.linalg.norm(gx) * np.linalg.norm(gy))


def np_feature_cka(x, y):
    x, y = x - x.mean(0), y - y.mean(0)
    return np.linalg.norm(x.T @ y) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


def np_hsic1(k, l):  # noqa: E741
    n = k.shape[0]
    k, l = k.copy(), l.copy()  # noqa: E741
    np.fill_diagonal(k, 0)
    np.fill_diagonal(l, 0)
    one = np.ones(n)
    return (np.trace(k @ l) + (one @ k @ one) * (one @ l @ one) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * one @ k @ l @ one) / (n * (n - 3))


def ckatorch_core():
    """ckatorch.core, also where its __init__ cannot import (it imports matplotlib and
    seaborn for its plots): then through a stub package over the installed folder."""
    spec = importlib.util.find_spec("ckatorch")
    if spec is None:
        pytest.skip("ckatorch is not installed (make test installs it)")
    try:
        return importlib.import_module("ckatorch.core")
    except ImportError:
        stub = types.ModuleType("ckatorch")
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["ckatorch"] = stub
        return importlib.import_module("ckatorch.core")


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 300))
    y = x @ rng.standard_normal((300, 80)) + 0.5 * rng.standard_normal((50, 80))
    return x, y


def test_exact_cka_is_the_formula(data):
    x, y = data
    ref = np_cka(x, y)
    assert abs(cka(gram(torch.from_numpy(x)), gram(torch.from_numpy(y))) - ref) <= 1e-9
    assert abs(np_feature_cka(x, y) - ref) <= 1e-12  # the two forms of the reference agree
    # Through the float32 Gram a model's hooks use:
    x32, y32 = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    acc = ExactCKA(1, 1, 50)
    acc.add(torch.arange(50), torch.ones(50, dtype=torch.bool), [gram(x32)], [gram(y32)])
    assert abs(float(acc.value()[0, 0]) - ref) <= 1e-5


def test_hsic1_is_eq_3_and_ignores_a_shift(data):
    x, y = data
    k, l = x @ x.T, y @ y.T  # noqa: E741
    assert abs(hsic1(torch.from_numpy(k), torch.from_numpy(l)) - np_hsic1(k, l)) <= 1e-9 * abs(
        np_hsic1(k, l))
    xs = x + 5.0
    shifted = hsic1(torch.from_numpy(xs @ xs.T), torch.from_numpy(l))
    assert abs(shifted - np_hsic1(k, l)) <= 1e-8 * abs(np_hsic1(k, l))


def test_one_minibatch_of_all_images_is_the_debiased_cka(data):
    x, y = data
    mb = MinibatchCKA(1, 1)
    mb.add([gram(torch.from_numpy(x))], [gram(torch.from_numpy(y))])
    assert abs(float(mb.value()[0, 0]) - np_cka(x, y, debiased=True)) <= 1e-10


def test_properties(data):
    x, y = (torch.from_numpy(v) for v in data)
    base = cka(gram(x), gram(y))
    assert cka(gram(y), gram(x)) == base  # symmetric, bitwise
    q, _ = torch.linalg.qr(torch.randn(300, 300, generator=torch.Generator().manual_seed(1),
                                       dtype=torch.float64))
    assert abs(cka(gram(x @ q * 3.7), gram(y)) - base) <= 1e-6
    # Not invariant to an anisotropic scaling (the test above is not vacuous):
    scale = torch.linspace(0.1, 10, 300, dtype=torch.float64)
    assert abs(cka(gram(x * scale), gram(y)) - base) > 1e-3
    assert cka(gram(x), gram(x)) == pytest.approx(1.0, abs=1e-12)


def test_against_ckatorch(data):
    core = ckatorch_core()
    x, y = (torch.from_numpy(v) for v in data)
    assert abs(float(core.cka_base(x, y)) - cka(gram(x), gram(y))) <= 1e-6
    mb = MinibatchCKA(1, 1)
    mb.add([gram(x)], [gram(y)])
    assert abs(float(core.cka_base(x, y, unbiased=True)) - float(mb.value()[0, 0])) <= 1e-10
    g = torch.Generator().manual_seed(2)
    xb = torch.randn(8, 32, 100, generator=g, dtype=torch.float64)
    yb = xb @ torch.randn(100, 40, generator=g, dtype=torch.float64) + torch.randn(
        8, 32, 40, generator=g, dtype=torch.float64)
    batches = MinibatchCKA(1, 1)
    for i in range(8):
        batches.add([gram(xb[i])], [gram(yb[i])])
    assert abs(float(core.cka_batch(xb, yb)) - float(batches.value()[0, 0])) <= 1e-6


def _layers(seed=3, n=100):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, 500, generator=g) + 3, torch.relu(torch.randn(n, 64, generator=g))]
    ys = [xs[0] @ torch.randn(500, 70, generator=g), torch.randn(n, 20, generator=g)]
    return xs, ys


def test_exact_in_blocks_is_exact_over_all_images():
    xs, ys = _layers()
    whole = ExactCKA(2, 2, 100)
    whole.add(torch.arange(100), torch.ones(100, dtype=torch.bool), [gram(t) for t in xs],
              [gram(t) for t in ys])
    ref = np.array([[np_cka(a.double().numpy(), b.double().numpy()) for b in ys] for a in xs])
    assert np.abs(whole.value().numpy() - ref).max() <= 1e-5
    from inspector.batch.compare_models.plan import plan

    p = plan(100, "exact", 64, 256, 0)  # blocks of 32: 4 blocks, 6 forwards
    assert p.blocks == 4 and len(p.shards) == 6
    parts = []
    for (group,) in p.shards:
        idx = torch.tensor(group.images)
        part = ExactCKA(2, 2, 100)
        part.add(idx, torch.arange(len(idx)) < group.split, [gram(t[idx]) for t in xs],
                 [gram(t[idx]) for t in ys], group.diagonal, group.cross)
        parts.append(part)
    for order in (parts, parts[::-1]):  # any order: addition
        total = ExactCKA(2, 2, 100)
        for part in order:
            total.merge(ExactCKA.from_state(part.state()))
        assert total.images == 100
        assert (total.value() - whole.value()).abs().max() <= 1e-6


def test_a_diagonal_block_counted_twice_is_refused():
    xs, ys = _layers(n=8)
    acc = ExactCKA(2, 2, 8)
    for _ in range(2):
        acc.add(torch.arange(8), torch.ones(8, dtype=torch.bool), [gram(t) for t in xs],
                [gram(t) for t in ys])
    with pytest.raises(ValueError, match="twice"):
        acc.value()


def test_minibatch_states_merge_by_addition():
    xs, ys = _layers(n=96)
    whole = MinibatchCKA(2, 2)
    parts = [MinibatchCKA(2, 2) for _ in range(3)]
    for k in range(6):
        sl = slice(16 * k, 16 * (k + 1))
        grams = [gram(t[sl]) for t in xs], [gram(t[sl]) for t in ys]
        whole.add(*grams)
        parts[k % 3].add(*grams)
    total = MinibatchCKA(2, 2)
    for part in parts:
        total.merge(MinibatchCKA.from_state(part.state()))
    assert total.images == 96 and total.batches == 6
    assert (total.value() - whole.value()).abs().max() <= 1e-12
    with pytest.raises(ValueError, match="at least 4"):
        whole.add([gram(xs[0][:3])] * 2, [gram(ys[0][:3])] * 2)


def test_both_estimators_approach_the_population_value():
    """X = ZA, Y = ZB with Z ~ N(0, I): the population CKA is |A'B|^2 / (|A'A| |B'B|). Over
    4,096 images the biased exact estimate and the minibatch one (n = 64) are both close to
    it; they are different estimators and differ on few images (not asserted equal)."""
    g = torch.Generator().manual_seed(3)
    d = 64
    a = torch.randn(d, 512, generator=g, dtype=torch.float64)
    b = a[:, :128] @ torch.randn(128, 256, generator=g, dtype=torch.float64) + 2 * torch.randn(
        d, 256, generator=g, dtype=torch.float64)
    population = float((a.T @ b).norm() ** 2 / ((a.T @ a).norm() * (b.T @ b).norm()))
    z = torch.randn(4096, d, generator=g, dtype=torch.float64)
    x, y = z @ a, z @ b
    exact = ExactCKA(1, 1, 4096)
    exact.add(torch.arange(4096), torch.ones(4096, dtype=torch.bool), [gram(x)], [gram(y)])
    mb = MinibatchCKA(1, 1)
    for s in range(0, 4096, 64):
        mb.add([gram(x[s:s + 64])], [gram(y[s:s + 64])])
    assert abs(float(exact.value()[0, 0]) - population) < 0.005
    assert abs(float(mb.value()[0, 0]) - population) < 0.005
