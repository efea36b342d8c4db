"""The objectives, each a value per image (B,) of the layer's output read as (B, C, h, w)
(core.tokens: channels last permuted, a ViT's patch tokens as their grid with D channels),
and Lucid's diversity term (lucid/optvis/objectives.py)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from inspector.core.explain.featurevis.settings import CHANNEL, CLASS, DIRECTION, NEURON, Target
from inspector.core.tokens import spatialize


def as_spatial(t: torch.Tensor, input_hw: tuple[int, int], name: str = "") -> torch.Tensor:
    """(B, C, h, w) of a layer's output; a (B, F) output (a Linear, logits) as (B, F, 1, 1)."""
    if t.ndim == 2:
        return t[:, :, None, None]
    return spatialize(t, input_hw, name, batch_size=None)[0]


def channel(acts: torch.Tensor, channels: torch.Tensor) -> torch.Tensor:
    """Each image's channel, its mean over positions."""
    rows = torch.arange(acts.shape[0], device=acts.device)
    return acts[rows, channels.to(acts.device)].mean(dim=(1, 2))


def neuron(acts: torch.Tensor, channels: torch.Tensor) -> torch.Tensor:
    """Each image's channel at the centre position (h // 2, w // 2), as Lucid's `channel`
    with a position: for an even size, the lower right of the four central cells."""
    h, w = acts.shape[-2:]
    rows = torch.arange(acts.shape[0], device=acts.device)
    return acts[rows, channels.to(acts.device), h // 2, w // 2]


def class_logit(logits: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """Each image's class score: a (B, K) logit, or a segmentation's (B, K, H, W) mean."""
    rows = torch.arange(logits.shape[0], device=logits.device)
    picked = logits[rows, classes.to(logits.device)]
    return picked.flatten(1).mean(dim=1) if picked.ndim > 1 else picked


def direction(acts: torch.Tensor, vectors: torch.Tensor, cossim_pow: float = 0.0) -> torch.Tensor:
    """Lucid's `direction`: the mean over positions of <a, v / |v|>, weighted by
    max(0.1, cos(a, v))^cossim_pow when cossim_pow > 0. A dot product, not a cosine: a
    picture cannot reach it with activations near 0."""
    v = F.normalize(vectors.to(acts), dim=1)[:, :, None, None]
    dot = (acts * v).sum(dim=1)
    if cossim_pow:
        cos = dot / (acts.norm(dim=1) + 1e-4)
        dot = dot * cos.clamp(min=0.1) ** cossim_pow
    return dot.mean(dim=(1, 2))


def diversity(acts: torch.Tensor) -> torch.Tensor:
    """Lucid's diversity of a group of B images (to be minimised): the mean over images of
    the summed cosine similarity of its Gram matrix with every other image's. B - 1 for
    identical images, 0 for orthogonal Gram matrices."""
    b, c = acts.shape[:2]
    flat = acts.reshape(b, c, -1)
    grams = F.normalize((flat @ flat.transpose(1, 2)).reshape(b, -1), dim=1)
    sim = grams @ grams.T
    return (sim.sum() - sim.diagonal().sum()) / b


def diversity_by_group(acts: torch.Tensor, targets: Sequence[Target]) -> torch.Tensor:
    """The diversity term summed over the groups of images that share an objective: across
    different objectives it would only push unrelated pictures apart."""
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        groups.setdefault(t.objective_key(), []).append(i)
    total = acts.new_zeros(())
    for rows in groups.values():
        if len(rows) > 1:
            total = total + diversity(acts[torch.tensor(rows, device=acts.device)])
    return total


def values(output: torch.Tensor, targets: Sequence[Target], input_hw: tuple[int, int],
           layer: str = "", cossim_pow: float = 0.0) -> torch.Tensor:
    """(B,) each image's objective on the layer's `output` (the model's, for CLASS). A
    batch holds one kind of objective; each image has its own index or vector."""
    kind = targets[0].kind
    if any(t.kind != kind for t in targets):
        raise ValueError("the images of one batch share one kind of objective")
    index = torch.tensor([t.index for t in targets])
    if kind == CLASS:
        return class_logit(output, index)
    acts = as_spatial(output, input_hw, layer)
    if kind == CHANNEL:
        return channel(acts, index)
    if kind == NEURON:
        return neuron(acts, index)
    if kind == DIRECTION:
        vectors = torch.tensor([t.vector for t in targets], dtype=torch.float32)
        return direction(acts, vectors, cossim_pow)
    raise ValueError(f"unknown objective '{kind}'")
