"""Attention maps: short functions of a run's attention probabilities A_l (B, heads, N, N),
for blocks l = 1..L in forward order, and their gradients; each returns (B, patches), the
map over the patch grid in row-major order (reshape to (B, gh, gw)).

- `rollout` (Abnar & Zuidema 2020, with vit-explain's options): per block the heads fused
  (mean, max or min), optionally the lowest entries discarded, Â = 0.5 A + 0.5 I with rows
  renormalised to 1, R = Â_L ... Â_1.
- `gradrollout` (Chefer, Gur & Wolf 2021, "Generic Attention-model Explainability", rules 5
  and 6): R = I; per block R <- R + mean_h(max(0, dA ⊙ A)) R, with dA the gradient of the
  class score with respect to A.
- `legrad` (Bousselham et al. 2024, as torch-cam 0.5.0 computes it): per block the gradient
  of that block's own class score (heads.legrad_scores) with respect to its attention,
  ReLU, the mean over heads and queries; the mean over the blocks.

The map is the class token's row over the patch tokens (prefix tokens dropped); without a
class token, the mean over the patch rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inspector.core.explain.attention.capture import AttentionCapture
from inspector.core.explain.attention.heads import legrad_scores
from inspector.core.explain.attention.options import FUSIONS


def fuse_heads(a: torch.Tensor, fusion: str) -> torch.Tensor:
    """(B, heads, N, N) -> (B, N, N): the mean, max or min over the heads."""
    if fusion == "mean":
        return a.mean(dim=1)
    if fusion == "max":
        return a.amax(dim=1)
    if fusion == "min":
        return a.amin(dim=1)
    raise ValueError(f"unknown head fusion '{fusion}': {', '.join(FUSIONS)}")


def discard_lowest(a: torch.Tensor, ratio: float) -> torch.Tensor:
    """vit-explain's discard_ratio, per image: the int(N*N*ratio) lowest entries of each
    fused (N, N) matrix set to 0, but entry [0, 0] (the class token's attention to itself),
    which vit-explain spares. It discards after the heads are fused, as vit-explain does."""
    if ratio <= 0:
        return a
    b, n, _ = a.shape
    k = int(n * n * ratio)
    if k < 1:
        return a
    flat = a.reshape(b, n * n).clone()
    lowest = flat.topk(k, dim=-1, largest=False).indices
    kept = flat[:, 0].clone()
    flat.scatter_(1, lowest, 0.0)
    flat[:, 0] = kept
    return flat.reshape(b, n, n)


def patch_row(r: torch.Tensor, prefix: int, class_token: bool) -> torch.Tensor:
    """(B, N, N) relevance -> (B, patches): the class token's row over the patch tokens, or
    without a class token the mean over the patch rows."""
    if class_token:
        return r[:, 0, prefix:]
    return r[:, prefix:, prefix:].mean(dim=1)


def rollout(attentions: Sequence[torch.Tensor], *, fusion: str = "mean", discard: float = 0.0,
            prefix: int = 1, class_token: bool = True) -> torch.Tensor:
    """Attention rollout (see the module docstring): (B, patches)."""
    r = None
    for a in attentions:
        f = discard_lowest(fuse_heads(a.detach().float(), fusion), discard)
        eye = torch.eye(f.shape[-1], dtype=f.dtype, device=f.device)
        f = 0.5 * f + 0.5 * eye
        f = f / f.sum(dim=-1, keepdim=True)
        r = f if r is None else f @ r
    if r is None:
        raise ValueError("attention rollout needs at least one block's attention")
    return patch_row(r, prefix, class_token)


def gradrollout(attentions: Sequence[torch.Tensor], gradients: Sequence[torch.Tensor], *,
                prefix: int = 1, class_token: bool = True) -> torch.Tensor:
    """Gradient rollout (see the module docstring): (B, patches)."""
    if not attentions:
        raise ValueError("gradient rollout needs at least one block's attention")
    b, _, n, _ = attentions[0].shape
    first = attentions[0]
    r = torch.eye(n, dtype=torch.float32, device=first.device).expand(b, n, n).clone()
    for a, g in zip(attentions, gradients, strict=True):
        cam = (g.float() * a.detach().float()).clamp_min(0).mean(dim=1)
        r = r + cam @ r
    return patch_row(r, prefix, class_token)


def legrad(gradients: Sequence[torch.Tensor], *, prefix: int = 1) -> torch.Tensor:
    """LeGrad from each block's gradient of its own score (see the module docstring)."""
    if not gradients:
        raise ValueError("LeGrad needs at least one block")
    maps = [g.float().clamp_min(0).mean(dim=(1, 2))[:, prefix:] for g in gradients]
    return torch.stack(maps).mean(dim=0)


def legrad_gradients(cap: AttentionCapture, indices: Sequence[int], targets: Sequence[int]
                     ) -> list[torch.Tensor]:
    """Per block in `indices` (into cap.found.attention): the gradient of LeGrad's score of
    that block for each image's class `targets[i]`, with respect to the block's attention
    (its last call). The graph is kept (the run's own backward may follow)."""
    found, model = cap.found, cap.model
    last = {c.name: c for c in cap.captured}
    out = []
    with torch.enable_grad():
        for i in indices:
            entry = last.get(found.attention[i])
            tokens = cap.block_outputs.get(found.blocks[i])
            if entry is None or tokens is None or not entry.root.requires_grad:
                raise ValueError(f"LeGrad: block {found.blocks[i]} did not run with a graph "
                                 f"in this forward")
            scores = legrad_scores(model, found, tokens)
            rows = torch.arange(scores.shape[0], device=scores.device)
            picked = scores[rows, torch.as_tensor(list(targets), device=scores.device)]
            (g,) = torch.autograd.grad(picked.sum(), entry.root, retain_graph=True,
                                       allow_unused=True)
            out.append(torch.zeros_like(entry.probs) if g is None
                       else g.detach().reshape(entry.probs.shape))
    return out
