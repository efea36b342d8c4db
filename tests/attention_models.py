"""Small random ViTs of the three families for the attention tests (nothing downloaded), and
reference attention read the plain way: torchvision's `need_weights=True,
average_attn_weights=False` on its own, timm's `fused_attn=False` with a hook on `attn_drop`,
Hugging Face's eager attention's second output."""

from __future__ import annotations

import pytest
import torch
from torch import nn

TIMM_SMALL = dict(img_size=64, embed_dim=64, depth=3, num_heads=4, num_classes=10)
TIMM_CASES = {  # name -> (options, prefix tokens, class token)
    "vit_tiny_patch16_224": (TIMM_SMALL, 1, True),
    "deit_tiny_patch16_224": (TIMM_SMALL, 1, True),
    "deit_tiny_distilled_patch16_224": (TIMM_SMALL, 2, True),
    "beit_base_patch16_224": (TIMM_SMALL, 1, True),
    "eva02_tiny_patch14_224": ({**TIMM_SMALL, "img_size": 56}, 1, True),
    "vit_little_patch16_reg4_gap_256": (TIMM_SMALL, 4, False),
    "vit_base_patch14_reg4_dinov2": ({**TIMM_SMALL, "img_size": 56}, 5, True),
}


def tv_vit(seed: int = 0, layers: int = 4, image_size: int = 64) -> nn.Module:
    """torchvision's VisionTransformer, small; its zero-initialised head given weights (with
    random weights every logit would be 0)."""
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(seed)
    model = VisionTransformer(image_size=image_size, patch_size=16, num_layers=layers,
                              num_heads=4, hidden_dim=64, mlp_dim=128, num_classes=10)
    nn.init.normal_(model.heads.head.weight, std=0.5)
    nn.init.normal_(model.heads.head.bias, std=0.1)
    return model.eval()


def timm_vit(name: str = "deit_tiny_patch16_224", seed: int = 0) -> tuple[nn.Module, int]:
    """(a small timm model of that architecture, its input side)."""
    timm = pytest.importorskip("timm")
    options = TIMM_CASES[name][0]
    torch.manual_seed(seed)
    return timm.create_model(name, pretrained=False, **options).eval(), options["img_size"]


def hf_vit(kind: str = "vit", implementation: str = "sdpa", seed: int = 0) -> nn.Module:
    """A small Hugging Face ViT (`vit`) or DeiT with teacher (`deit`)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    options = dict(image_size=64, patch_size=16, hidden_size=64, num_hidden_layers=3,
                   num_attention_heads=4, intermediate_size=128, num_labels=10)
    if kind == "vit":
        config, cls = transformers.ViTConfig(**options), transformers.ViTForImageClassification
    else:
        config = transformers.DeiTConfig(**options)
        cls = transformers.DeiTForImageClassificationWithTeacher
    config._attn_implementation = implementation
    return cls(config).eval()


def logits(output) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else output.logits


# -- reference attention, the plain way -------------------------------------------------------


def tv_reference(model: nn.Module, x: torch.Tensor, grad: bool = False):
    """(logits, per block (B, heads, N, N) attention, the tensors that multiplied V) from
    hooks asking nn.MultiheadAttention for need_weights=True, average_attn_weights=False."""
    attn, bases, handles = [], [], []

    def pre(mod, args, kwargs):
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    def post(mod, args, output):
        attn.append(output[1])
        bases.append(output[1]._base)

    for m in model.modules():
        if isinstance(m, nn.MultiheadAttention):
            handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(m.register_forward_hook(post))
    try:
        with torch.set_grad_enabled(grad):
            out = model(x)
    finally:
        for h in handles:
            h.remove()
    return out, attn, bases


def timm_reference(model: nn.Module, x: torch.Tensor, grad: bool = False):
    """(logits, per block attention) with every fused_attn set to False by hand and a hook
    on each attn_drop."""
    attn, handles, flags = [], [], []
    for m in model.modules():
        if isinstance(m.__dict__.get("fused_attn"), bool) and hasattr(m, "attn_drop"):
            flags.append((m, m.fused_attn))
            m.fused_attn = False
            handles.append(m.attn_drop.register_forward_hook(lambda mod, a, o: attn.append(o)))
    try:
        with torch.set_grad_enabled(grad):
            out = model(x)
    finally:
        for h in handles:
            h.remove()
        for m, flag in flags:
            m.fused_attn = flag
    return logits(out), attn


def vit_factory(layers: int = 4, heads: int = 4) -> str:
    """A factory file's source (`--model PATH:build`): tv_vit's model on 64 x 64 crops (16
    channels per head)."""
    return f'''
import torch
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer

CLASSES = [f"class {{i}}" for i in range(10)]
PREPROCESS = {{"crop_size": (64, 64), "resize_size": 72,
              "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}}


def build():
    torch.manual_seed(0)
    model = VisionTransformer(image_size=64, patch_size=16, num_layers={layers}, num_heads={heads},
                              hidden_dim={16 * heads}, mlp_dim=128, num_classes=10)
    nn.init.normal_(model.heads.head.weight, std=0.5)
    nn.init.normal_(model.heads.head.bias, std=0.1)
    return model
'''
