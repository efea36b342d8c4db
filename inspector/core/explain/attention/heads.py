"""A model's own final norm and classifier head applied to one block's tokens, per family:
what the logit lens reads after each block, and the per-block score LeGrad differentiates.

    family       final norm             head on the class token / pooled tokens
    torchvision  encoder.ln             heads(ln(x)[:, 0])
    timm         norm                   forward_head(norm(x)): the model's own pooling
                                        (class token, mean, attention pool, DeiT's two heads)
    Hugging Face <base>.layernorm       classifier(h[:, 0]); DeiT with teacher: the mean of
                                        cls_classifier(h[:, 0]) and distillation_classifier(h[:, 1])

So the last block's lens is the model's own output. LeGrad's score (Bousselham et al.
2024, as torch-cam computes it for torchvision) is the head on the final norm of the mean
of all tokens, class token included.

`HeadMissing` says in one sentence which part a model lacks.
"""

from __future__ import annotations

import torch
from torch import nn

from inspector.core.explain.attention.find import HF, TIMM, TORCHVISION, AttentionModel


class HeadMissing(ValueError):
    """The model has no final norm and head this module knows how to apply."""


def _part(owner, name: str, what: str) -> nn.Module:
    part = getattr(owner, name, None)
    if not isinstance(part, nn.Module):
        raise HeadMissing(f"the model has no {what} ('{name}'), so the logit lens and LeGrad "
                          f"cannot apply its head to a block's tokens")
    return part


def _hf_base(model: nn.Module) -> nn.Module:
    return _part(model, getattr(model, "base_model_prefix", "") or "base", "base model")


def lens_logits(model: nn.Module, found: AttentionModel, tokens: torch.Tensor) -> torch.Tensor:
    """(B, classes): the model's final norm and head on a block's output tokens (B, N, D)."""
    if found.family == TORCHVISION:
        ln = _part(_part(model, "encoder", "encoder"), "ln", "final norm")
        return _part(model, "heads", "head")(ln(tokens)[:, 0])
    if found.family == TIMM:
        norm = _part(model, "norm", "final norm")
        head = getattr(model, "forward_head", None)
        if head is None:
            raise HeadMissing("the model has no forward_head, so the logit lens cannot apply "
                              "its head to a block's tokens")
        return head(norm(tokens))
    if found.family == HF:
        h = _part(_hf_base(model), "layernorm", "final norm")(tokens)
        if hasattr(model, "distillation_classifier"):
            return (model.cls_classifier(h[:, 0]) + model.distillation_classifier(h[:, 1])) / 2
        return _part(model, "classifier", "classifier")(h[:, 0])
    raise HeadMissing(f"no head is known for the {found.family} family")


def legrad_scores(model: nn.Module, found: AttentionModel, tokens: torch.Tensor) -> torch.Tensor:
    """(B, classes): LeGrad's score of a block, the head on the final norm of the mean of
    all its output tokens (B, N, D)."""
    z = tokens.mean(dim=1)
    if found.family == TORCHVISION:
        ln = _part(_part(model, "encoder", "encoder"), "ln", "final norm")
        return _part(model, "heads", "head")(ln(z))
    if found.family == TIMM:
        z = _part(model, "norm", "final norm")(z)
        fc_norm = getattr(model, "fc_norm", None)
        z = fc_norm(z) if isinstance(fc_norm, nn.Module) else z
        head = _part(model, "head", "head")
        dist = getattr(model, "head_dist", None)
        if isinstance(dist, nn.Module):
            return (head(z) + dist(z)) / 2
        return head(z)
    if found.family == HF:
        z = _part(_hf_base(model), "layernorm", "final norm")(z)
        if hasattr(model, "distillation_classifier"):
            return (model.cls_classifier(z) + model.distillation_classifier(z)) / 2
        return _part(model, "classifier", "classifier")(z)
    raise HeadMissing(f"no head is known for the {found.family} family")
