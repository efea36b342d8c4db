"""The logit lens for ViTs: after each block, its tokens through the model's own final norm
and head (core.explain.attention.heads.lens_logits), as probabilities over the classes. How
the prediction forms across the blocks: the last block's lens is the model's own output,
which `lens_logits_by_block` checks (a model that does more after its blocks is refused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from inspector.core.explain.attention.find import AttentionModel
from inspector.core.explain.attention.heads import lens_logits

# The last block's lens against the model's own logits: equal but for rounding.
LENS_RTOL, LENS_ATOL = 1e-4, 1e-4


def lens_logits_by_block(model: nn.Module, found: AttentionModel,
                         block_outputs: Mapping[str, torch.Tensor],
                         logits: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    """(the blocks in forward order, their lens logits (L, B, classes) on the CPU) from each
    block's output tokens; ValueError, one sentence, when the head cannot be applied or the
    last block's lens is not the model's output."""
    blocks = [b for b in block_outputs if b in set(found.blocks)]
    if not blocks:
        raise ValueError("no block's output was kept in this run, so there is no logit lens")
    with torch.no_grad():
        out = torch.stack([lens_logits(model, found, block_outputs[b].detach()).float()
                           for b in blocks])
    last, own = out[-1], logits.detach().float().to(out.device)
    if last.shape != own.shape or not torch.allclose(last, own, rtol=LENS_RTOL, atol=LENS_ATOL):
        raise ValueError(
            f"the model's norm and head on its last block ({blocks[-1]}) do not give its "
            f"output (it computes more after its blocks), so a logit lens would mislead")
    return blocks, out.cpu()


def lens_top(blocks: list[str], logits: torch.Tensor, label: Callable[[int], str], k: int
             ) -> list[dict]:
    """summary.json's "logit_lens" for one image's lens logits (L, classes): per block in
    forward order, {"layer": block, "top": [{"index", "label", "prob"}, ...]}, the top-k
    of the softmax over the head's outputs."""
    probs = logits.float().softmax(dim=-1)
    top_p, top_i = probs.topk(min(k, probs.shape[-1]), dim=-1)
    return [{"layer": block,
             "top": [{"index": int(i), "label": label(int(i)), "prob": round(float(p), 6)}
                     for p, i in zip(ps.tolist(), idx.tolist(), strict=True)]}
            for block, ps, idx in zip(blocks, top_p, top_i, strict=True)]
