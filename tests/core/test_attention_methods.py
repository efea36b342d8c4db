"""Attention rollout, gradient rollout and LeGrad against direct implementations written here
from their references (vit-explain, Chefer et al.'s notebook, torch-cam), fed by attention
read the plain way; the same maps with fused attention on and off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inspector.core.explain.attention.explorer import (
    fuse,
    mean_attention_distance,
    patch_distances,
    query_index,
    query_maps,
)
from inspector.core.explain.attention.maps import attention_maps
from inspector.core.explain.attention.options import AttentionOptions
from inspector.core.explain.cam.methods import normalize_maps
from tests.attention_models import (
    TIMM_CASES,
    hf_vit,
    timm_reference,
    timm_vit,
    tv_reference,
    tv_vit,
)

# -- references, written from the papers' and repositories' code ----------------------------------


def vit_explain_rollout(attentions, discard_ratio, head_fusion, keepdim=True):
    """jacobgil/vit-explain's vit_rollout.rollout for a batch of one, prefix tokens `p`
    generalised; keepdim=False is the code as written (its issue #16), True the fix."""
    result = torch.eye(attentions[0].size(-1))
    for attention in attentions:
        fused = {"mean": lambda a: a.mean(axis=1), "max": lambda a: a.max(axis=1)[0],
                 "min": lambda a: a.min(axis=1)[0]}[head_fusion](attention).clone()
        flat = fused.view(fused.size(0), -1)
        _, indices = flat.topk(int(flat.size(-1) * discard_ratio), -1, False)
        indices = indices[indices != 0]
        flat[0, indices] = 0
        a = (fused + torch.eye(fused.size(-1))) / 2
        a = a / (a.sum(dim=-1, keepdim=True) if keepdim else a.sum(dim=-1))
        result = torch.matmul(a, result)
    return result[0]


def chefer_rollout(attentions, gradients):
    """Transformer-MM-Explainability's ViT notebook: avg_heads and apply_self_attention_rules."""
    n = attentions[0].shape[-1]
    r = torch.eye(n)
    for cam, grad in zip(attentions, gradients, strict=True):
        cam = cam.reshape(-1, n, n)
        grad = grad.reshape(-1, n, n)
        cam = (grad * cam).clamp(min=0).mean(dim=0)
        r = r + torch.matmul(cam, r)
    return r


def _close(ours, ref, rtol=1e-5):
    ours, ref = torch.as_tensor(ours).float(), torch.as_tensor(ref).float()
    scale = float(ref.abs().max())
    assert scale > 0, "degenerate test: the reference is all zero"
    assert float((ours - ref).abs().max()) <= rtol * scale, float((ours - ref).abs().max()) / scale


# -- rollout -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", ["mean", "max", "min"])
@pytest.mark.parametrize("discard", [0.0, 0.5, 0.9])
def test_rollout_equals_vit_explain_torchvision(fusion, discard):
    model, x = tv_vit(), torch.randn(1, 3, 64, 64)
    _, attn, _ = tv_reference(model, x)
    ref = vit_explain_rollout([a.detach() for a in attn], discard, fusion)[0, 1:].reshape(4, 4)
    maps = attention_maps(model, x, ["rollout"],
                          options=AttentionOptions(fusion=fusion, discard=discard))
    _close(maps.grids["rollout"][0], ref)
    if (fusion, discard) == ("mean", 0.0):  # where the code as written agrees with its fix
        _close(maps.grids["rollout"][0],
               vit_explain_rollout([a.detach() for a in attn], 0.0, "mean", keepdim=False)[0, 1:]
               .reshape(4, 4))
    torch.testing.assert_close(torch.from_numpy(maps.cams["rollout"]),
                               normalize_maps(maps.grids["rollout"], (64, 64)))


@pytest.mark.parametrize("name", ["deit_tiny_distilled_patch16_224", "vit_base_patch14_reg4_dinov2",
                                  "vit_little_patch16_reg4_gap_256"])
def test_rollout_drops_prefix_tokens_and_reads_patch_rows_without_a_class_token(name):
    model, side = timm_vit(name)
    _, prefix, class_token = TIMM_CASES[name]
    x = torch.randn(1, 3, side, side)
    _, attn = timm_reference(model, x)
    r = vit_explain_rollout([a.detach() for a in attn], 0.2, "max")
    ref = r[0, prefix:] if class_token else r[prefix:, prefix:].mean(dim=0)
    maps = attention_maps(model, x, ["rollout"], options=AttentionOptions("max", 0.2))
    assert maps.prefix == prefix and maps.grids["rollout"].shape == (1, *maps.grid)
    _close(maps.grids["rollout"][0].flatten(), ref)


# -- gradient rollout --------------------------------------------------------------------------


def test_gradrollout_equals_chefer_torchvision():
    model, x = tv_vit(), torch.randn(1, 3, 64, 64)
    out, attn, bases = tv_reference(model, x.clone().requires_grad_(True), grad=True)
    target = int(out.argmax())
    grads = torch.autograd.grad(out[0, target], bases)
    ref = chefer_rollout([a.detach() for a in attn], [g.reshape(a.shape) for g, a in
                                                       zip(grads, attn, strict=True)])
    maps = attention_maps(model, x, ["gradrollout"])
    assert maps.targets == [target]
    _close(maps.grids["gradrollout"][0].flatten(), ref[0, 1:])


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "deit_tiny_distilled_patch16_224",
                                  "beit_base_patch16_224", "eva02_tiny_patch14_224",
                                  "vit_little_patch16_reg4_gap_256"])
def test_gradrollout_equals_chefer_timm(name):
    model, side = timm_vit(name)
    _, prefix, class_token = TIMM_CASES[name]
    x = torch.randn(1, 3, side, side)
    out, attn = timm_reference(model, x.clone().requires_grad_(True), grad=True)
    target = int(out.argmax())
    grads = torch.autograd.grad(out[0, target], attn)
    r = chefer_rollout([a.detach() for a in attn], grads)
    ref = r[0, prefix:] if class_token else r[prefix:, prefix:].mean(dim=0)
    maps = attention_maps(model, x, ["gradrollout"])
    _close(maps.grids["gradrollout"][0].flatten(), ref)


def test_each_image_of_a_batch_gets_its_own_map():
    model = tv_vit()
    x = torch.randn(2, 3, 64, 64)
    both = attention_maps(model, x, ["rollout", "gradrollout", "legrad"], target=[3, 7])
    for i in range(2):
        one = attention_maps(model, x[i:i + 1], ["rollout", "gradrollout", "legrad"],
                             target=[3, 7][i])
        for method in ("rollout", "gradrollout", "legrad"):
            _close(both.grids[method][i], one.grids[method][0])


# -- fused on and off --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "beit_base_patch16_224",
                                  "vit_base_patch14_reg4_dinov2"])
def test_fused_and_unfused_timm_models_give_the_same_maps(name):
    model, side = timm_vit(name)
    x = torch.randn(1, 3, side, side)
    fused = attention_maps(model, x, ["rollout", "gradrollout", "legrad"])
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    unfused = attention_maps(model, x, ["rollout", "gradrollout", "legrad"])
    for method in ("rollout", "gradrollout", "legrad"):
        _close(fused.grids[method], unfused.grids[method])
    assert all(not m.fused_attn for m in model.modules() if hasattr(m, "fused_attn"))


@pytest.mark.parametrize("kind", ["vit", "deit"])
def test_hugging_face_sdpa_and_eager_give_the_same_maps(kind):
    x = torch.randn(1, 3, 64, 64)
    sdpa = attention_maps(hf_vit(kind, "sdpa"), x, ["rollout", "gradrollout", "legrad"])
    eager = attention_maps(hf_vit(kind, "eager"), x, ["rollout", "gradrollout", "legrad"])
    assert sdpa.prefix == (2 if kind == "deit" else 1)
    for method in ("rollout", "gradrollout", "legrad"):
        _close(sdpa.grids[method], eager.grids[method])


# -- LeGrad ------------------------------------------------------------------------------------


def test_legrad_equals_torch_cam():
    pytest.importorskip("torchcam")
    from torchcam.methods import LeGrad

    model, x = tv_vit(layers=4), torch.randn(1, 3, 64, 64)
    target = int(model(x).argmax())
    with LeGrad(model, list(model.encoder.layers)[-2:]) as extractor:
        scores = model(x)
        raw = extractor(class_idx=target, scores=scores, normalized=False, retain_graph=True)[0]
        normed = extractor(class_idx=target, scores=scores, normalized=True)[0]
    ours = attention_maps(model, x, ["legrad"], legrad_from="encoder.layers.encoder_layer_2")
    assert ours.blocks["legrad"] == ("encoder.layers.encoder_layer_2 to "
                                     "encoder.layers.encoder_layer_3 (2 blocks)")
    torch.testing.assert_close(ours.grids["legrad"], raw.float(), rtol=1e-5, atol=1e-8)
    lo = ours.grids["legrad"].amin(dim=(1, 2), keepdim=True)
    hi = ours.grids["legrad"].amax(dim=(1, 2), keepdim=True)
    torch.testing.assert_close((ours.grids["legrad"] - lo) / (hi - lo + 1e-8), normed.float(),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", ["torchvision", "timm"])
def test_legrad_equals_a_direct_implementation(family):
    """Each block's own score: the head on the final norm of the mean of its tokens; the
    ReLU of its gradient w.r.t. that block's attention, averaged over heads and queries."""
    if family == "torchvision":
        model, side = tv_vit(), 64
        blocks = list(model.encoder.layers)[-4:]

        def head(z):
            return model.heads(model.encoder.ln(z))
    else:
        model, side = timm_vit("deit_tiny_distilled_patch16_224")
        blocks = list(model.blocks)

        def head(z):
            z = model.fc_norm(model.norm(z))
            return (model.head(z) + model.head_dist(z)) / 2
    prefix = 1 if family == "torchvision" else 2
    x = torch.randn(1, 3, side, side)
    outs, handles = {}, [b.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o))
                         for i, b in enumerate(blocks)]
    try:
        if family == "torchvision":
            logits, attn, bases = tv_reference(model, x.clone().requires_grad_(True), grad=True)
            roots = bases[-4:]
        else:
            logits, attn = timm_reference(model, x.clone().requires_grad_(True), grad=True)
            roots = attn
    finally:
        for h in handles:
            h.remove()
    target = int(logits.argmax())
    maps = []
    for i, root in enumerate(roots):
        (g,) = torch.autograd.grad(head(outs[i].mean(dim=1))[0, target], root, retain_graph=True)
        g = g.reshape(attn[-len(roots) + i].shape)
        maps.append(g.relu().mean(dim=(1, 2))[:, prefix:])
    ref = torch.stack(maps).mean(dim=0)
    ours = attention_maps(model, x, ["legrad"])
    _close(ours.grids["legrad"].flatten(), ref.flatten())


def test_legrad_refuses_a_layer_outside_the_blocks():
    with pytest.raises(ValueError, match="not in a transformer block"):
        attention_maps(tv_vit(), torch.randn(1, 3, 64, 64), ["legrad"], legrad_from="conv_proj")


# -- the explorer's numbers --------------------------------------------------------------------


def test_mean_attention_distance_of_identity_and_uniform_attention():
    grid, prefix = (4, 4), 1
    n = prefix + 16
    identity = np.eye(n)[None]
    assert mean_attention_distance(identity, prefix, grid)[0] == pytest.approx(0.0)
    uniform = np.full((1, n, n), 1.0 / n)
    pairwise = patch_distances(grid).mean()
    assert mean_attention_distance(uniform, prefix, grid)[0] == pytest.approx(pairwise)
    assert pairwise == pytest.approx(2.0080, abs=1e-4)


def test_a_clicked_patch_reads_its_own_row():
    rng = np.random.default_rng(0)
    a = rng.random((3, 1 + 2 * 3, 1 + 2 * 3)).astype(np.float32)  # 3 heads, a 2 x 3 grid
    q = query_index(1, 2, 1, (2, 3))
    assert q == 1 + 1 * 3 + 2
    maps = query_maps(a, q, 1, (2, 3))
    assert maps.shape == (3, 2, 3)
    np.testing.assert_array_equal(maps[2].ravel(), a[2, q, 1:])
    np.testing.assert_array_equal(query_maps(a, None, 1, (2, 3))[0].ravel(), a[0, 0, 1:])
    np.testing.assert_allclose(query_maps(a, None, 1, (2, 3), class_token=False)[1].ravel(),
                               a[1, 1:, 1:].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(fuse(maps, "max"), maps.max(axis=0))
    with pytest.raises(ValueError, match="outside"):
        query_index(2, 0, 1, (2, 3))
