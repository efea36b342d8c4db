"""What a CAM or an attribution explains: the class score, picked from the model's output."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch

from inspector.core.hookset import tensor_leaves

# None (top-1 per image), a class index, a class name, one index per image, or a function
# logits (B, classes) -> scores (B,).
Target = None | int | str | Sequence[int] | Callable[[torch.Tensor], torch.Tensor]


def resolve_target(target: Target, categories: Sequence[str] = ()) -> Target:
    """A user's target as compute_cams takes it: "top1"/None -> None, "7" -> 7, a class name
    -> its index (case-insensitive), anything else unchanged."""
    if not isinstance(target, str):
        return target
    text = target.strip()
    if text.lower() in ("", "top1", "top-1", "top"):
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    lowered = [c.lower() for c in categories]
    if text.lower() in lowered:
        return lowered.index(text.lower())
    import difflib

    close = difflib.get_close_matches(text.lower(), lowered, n=3)
    hint = f"; did you mean {', '.join(repr(categories[lowered.index(c)]) for c in close)}?"
    raise ValueError(f"no class named '{target}' in this model" + (hint if close else ""))


def class_scores(logits: torch.Tensor, target: Target) -> tuple[torch.Tensor, list[int] | None]:
    """The scores to explain, (B,), and the class index per image (None for a score function)."""
    b, n = logits.shape[0], logits.shape[-1]
    if callable(target):
        scores = target(logits)
        if not isinstance(scores, torch.Tensor) or scores.shape != (b,):
            got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ValueError(f"a target score function must return shape ({b},), got {got}")
        return scores, None
    if isinstance(target, torch.Tensor):
        target = target.tolist()
    if target is None:
        idx = logits.detach().reshape(b, -1).argmax(dim=1).tolist()
    elif isinstance(target, numbers.Integral):
        idx = [int(target)] * b
    elif isinstance(target, str):
        raise ValueError(f"class name '{target}': resolve it with resolve_target(target, categories)")
    else:
        idx = [int(t) for t in target]
        if len(idx) != b:
            raise ValueError(f"{len(idx)} targets given for a batch of {b}")
    for i in idx:
        if not 0 <= i < n:
            raise ValueError(f"target class {i} out of range 0..{n - 1}")
    rows = torch.arange(b, device=logits.device)
    return logits.reshape(b, -1)[rows, torch.tensor(idx, device=logits.device)], idx


def logits_of(output: Any) -> torch.Tensor:
    """The class scores in a model's output: the tensor itself, 'logits'/'out', or the first."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        for key in ("logits", "out"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]
    for _, t in tensor_leaves(output):
        return t
    raise ValueError(f"the model returned {type(output).__name__} with no tensor in it")
