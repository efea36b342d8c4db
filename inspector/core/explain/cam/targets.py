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


def parse_target(text: str, task: str, categories: Sequence[str], model):
    """`det:K` or `seg:CLASS` (a name or an index) as a run's target, checked against the
    model; ValueError with one line for one that cannot work. "top1" or "" -> None."""
    from inspector.core import tasks
    from inspector.core.records.targets import DetectionTarget, SegmentationTarget
    from inspector.core.tasks import detection

    text = text.strip()
    kind, sep, rest = text.partition(":")
    kind = kind.lower() if sep else ""
    if kind == "det":
        if task != tasks.DETECTION:
            raise ValueError(f"--target {text}: det:K needs a detection model, this is a "
                             f"{task} model")
        if not rest.strip().isdigit():
            raise ValueError(f"--target {text}: K must be a detection's rank, 0 or more")
        k, most = int(rest), detection.max_detections(model)
        if k >= most:
            raise ValueError(f"--target {text}: out of range, this model keeps at most "
                             f"{most} detections (0..{most - 1})")
        return DetectionTarget(k)
    if kind == "seg":
        if task != tasks.SEGMENTATION:
            raise ValueError(f"--target {text}: seg:CLASS needs a segmentation model, this "
                             f"is a {task} model")
        c = resolve_target(rest, categories)
        if not isinstance(c, int) or not 0 <= c < len(categories):
            raise ValueError(f"--target {text}: not a class of this model "
                             f"(0..{len(categories) - 1} or a name)")
        return SegmentationTarget(c)
    if task == tasks.DETECTION:
        if text.lower() in ("", "top1", "top-1", "top"):
            return None
        raise ValueError(f"--target {text}: a detection model's target is det:K (K-th "
                         f"detection by score)")
    if task == tasks.SEGMENTATION:
        c = resolve_target(text, categories)
        return None if c is None else parse_target(f"seg:{c}", task, categories, model)
    return resolve_target(text, categories)
