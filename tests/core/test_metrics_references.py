"""The faithfulness metrics equal the reference implementations on the demo model:
deletion and insertion and Average Drop / Increase equal torch-cam's (DeletionInsertionMetric,
ClassificationMetric), ROAD with noise 0 (and seeded noise) pytorch-grad-cam's, the
imputation its NoisyLinearImputer, Spearman scipy's and SSIM scikit-image's.

The references are test-only (make test installs them); each test skips without its own.
Measured differences, for the tolerances: curves and AUCs up to 4e-7 (the batches are not
made up alike), ROAD 1.2e-7, imputed pixels 1.8e-7, Spearman 1e-16, SSIM 7e-9.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from metric_refs import (
    pgc_available,
    pgc_road,
    pgc_road_module,
    torchcam_avg_drop,
    torchcam_deletion_insertion,
)

from inspector import demo
from inspector.core.explain.cam.compute import compute_cams
from inspector.core.explain.metrics.confidence import confidence_change
from inspector.core.explain.metrics.curves import baseline_of, deletion_insertion
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.imputation import impute
from inspector.core.explain.metrics.road import road, road_keep_masks
from inspector.core.explain.metrics.scores import class_probability
from inspector.core.explain.metrics.similarity import spearman, ssim
from inspector.core.inputs.images import load_image
from inspector.core.models.base import ModelSpec
from inspector.core.models.load import load_model

CURVE_TOL = 1e-6
# pytorch-grad-cam's ROAD calls numpy on torch tensors (its code, not ours).
pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context")
needs_pgc = pytest.mark.skipif(not pgc_available(),
                               reason="pytorch-grad-cam (with scipy and opencv) not installed")


@pytest.fixture(scope="module")
def demo_inputs():
    loaded = load_model(ModelSpec("demo_shapes"))
    files = demo.sample_images()
    x = torch.stack([loaded.preprocess(load_image(f)) for f in files])
    cams = compute_cams(loaded.model, x, ["gradcam"], "stage3")
    return loaded.model, x, torch.from_numpy(cams.cams["gradcam"]), cams.targets


def _maps(cams, i: int):
    g = torch.Generator().manual_seed(i)
    return {"gradcam": cams[i], "random": torch.rand(cams.shape[-2:], generator=g)}


@pytest.mark.parametrize("steps", [20, 7])
def test_deletion_insertion_equal_torchcam_for_each_baseline(demo_inputs, steps):
    pytest.importorskip("torchcam")
    model, xs, cams, targets = demo_inputs
    for i in (0, 9):
        x, cls = xs[i : i + 1], targets[i]
        forwarder = Forwarder(class_probability(model, cls), x)
        for label, m in _maps(cams, i).items():
            for base in ("zero", "blur", "mean"):
                (d, ins), = deletion_insertion(forwarder, x, m, steps=steps,
                                               deletion_baseline=base, insertion_baseline=base)
                ref = torchcam_deletion_insertion(
                    model, x, m, cls, steps, None if base == "zero" else baseline_of(x, base))
                assert np.array_equal(d.fractions, ref[0].numpy()), (label, base)
                assert np.abs(d.scores - ref[1].numpy()).max() <= CURVE_TOL, (label, base)
                assert np.abs(ins.scores - ref[2].numpy()).max() <= CURVE_TOL, (label, base)
                assert abs(d.auc - ref[3]) <= CURVE_TOL and abs(ins.auc - ref[4]) <= CURVE_TOL


def test_rise_protocol_is_torchcams_deletion_to_zero_and_insertion_from_blur(demo_inputs):
    pytest.importorskip("torchcam")
    model, xs, cams, targets = demo_inputs
    x, cls, m = xs[5:6], targets[5], cams[5]
    forwarder = Forwarder(class_probability(model, cls), x)
    (d, ins), = deletion_insertion(forwarder, x, m)  # the defaults: RISE's protocol
    zero = torchcam_deletion_insertion(model, x, m, cls)
    blur = torchcam_deletion_insertion(model, x, m, cls, baseline=baseline_of(x, "blur"))
    assert (d.baseline, ins.baseline) == ("zero", "blur")
    assert np.abs(d.scores - zero[1].numpy()).max() <= CURVE_TOL
    assert np.abs(ins.scores - blur[2].numpy()).max() <= CURVE_TOL
    assert abs(d.auc - zero[3]) <= CURVE_TOL and abs(ins.auc - blur[4]) <= CURVE_TOL
    # 40 forwards for the two curves (p0 forwarded once more: it was not given).
    assert forwarder.forwards == 41


def test_average_drop_and_increase_equal_torchcam(demo_inputs):
    pytest.importorskip("torchcam")
    model, xs, cams, targets = demo_inputs
    increases = []
    for i in range(len(xs)):
        x, cls = xs[i : i + 1], targets[i]
        forwarder = Forwarder(class_probability(model, cls), x)
        for m in _maps(cams, i).values():
            (drop, up), = confidence_change(forwarder, x, m)
            ref_drop, ref_up = torchcam_avg_drop(model, x, m, cls)
            assert abs(drop - ref_drop) <= 1e-6 and up == ref_up
            increases.append(up)
    assert any(increases) and not all(increases)  # both cases were compared


def _tie_free(h: int, w: int, seed: int = 0) -> torch.Tensor:
    """A map without ties, exact in float32 for 2^14 values."""
    order = torch.randperm(h * w, generator=torch.Generator().manual_seed(seed)).float()
    return (order / (h * w)).reshape(h, w)


@needs_pgc
def test_road_equals_pytorch_grad_cam_without_noise_and_with_seeded_noise(demo_inputs):
    model, xs, _cams, targets = demo_inputs
    x, cls = xs[:1], targets[0]
    m = _tie_free(*x.shape[-2:])
    forwarder = Forwarder(class_probability(model, cls), x)
    for noise, seed in ((0.0, 0), (0.01, 3)):
        morf, lerf = road(forwarder, x, m, noise=noise, seed=seed)
        ref = pgc_road(model, x, m, cls, noise=noise, seed=seed)
        # Our curves run along the fraction removed: pytorch-grad-cam's percentiles reversed.
        assert np.allclose(morf.fractions, [0.9 - 0.1 * k for k in range(9)][::-1], atol=1e-4)
        assert np.abs(morf.scores[::-1] - ref["morf"].numpy()).max() <= 1e-5
        assert np.abs(lerf.scores[::-1] - ref["lerf"].numpy()).max() <= 1e-5


@needs_pgc
def test_road_rank_rule_equals_its_percentile_rule_on_a_map_without_ties():
    m = _tie_free(128, 128, seed=1)
    for morf in (True, False):
        v = m.numpy() if morf else (1 - m).numpy()
        value_rule = np.stack([v < np.percentile(v, p) for p in range(10, 100, 10)])
        assert np.array_equal(road_keep_masks(m, range(10, 100, 10), morf).numpy(), value_rule)


@needs_pgc
def test_imputation_equals_noisy_linear_imputer(demo_inputs):
    road_module = pgc_road_module()
    _model, xs, cams, _targets = demo_inputs
    random_keep = torch.rand(128, 128, generator=torch.Generator().manual_seed(2)) > 0.7
    hole_keep = road_keep_masks(cams[0], [30], True)[0]  # one large hole: the hard case
    for keep in (random_keep, hole_keep):
        ours = impute(xs[0], keep)
        ref = road_module.NoisyLinearImputer(noise=0.0)(xs[0], keep.float())
        assert (ours - ref).abs().max() <= 1e-6
    torch.manual_seed(5)
    ref = road_module.NoisyLinearImputer(noise=0.01)(xs[0], hole_keep.float())
    ours = impute(xs[0], hole_keep, 0.01, torch.Generator().manual_seed(5))
    assert (ours - ref).abs().max() <= 1e-6


def test_spearman_and_ssim_equal_scipy_and_scikit_image(demo_inputs):
    stats = pytest.importorskip("scipy.stats")
    metrics = pytest.importorskip("skimage.metrics")
    _model, _xs, cams, _targets = demo_inputs
    a, b = cams[0].numpy(), cams[3].numpy()
    ties = np.round(a * 4) / 4  # heavy ties, as in a ReLU'd CAM
    assert (a == 0).mean() > 0.2  # the CAM itself ties many pixels at 0
    for u, v in ((a, b), (ties, b), (ties, ties[::-1].copy())):
        assert abs(spearman(u, v) - stats.spearmanr(u.ravel(), v.ravel())[0]) <= 1e-12
        ref = metrics.structural_similarity(u.astype(np.float64), v.astype(np.float64),
                                            data_range=1.0)
        assert abs(ssim(u, v, 1.0) - ref) <= 1e-6
    assert spearman(a, a) == pytest.approx(1.0) and ssim(a, a) == pytest.approx(1.0)
    assert spearman(a, np.zeros_like(a)) is None  # constant: undefined, not NaN
