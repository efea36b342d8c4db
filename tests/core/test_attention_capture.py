"""AttentionCapture: attention probabilities of torchvision, timm and Hugging Face ViTs, fused
or not, without changing the outputs, and nothing of it left behind after the run."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from inspector.core.explain.attention.capture import AttentionCapture
from inspector.core.explain.attention.find import NO_ATTENTION, find_attention, refusal
from inspector.core.hookset import remaining_hooks
from inspector.core.models.tree import build_tree
from tests.attention_models import (
    TIMM_CASES,
    hf_vit,
    logits,
    timm_reference,
    timm_vit,
    tv_reference,
    tv_vit,
)

TOL = dict(rtol=1e-5, atol=1e-5)


def _captured_logits(model, x, grad):
    found = find_attention(model)
    with torch.set_grad_enabled(False), AttentionCapture(model, found, grad=grad) as cap:
        out = logits(model(x))
    return out, cap


@pytest.mark.parametrize("grad", [False, True])
def test_torchvision_logits_and_probabilities_equal_need_weights(grad):
    model, x = tv_vit(), torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        plain = model(x)
    ref_logits, ref_attn, _ = tv_reference(model, x)
    out, cap = _captured_logits(model, x, grad)
    torch.testing.assert_close(out, plain, **TOL)
    assert torch.equal(ref_logits, plain)
    assert len(cap.captured) == 4
    for ours, ref in zip(cap.probs(), ref_attn, strict=True):
        assert ours.shape == (2, 4, 17, 17)
        torch.testing.assert_close(ours.detach(), ref, rtol=0, atol=0)
        torch.testing.assert_close(ours.detach().sum(-1), torch.ones(2, 4, 17), **TOL)
    assert remaining_hooks(model) == []


def test_torchvision_gradients_equal_those_of_the_tensor_that_multiplied_v():
    model, x = tv_vit(), torch.randn(1, 3, 64, 64)
    out, _, bases = tv_reference(model, x.clone().requires_grad_(True), grad=True)
    target = int(out.argmax())
    ref = torch.autograd.grad(out[0, target], bases)
    ours_out, cap = _captured_logits(model, x, grad=True)
    ours = cap.gradients(ours_out[0, target])
    for g, r in zip(ours, ref, strict=True):
        torch.testing.assert_close(g, r.reshape(g.shape), rtol=1e-5, atol=1e-7)
        assert float(g.abs().max()) > 0


def _hand_written_block(block, x):
    """A torchvision EncoderBlock written out with an explicit leaf P for the attention."""
    attn = block.self_attention
    h = block.ln_1(x)
    d, heads = attn.embed_dim, attn.num_heads
    qkv = h @ attn.in_proj_weight.T + attn.in_proj_bias
    q, k, v = (t.reshape(x.shape[0], -1, heads, d // heads).transpose(1, 2)
               for t in qkv.split(d, dim=-1))
    p = ((q @ k.transpose(-1, -2)) / (d // heads) ** 0.5).softmax(-1).detach().requires_grad_(True)
    o = (p @ v).transpose(1, 2).reshape(x.shape[0], -1, d)
    y = x + attn.out_proj(o)
    return y + block.mlp(block.ln_2(y)), p


def test_torchvision_gradient_equals_a_hand_written_block_with_a_leaf():
    model, x = tv_vit(layers=1), torch.randn(1, 3, 64, 64)
    tokens = model._process_input(x)
    tokens = torch.cat([model.class_token.expand(1, -1, -1), tokens], dim=1)
    z = model.encoder.dropout(tokens + model.encoder.pos_embedding)
    block = model.encoder.layers[0]
    y, p = _hand_written_block(block, z)
    out = model.heads(model.encoder.ln(y)[:, 0])
    target = int(out.argmax())
    (ref,) = torch.autograd.grad(out[0, target], p)
    ours_out, cap = _captured_logits(model, x, grad=True)
    torch.testing.assert_close(ours_out, out.detach(), **TOL)
    (ours,) = cap.gradients(ours_out[0, target])
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(TIMM_CASES))
@pytest.mark.parametrize("grad", [False, True])
def test_timm_logits_and_probabilities_equal_fused_attn_off(name, grad):
    model, side = timm_vit(name)
    _, prefix, class_token = TIMM_CASES[name]
    x = torch.randn(2, 3, side, side)
    flags = [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")]
    assert all(flags), "the models are built with fused attention"
    with torch.no_grad():
        plain = model(x)
    ref_logits, ref_attn = timm_reference(model, x)
    out, cap = _captured_logits(model, x, grad)
    torch.testing.assert_close(out, plain, **TOL)
    found = cap.found
    assert (found.prefix, found.class_token) == (prefix, class_token)
    assert len(cap.captured) == 3 == len(ref_attn)
    for ours, ref in zip(cap.probs(), ref_attn, strict=True):
        torch.testing.assert_close(ours.detach(), ref, rtol=0, atol=0)
    assert [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")] == flags
    assert remaining_hooks(model) == []
    assert cap.check(2, (side, side)) == ""


@pytest.mark.parametrize("kind", ["vit", "deit"])
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_hugging_face_logits_unchanged_and_the_implementation_put_back(kind, implementation):
    model = hf_vit(kind, implementation)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        plain = logits(model(x))
    for grad in (False, True):
        out, cap = _captured_logits(model, x, grad)
        torch.testing.assert_close(out, plain, **TOL)
        assert model.config._attn_implementation == implementation
        assert [c.probs.shape for c in cap.captured] == [(2, 4, 18 if kind == "deit" else 17,
                                                          18 if kind == "deit" else 17)] * 3
        assert remaining_hooks(model) == []
    assert cap.found.prefix == (2 if kind == "deit" else None)
    assert cap.layout((64, 64)) == (2 if kind == "deit" else 1, (4, 4))


def test_hugging_face_eager_weights_are_what_the_score_depends_on():
    model = hf_vit("vit", "eager")
    x = torch.randn(1, 3, 64, 64)
    caught, handles = [], []
    for n in find_attention(model).attention:
        m = dict(model.named_modules())[n]
        handles.append(m.register_forward_hook(lambda mod, a, o: caught.append(o[1])))
    with torch.enable_grad():
        out = logits(model(x.requires_grad_(True)))
    for h in handles:
        h.remove()
    ref = torch.autograd.grad(out[0, 3], caught)
    ours_out, cap = _captured_logits(hf_vit("vit", "sdpa"), x.detach(), grad=True)
    ours = cap.gradients(ours_out[0, 3])
    for g, r in zip(ours, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-7)


class _Boom(Exception):
    pass


@pytest.mark.parametrize("family", ["torchvision", "timm", "hf"])
def test_nothing_is_left_behind_when_the_forward_raises(family):
    model = {"torchvision": tv_vit, "timm": lambda: timm_vit()[0], "hf": hf_vit}[family]()
    found = find_attention(model)
    blocks = dict(model.named_modules())
    mlp = next(n for n in blocks if n.startswith(found.blocks[1] + ".") and "mlp" in n)

    def boom(*_):
        raise _Boom()

    flags = {n: m.fused_attn for n, m in model.named_modules() if hasattr(m, "fused_attn")}
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    handle = blocks[mlp].register_forward_hook(boom)
    before = torch.is_grad_enabled()
    with torch.no_grad(), pytest.raises(_Boom):
        with AttentionCapture(model, found, grad=True, keep_blocks=found.blocks):
            model(torch.randn(1, 3, 64, 64))
    handle.remove()
    assert torch.is_grad_enabled() == before
    assert remaining_hooks(model) == []
    assert {n: m.fused_attn for n, m in model.named_modules() if hasattr(m, "fused_attn")} == flags
    assert getattr(getattr(model, "config", None), "_attn_implementation", None) == implementation


def test_the_graph_starts_at_the_first_attention_and_is_let_go():
    import weakref

    model, x = tv_vit(), torch.randn(1, 3, 64, 64)
    found = find_attention(model)
    with torch.no_grad():
        with AttentionCapture(model, found, grad=True) as cap:
            out = model(x)
        assert not torch.is_grad_enabled()  # the leaf turned it on, the exit off again
    assert out.requires_grad and cap.leaf is not None
    cap.gradients(out[0, 0])
    assert all(p.grad is None for p in model.parameters())  # no parameter gradient
    leaf = weakref.ref(cap.leaf)
    cap.release()
    del out
    assert leaf() is None


def _counting_sdpa(monkeypatch):
    calls = [0]
    real = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    return calls


@pytest.mark.parametrize("family", ["timm", "hf"])
def test_the_fused_kernel_runs_again_after_a_capture(family, monkeypatch):
    model = timm_vit()[0] if family == "timm" else hf_vit("vit", "sdpa")
    calls = _counting_sdpa(monkeypatch)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        model(x)
    assert calls[0] == 3
    with torch.no_grad(), AttentionCapture(model, find_attention(model)):
        model(x)
    assert calls[0] == 3  # none during the capture: the probabilities were materialised
    with torch.no_grad():
        model(x)
    assert calls[0] == 6


def test_torchvision_runs_its_native_kernel_again_after_a_capture(monkeypatch):
    model, x = tv_vit(), torch.randn(1, 3, 64, 64)
    calls, asked = [0], []
    real = torch._native_multi_head_attention

    def counted(*args, **kwargs):
        calls[0] += 1
        asked.append(args[10])  # need_weights
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_native_multi_head_attention", counted)
    with torch.no_grad(), AttentionCapture(model, find_attention(model)):
        model(x)
    with torch.no_grad():
        model(x)
    assert calls[0] == 8
    assert asked == [True] * 4 + [False] * 4


def test_models_without_softmax_attention_over_the_grid_are_refused():
    x = torch.randn(1, 3, 224, 224)
    for model in (torchvision.models.resnet18(), torchvision.models.convnext_tiny(),
                  torchvision.models.swin_t()):
        model.eval()
        assert find_attention(model) is None
        assert refusal(model, build_tree(model, x)) == NO_ATTENTION
    vit = tv_vit()
    assert refusal(vit, build_tree(vit, torch.randn(1, 3, 64, 64))) == ""


def test_windowed_attention_is_refused_with_its_reason():
    timm = pytest.importorskip("timm")
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, img_size=56,
                              embed_dim=32, depths=(1, 1), num_heads=(2, 4), num_classes=10,
                              window_size=7).eval()
    x = torch.randn(1, 3, 56, 56)
    found = find_attention(model)
    assert found is not None and found.family == "timm"
    why = refusal(model, build_tree(model, x), found)
    assert "windows of 49 tokens" in why and why.endswith("not defined for it.")
    assert "\n" not in why
    with torch.no_grad(), AttentionCapture(model, found) as cap:
        model(x)
    assert "not one softmax over the whole patch grid" in cap.check(1, (56, 56))
    assert remaining_hooks(model) == []


def test_hugging_face_swin_is_refused():
    transformers = pytest.importorskip("transformers")
    config = transformers.SwinConfig(image_size=64, embed_dim=16, depths=[1, 1],
                                     num_heads=[2, 2], window_size=4, num_labels=3)
    model = transformers.SwinForImageClassification(config).eval()
    assert find_attention(model) is None


def test_a_non_softmax_attention_is_refused():
    model, side = timm_vit()
    found = find_attention(model)

    def doubled(mod, args, output):  # an attention whose rows do not sum to 1 (DiffAttention)
        return output * 2

    handle = model.blocks[0].attn.attn_drop.register_forward_hook(doubled)  # before ours
    try:
        with torch.no_grad(), AttentionCapture(model, found) as cap:
            model(torch.randn(1, 3, side, side))
    finally:
        handle.remove()
    assert "not a softmax" in cap.check(1, (side, side))


def test_only_the_named_attention_is_read():
    model, side = timm_vit()
    found = find_attention(model)
    with torch.no_grad(), AttentionCapture(model, found, only={"blocks.2.attn"}) as cap:
        assert [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")] == [
            True, True, False]
        model(torch.randn(1, 3, side, side))
    assert [c.name for c in cap.captured] == ["blocks.2.attn"]


def test_a_batch_first_free_multihead_attention_is_read_too():
    class Tokens(nn.Module):  # a (N, B, D) self-attention over a 4 x 4 grid, no class token
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, 16, 16, 16)
            self.attention = nn.MultiheadAttention(16, 2)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            t = self.embed(x).flatten(2).permute(2, 0, 1)
            t, _ = self.attention(t, t, t, need_weights=False)
            return self.head(t.mean(0))

    torch.manual_seed(0)
    model, x = Tokens().eval(), torch.randn(1, 3, 64, 64)
    found = find_attention(model)
    assert refusal(model, build_tree(model, x), found) == ""
    with torch.no_grad():
        plain = model(x)
    with torch.no_grad(), AttentionCapture(model, found) as cap:
        torch.testing.assert_close(model(x), plain, **TOL)
    assert cap.captured[0].probs.shape == (1, 2, 16, 16)
    assert cap.layout((64, 64)) == (0, (4, 4))
