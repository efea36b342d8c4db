"""CAM methods: each against an independent computation or its defining property."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from inspector.core.explain.cam.compute import cam_from_capture, compute_cams
from inspector.core.explain.cam.methods import METHODS, method_name, normalize_maps
from inspector.core.explain.cam.targets import resolve_target
from inspector.core.hookset import remaining_hooks
from inspector.core.run.capture import Capture
from inspector.core.run.capture_spec import CaptureSpec

# -- an independent Grad-CAM, written here from the paper's definition ---------------------------


def reference_gradcam(model, x, layer, to_grid=lambda t: t, copy_output=False):
    """Hook the layer's output, back-propagate the top-1 logit of each image through the
    whole model, weights = mean gradient over h x w, ReLU of the weighted sum.
    copy_output: hand the model a copy, for layers whose output is later modified in place."""
    kept = {}

    def hook(module, args, output):
        kept["a"] = output
        output.register_hook(lambda g: kept.__setitem__("g", g))
        return output.clone() if copy_output else None

    handle = dict(model.named_modules())[layer].register_forward_hook(hook)
    try:
        with torch.enable_grad():
            logits = model(x)
            top = logits.argmax(dim=1)
            logits[torch.arange(len(x)), top].sum().backward()
    finally:
        handle.remove()
        model.zero_grad(set_to_none=True)
    a, g = to_grid(kept["a"].detach()), to_grid(kept["g"])
    raw = torch.relu((g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1))
    up = F.interpolate(raw[:, None], size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    lo = up.flatten(1).min(dim=1).values[:, None, None]
    hi = up.flatten(1).max(dim=1).values[:, None, None]
    return raw, ((up - lo) / (hi - lo)).numpy(), top.tolist()


def _assert_maps_close(ours, ref, tol=1e-5):
    scale = float(ref.abs().max())
    assert scale > 0, "degenerate test: the reference map is all zero"
    assert float((ours - ref).abs().max()) <= tol * scale


def test_gradcam_matches_independent_computation_resnet18():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(2, 3, 128, 128)
    raw_ref, cam_ref, top = reference_gradcam(model, x, "layer4")
    result = compute_cams(model, x, ["gradcam"], "layer4")
    assert result.targets == top
    _assert_maps_close(result.raw["gradcam"], raw_ref)
    np.testing.assert_allclose(result.cams["gradcam"], cam_ref, atol=1e-5)
    # The Session's path (kept tensors from a Capture) gives the same map for image 0.
    cap = Capture(model, CaptureSpec(keep=frozenset({"layer4"})))
    with cap, torch.enable_grad():
        xin = x[:1].clone().requires_grad_(True)
        logits = model(xin)
        torch.autograd.grad(logits[0, top[0]], xin)
    np.testing.assert_allclose(
        cam_from_capture("gradcam", cap, "layer4", (128, 128)), cam_ref[0], atol=1e-5
    )
    assert remaining_hooks(model) == []
    assert all(p.grad is None for p in model.parameters())  # no parameter gradient computed


@pytest.mark.slow
def test_gradcam_matches_independent_computation_vit_b_16():
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16().eval()
    nn.init.normal_(model.heads.head.weight, std=0.02)  # torchvision zero-inits the head
    x = torch.randn(1, 3, 224, 224)
    layer = "encoder.layers.encoder_layer_11.ln_1"

    def to_grid(tokens):  # drop the class token, 196 patches -> 14 x 14, channels first
        return tokens[:, 1:].reshape(len(tokens), 14, 14, -1).permute(0, 3, 1, 2)

    raw_ref, cam_ref, top = reference_gradcam(model, x, layer, to_grid)
    result = compute_cams(model, x, ["gradcam"], layer)
    assert result.targets == top
    assert result.layout.grid == (14, 14)
    _assert_maps_close(result.raw["gradcam"], raw_ref)
    np.testing.assert_allclose(result.cams["gradcam"], cam_ref, atol=1e-5)


# -- small hand-made models where each method's answer is known --------------------------------


class Fixed(nn.Module):
    """Returns given activations (B, K, h, w) scaled by the input's mean, so that they are a
    function of the input (for Score-CAM) yet known exactly."""

    def __init__(self, a: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("a", a)

    def forward(self, x):
        return self.a * x.mean(dim=(1, 2, 3)).reshape(-1, 1, 1, 1)


class GapHead(nn.Module):
    """Global average pooling + linear: Zhou et al.'s CAM architecture."""

    def __init__(self, a: torch.Tensor, weight: torch.Tensor) -> None:
        super().__init__()
        self.features = Fixed(a)
        self.fc = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        self.fc.weight.data.copy_(weight)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))


class FlatHead(nn.Module):
    """Flatten + linear: every location has its own weight (no pooling)."""

    def __init__(self, a: torch.Tensor, weight: torch.Tensor, bias: float = 0.0) -> None:
        super().__init__()
        self.features = Fixed(a)
        self.fc = nn.Linear(weight[0].numel(), weight.shape[0])
        self.fc.weight.data.copy_(weight.reshape(weight.shape[0], -1))
        self.fc.bias.data.fill_(bias)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


ONES = torch.ones(1, 3, 8, 8)  # input mean 1: the Fixed layer returns its activations as given


def _raw(model, method, target=None):
    return compute_cams(model, ONES, [method], "features", target).raw[method][0]


def test_gradcam_equals_class_activation_mapping_on_gap_model():
    # On GAP + linear the gradient is w_k / (h w) everywhere: Grad-CAM is Zhou et al.'s CAM.
    torch.manual_seed(1)
    a = torch.rand(1, 4, 4, 4)
    w = torch.tensor([[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, 1.0, -1.0]])
    model = GapHead(a, w)
    expected = torch.relu(torch.einsum("k,khw->hw", w[0], a[0])) / 16
    torch.testing.assert_close(_raw(model, "gradcam", 0), expected)


def test_hirescam_sums_to_the_score_and_localises():
    # With a per-location head, HiResCAM (before its ReLU) sums exactly to logit - bias; with
    # positive weights and activations the ReLU changes nothing.
    torch.manual_seed(2)
    a = torch.rand(1, 3, 4, 4) + 0.1
    w = torch.rand(2, 3, 4, 4)
    model = FlatHead(a, w, bias=0.7)
    logit = model(ONES)[0, 1].detach()
    assert float(_raw(model, "hirescam", 1).sum()) == pytest.approx(float(logit) - 0.7, rel=1e-5)
    # A class that reads one location only: HiResCAM marks only it, Grad-CAM spreads.
    w1 = torch.zeros(1, 3, 4, 4)
    w1[0, 0, 1, 2] = 1.0
    one = FlatHead(a, w1)
    hires = _raw(one, "hirescam", 0)
    assert torch.count_nonzero(hires) == 1 and hires[1, 2] > 0
    assert torch.count_nonzero(_raw(one, "gradcam", 0)) == 16


def test_xgradcam_conservation():
    # Fu et al.: for a bias-free linear head, sum over the map of XGrad-CAM = the score.
    torch.manual_seed(3)
    a = torch.rand(1, 5, 3, 3) + 0.1
    w = torch.rand(1, 5, 3, 3)
    model = FlatHead(a, w)
    score = float(model(ONES)[0, 0].detach())
    assert float(_raw(model, "xgradcam", 0).sum()) == pytest.approx(score, rel=1e-5)
    # Grad-CAM's weights (mean gradient) do not conserve the score on such a head.
    assert float(_raw(model, "gradcam", 0).sum()) != pytest.approx(score, rel=1e-2)


def test_layercam_ignores_negative_gradients():
    # Left half of the map has positive weights, right half negative: LayerCAM keeps only
    # the positive part, location by location (Grad-CAM would pool them first).
    a = torch.ones(1, 2, 4, 4)
    w = torch.ones(1, 2, 4, 4)
    w[..., 2:] = -3.0
    model = FlatHead(a, w)
    cam = _raw(model, "layercam", 0)
    assert torch.all(cam[:, :2] == 2.0)  # sum over 2 channels of 1 x 1
    assert torch.all(cam[:, 2:] == 0)
    assert torch.count_nonzero(_raw(model, "gradcam", 0)) == 0  # mean gradient is negative


def test_gradcam_pp_closed_form_on_gap_model():
    # Uniform gradient c_k = w_k / (h w): alpha = c^2 / (2 c^2 + c^3 sum A_k), weight = h w c alpha
    # for c_k > 0, and channels with negative gradients weigh nothing.
    torch.manual_seed(4)
    a = torch.rand(1, 3, 4, 4)
    w = torch.tensor([[2.0, -1.0, 0.5]])
    model = GapHead(a, w)
    c = w[0] / 16
    alpha = c**2 / (2 * c**2 + c**3 * a[0].sum(dim=(1, 2)) + 1e-6)  # 1e-6: the method's guard
    weights = torch.where(c > 0, 16 * c * alpha, torch.zeros(3))
    expected = torch.relu(torch.einsum("k,khw->hw", weights, a[0]))
    torch.testing.assert_close(_raw(model, "gradcam++", 0), expected, rtol=1e-4, atol=1e-6)


def test_eigencam_is_the_first_principal_component_and_ignores_the_class():
    # Rank-1 activations A_k(i, j) = u_k v(i, j): the first principal direction is u and
    # the map is v itself.
    torch.manual_seed(5)
    u = torch.rand(6) + 0.5
    v = torch.rand(5, 5)
    a = (u[:, None, None] * v)[None]
    model = GapHead(a, torch.randn(3, 6))
    maps = [_raw(model, "eigencam", t) for t in (0, 1, 2)]
    torch.testing.assert_close(maps[0] / maps[0].max(), v / v.max(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(maps[0], maps[1])
    torch.testing.assert_close(maps[0], maps[2])


class QuadrantModel(nn.Module):
    """Class 1 is decided by the top-left quadrant of the input alone. Its layer has one
    channel per quadrant (the mean intensity there, on that quadrant's cell) and two that see
    all four quadrants; class 0 has a fixed logit."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Identity()

    def forward(self, x):
        cells = F.avg_pool2d(x.mean(dim=1, keepdim=True), 8)[:, 0]  # (B, 2, 2) quadrant means
        onehot = torch.eye(4).reshape(4, 2, 2)
        a = torch.cat([onehot[None] * cells[:, None], cells[:, None].expand(-1, 2, 2, 2)], dim=1)
        a = self.layer(a)  # (B, 6, 2, 2)
        top_left = a[:, 0, 0, 0]
        return torch.stack([torch.full_like(top_left, 4.0), 10 * top_left], dim=1)


def test_scorecam_highlights_the_quadrant_the_class_depends_on():
    torch.manual_seed(6)
    model = QuadrantModel().eval()
    x = 0.2 + 0.8 * torch.rand(1, 3, 16, 16)
    calls = []
    result = compute_cams(model, x, ["scorecam"], "layer", target=1,
                          progress=lambda done, total: calls.append((done, total)),
                          score_batch_size=4)
    cam = result.cams["scorecam"][0]
    quadrants = [cam[:8, :8].mean(), cam[:8, 8:].mean(), cam[8:, :8].mean(), cam[8:, 8:].mean()]
    assert int(np.argmax(quadrants)) == 0
    assert quadrants[0] > 2 * max(quadrants[1:])
    assert calls[-1] == (6, 6) and len(calls) == 2  # 6 channels, 4 masked inputs a forward


# -- shared behaviour ---------------------------------------------------------------------------


def test_every_method_on_a_conv_net_gives_maps_in_unit_range():
    torch.manual_seed(7)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    )
    x = torch.randn(3, 3, 12, 12)
    result = compute_cams(model, x, list(METHODS), "2")
    for name, cam in result.cams.items():
        assert cam.shape == (3, 12, 12) and cam.dtype == np.float32, name
        assert np.isfinite(cam).all() and cam.min() >= 0 and cam.max() <= 1, name
    # "2" is a conv whose output the next ReLU modifies in place: the map reads the conv's
    # own output, as the independent computation does with a copy.
    raw_ref, _, _ = reference_gradcam(model, x, "2", copy_output=True)
    _assert_maps_close(result.raw["gradcam"], raw_ref)
    assert remaining_hooks(model) == []


def test_batch_equals_images_one_by_one():
    torch.manual_seed(8)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(2, 3, 64, 64)
    both = compute_cams(model, x, ["gradcam", "layercam"], "layer3", target=[3, 5])
    for i, t in enumerate((3, 5)):
        one = compute_cams(model, x[i : i + 1], ["gradcam", "layercam"], "layer3", target=t)
        for m in ("gradcam", "layercam"):
            np.testing.assert_allclose(both.cams[m][i], one.cams[m][0], atol=1e-5)


def test_targets_by_index_name_and_score_function():
    torch.manual_seed(9)
    a = torch.rand(1, 2, 3, 3)
    model = GapHead(a, torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    cats = ["cat", "dog", "both"]
    assert resolve_target("Dog", cats) == 1 and resolve_target("2", cats) == 2
    assert resolve_target("top1", cats) is None
    with pytest.raises(ValueError, match="did you mean 'dog'"):
        resolve_target("dgo", cats)
    by_name = compute_cams(model, ONES, ["gradcam"], "features", "dog", categories=cats)
    by_fn = compute_cams(model, ONES, ["gradcam"], "features", lambda logits: logits[:, 1])
    assert by_name.targets == [1] and by_fn.targets is None
    torch.testing.assert_close(by_name.raw["gradcam"], by_fn.raw["gradcam"])
    with pytest.raises(ValueError, match="out of range"):
        compute_cams(model, ONES, ["gradcam"], "features", 3)


def test_hooks_flags_and_grad_mode_restored_after_errors():
    model = torchvision.models.resnet18().train()
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match="out of range"):
        compute_cams(model, x, ["gradcam"], "layer4", target=5000)
    with pytest.raises(KeyError, match="no module named 'layer9'"):
        compute_cams(model, x, ["gradcam"], "layer9")
    with pytest.raises(ValueError, match="not a spatial map"):
        compute_cams(model, x, ["gradcam"], "fc")
    assert remaining_hooks(model) == []
    assert all(m.training for m in model.modules())
    assert torch.is_grad_enabled()
    assert all(p.grad is None for p in model.parameters())


def test_normalize_maps_handles_flat_and_broken_maps():
    maps = torch.stack([torch.zeros(2, 2), torch.full((2, 2), 3.0),
                        torch.tensor([[0.0, float("nan")], [1.0, 2.0]])])
    out = normalize_maps(maps, (4, 4))
    assert torch.isfinite(out).all()
    assert torch.all(out[0] == 0) and torch.all(out[1] == 1)
    assert out[2].min() == 0 and out[2].max() == 1


def test_method_names():
    assert method_name("Grad-CAM++") == "gradcam++"
    assert method_name("score_cam") == "scorecam"
    with pytest.raises(ValueError, match="unknown CAM method"):
        method_name("fullgrad")
