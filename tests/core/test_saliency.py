"""Input attributions: each method against what it must satisfy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from inspector.core.explain.attributions import (
    attribute,
    attribution_map,
    gradient_x_input,
    integrated_gradients,
    saliency,
    smoothgrad,
)
from inspector.core.explain.catalog import AttributionOptions


def small_cnn(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5),
    ).eval()


def linear_model(bias: bool) -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 3, bias=bias)).eval()


def input_gradient(model: nn.Module, x: torch.Tensor, target: int | None = None) -> torch.Tensor:
    """d score / d x by plain autograd, the reference the gradient methods are checked against:
    the score of `target` in every image, or of each image's top-1 class."""
    xin = x.clone().requires_grad_(True)
    logits = model(xin)
    rows = torch.arange(len(x))
    idx = logits.argmax(dim=1) if target is None else torch.full_like(rows, target)
    (grad,) = torch.autograd.grad(logits[rows, idx].sum(), xin)
    return grad


class BatchRecorder(nn.Module):
    """Wraps a model and records the batch size of every forward."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(len(x))
        return self.inner(x)


def test_integrated_gradients_completeness():
    model = small_cnn()
    torch.manual_seed(2)
    x = torch.randn(2, 3, 16, 16) * 2
    baseline = torch.zeros_like(x)
    result = integrated_gradients(model, x, steps=64, baseline=baseline, batch_size=16)
    with torch.no_grad():
        idx = torch.tensor(result.targets)
        rows = torch.arange(2)
        diff = model(x)[rows, idx] - model(baseline)[rows, idx]
    assert torch.all(diff.abs() > 0.05), "degenerate test: score(x) == score(baseline)"
    total = result.attributions.sum(dim=(1, 2, 3))
    assert torch.all((total - diff).abs() <= 0.01 * diff.abs()), (total, diff)
    torch.testing.assert_close(result.delta, total - diff, atol=1e-5, rtol=1e-4)


def test_integrated_gradients_memory_is_bounded_by_the_internal_batch():
    inner = small_cnn()
    recorder = BatchRecorder(inner)
    x = torch.randn(1, 3, 16, 16)
    small = integrated_gradients(recorder, x, target=2, steps=40, batch_size=6)
    assert max(recorder.sizes) <= 6
    big = integrated_gradients(inner, x, target=2, steps=40, batch_size=64)
    torch.testing.assert_close(small.attributions, big.attributions, atol=1e-6, rtol=1e-5)


def test_the_input_gradient_of_a_linear_model_is_its_weight_row():
    model = linear_model(bias=True)
    x = torch.randn(2, 3, 4, 4)
    result = gradient_x_input(model, x, target=1)
    weight = model[1].weight[1].detach().reshape(3, 4, 4)
    torch.testing.assert_close(result.attributions, weight.expand(2, 3, 4, 4) * x)
    assert result.targets == [1, 1]
    assert all(p.grad is None for p in model.parameters())  # only the input's gradient


def test_gradient_x_input_sums_to_the_score_without_bias():
    model = linear_model(bias=False)
    x = torch.randn(2, 3, 4, 4)
    result = gradient_x_input(model, x)  # top-1 per image
    torch.testing.assert_close(result.attributions.sum(dim=(1, 2, 3)), result.scores)
    with torch.no_grad():
        assert result.targets == model(x).argmax(dim=1).tolist()


def test_smoothgrad():
    x = torch.randn(1, 3, 4, 4)
    linear = linear_model(bias=True)
    # A linear model's gradient does not depend on the input: noise changes nothing.
    torch.testing.assert_close(
        smoothgrad(linear, x, target=0, samples=7, sigma=0.5, batch_size=3).attributions,
        input_gradient(linear, x, target=0),
    )
    cnn = small_cnn()
    xs = torch.randn(1, 3, 16, 16)
    # No noise: the plain input gradient; same seed: the same result; noise: a different one.
    torch.testing.assert_close(
        smoothgrad(cnn, xs, samples=3, sigma=0.0).attributions,
        input_gradient(cnn, xs), atol=1e-6, rtol=1e-5,
    )
    a = smoothgrad(cnn, xs, samples=5, sigma=0.2, seed=3).attributions
    b = smoothgrad(cnn, xs, samples=5, sigma=0.2, seed=3).attributions
    c = smoothgrad(cnn, xs, samples=5, sigma=0.2, seed=4).attributions
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


def test_class_is_fixed_on_the_clean_input():
    # SmoothGrad explains the clean input's top-1 class in every noisy sample.
    cnn = small_cnn()
    recorder = BatchRecorder(cnn)
    xs = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        top = int(cnn(xs).argmax())
    result = smoothgrad(recorder, xs, samples=4, sigma=1.0, batch_size=4)
    assert result.targets == [top]
    assert recorder.sizes == [1, 4]


def test_attribution_map_and_train_flag_restored():
    model = small_cnn().train()
    x = torch.randn(2, 3, 16, 16)
    result = saliency(model, x)
    assert all(m.training for m in model.modules())
    for reduce in ("abs_max", "abs_sum", "sum"):
        m = attribution_map(result.attributions, reduce)
        assert m.shape == (2, 16, 16) and m.dtype == np.float32
        assert m.min() >= 0 and m.max() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown reduction"):
        attribution_map(result.attributions, "mean")


# -- attribute(): the one entry point the CLI (and a Session run) calls ---------------------------


def smooth_cnn(seed: int = 0) -> nn.Module:
    """Smooth activations, so that IG's path integral has a discretisation error that
    shrinks steadily with the number of steps (ReLU kinks make it jump)."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.Tanh(), nn.Conv2d(6, 8, 3, stride=2, padding=1),
        nn.Softplus(), nn.Flatten(), nn.Linear(8 * 8 * 8, 4),
    ).eval()


@pytest.mark.parametrize("method", ["saliency", "gxi", "smoothgrad", "ig", "occlusion"])
def test_attribute_shapes_and_types(method):
    model = small_cnn()
    x = torch.randn(3, 12, 10)
    opts = AttributionOptions(ig_steps=4, smoothgrad_samples=3, occlusion_patch=4,
                              occlusion_stride=3)
    one = attribute(model, x, None, method, opts)
    assert one.shape == (3, 12, 10) and one.dtype == np.float32
    assert np.abs(one).max() > 0
    batch = attribute(model, torch.stack([x, x + 1]), 2, method, opts)
    assert batch.shape == (2, 3, 12, 10)
    np.testing.assert_allclose(batch[0], attribute(model, x, 2, method, opts), rtol=1e-5, atol=1e-6)


def test_saliency_is_the_absolute_input_gradient():
    model = small_cnn(3)
    x = torch.randn(1, 3, 16, 16)
    xin = x.clone().requires_grad_(True)
    score = model(xin)[0, 4]
    (grad,) = torch.autograd.grad(score, xin)
    got = attribute(model, x[0], 4, "saliency")
    np.testing.assert_allclose(got, grad.abs()[0].numpy(), rtol=1e-6, atol=1e-8)
    assert (got >= 0).all()
    signed = attribute(model, x[0], 4, "gxi")
    np.testing.assert_allclose(signed, (grad * x)[0].numpy(), rtol=1e-5, atol=1e-7)
    assert all(p.grad is None for p in model.parameters())


def test_integrated_gradients_completeness_tightens_with_steps():
    model = smooth_cnn()
    torch.manual_seed(5)
    x = torch.randn(3, 16, 16) * 2
    with torch.no_grad():
        target = int(model(x[None]).argmax())
        diff = float(model(x[None])[0, target] - model(torch.zeros(1, 3, 16, 16))[0, target])
    assert abs(diff) > 0.05, "degenerate test: score(x) == score(0)"
    errors = []
    for steps in (2, 8, 32):
        attr = attribute(model, x, target, "ig", AttributionOptions(ig_steps=steps))
        error = abs(float(attr.astype(np.float64).sum()) - diff) / abs(diff)
        # The trapezoid rule's error falls as 1 / steps^2 for a smooth path integrand.
        assert error <= 1.0 / steps**2, (steps, error)
        errors.append(error)
    assert errors[0] > errors[1] > errors[2], errors


def test_smoothgrad_is_reproducible_with_its_seed():
    model = small_cnn()
    x = torch.randn(3, 16, 16)

    def run(seed):
        return attribute(model, x, None, "smoothgrad",
                         AttributionOptions(smoothgrad_samples=4, smoothgrad_sigma=0.3, seed=seed))

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.allclose(run(7), run(8))


def test_unknown_method_and_bad_options_are_clear_errors():
    model = small_cnn()
    x = torch.randn(3, 8, 8)
    with pytest.raises(ValueError, match="unknown attribution method 'lime'; known: "
                                         "saliency, gxi, smoothgrad, ig, occlusion"):
        attribute(model, x, None, "lime")
    assert attribute(model, x, None, "Integrated-Gradients",
                     AttributionOptions(ig_steps=2)).shape == (3, 8, 8)
    with pytest.raises(ValueError, match="ig-steps must be at least 1"):
        AttributionOptions(ig_steps=0)
    with pytest.raises(ValueError, match="smoothgrad-sigma must be 0 or more"):
        AttributionOptions(smoothgrad_sigma=-0.1)
