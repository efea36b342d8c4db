"""Matched channels of one layer pair of two loaded models, on their own (no CKA, no
shards): what the window computes when a cell of the CKA heatmap is clicked. The same
correlation and matching as `compare-models --match` (core.compare.channels, .matching),
over the images given, and each layer's output on the first image, for the mosaics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from inspector.batch.compare_models.pair import MatchPlan, plan_match, read_pair
from inspector.batch.engine.progress import Progress
from inspector.core.compare.channels import ChannelCorrelation
from inspector.core.compare.grams import GramRecorder
from inspector.core.compare.matching import THRESHOLD, ChannelMatch, match_channels
from inspector.core.hookset import HookSet


@dataclass(frozen=True)
class LayerMatch:
    plan: MatchPlan
    match: ChannelMatch
    images: int  # read
    samples: int  # images x positions
    failed: tuple[tuple[str, str], ...]  # (path, reason)
    # Each layer's output on the first image read, (C, ...) float32 on the CPU
    example_a: torch.Tensor | None
    example_b: torch.Tensor | None
    # Atlas crop files per channel (batch.compare_models.writers.atlas_crops), where an atlas of
    # that model was given; and why one could not be used
    crops_a: dict[int, list[str]] = field(default_factory=dict)
    crops_b: dict[int, list[str]] = field(default_factory=dict)
    crop_notes: tuple[str, ...] = ()


def match_layers(a, b, tree_a, tree_b, sources: Sequence, layer_a: str, layer_b: str,
                 batch_size: int = 32, threshold: float = THRESHOLD,
                 progress: Progress | None = None) -> LayerMatch:
    """Correlate and match `layer_a` of model A (a LoadedModel) with `layer_b` of B over the
    image files `sources`, counted on `progress` (stage "match"); ValueError for a pair that
    cannot be matched, JobCancelled."""
    from inspector.batch.engine.command import OptionError

    try:
        plan = plan_match(tree_a, tree_b, layer_a, layer_b, a.preprocess.crop_size,
                          b.preprocess.crop_size)
    except OptionError as e:
        raise ValueError(str(e).removeprefix("--match ")) from None
    same = b is a
    pre_b = None if b.preprocess == a.preprocess else b.preprocess
    corr = ChannelCorrelation()
    failed, first = [], None
    sample_a, sample_b = (plan.layer_a, plan.read_a, plan.calls_a), (plan.layer_b, plan.read_b,
                                                                     plan.calls_b)
    recorders = ([GramRecorder(a.model, {}, samples=[sample_a, sample_b])] if same else
                 [GramRecorder(a.model, {}, samples=[sample_a]),
                  GramRecorder(b.model, {}, samples=[sample_b])])
    progress = progress or Progress(show=False)
    progress.stage("match", len(sources))
    with recorders[0], (recorders[-1] if not same else HookSet()), torch.no_grad():
        for start in range(0, len(sources), batch_size):
            items = [read_pair(s, i, a.preprocess, pre_b)
                     for i, s in enumerate(sources[start:start + batch_size], start)]
            failed += [(str(sources[it.index]), it.error) for it in items if it.error]
            ok = [it for it in items if it.error is None]
            if ok:
                x_a = torch.stack([it.x_a for it in ok]).to(a.device)
                x_b = x_a if pre_b is None else torch.stack([it.x_b for it in ok]).to(b.device)
                _, samples = recorders[0].run(x_a)
                if not same:
                    samples = samples + recorders[1].run(x_b)[1]
                corr.add(*samples)
                if first is None:
                    first = (x_a[:1], x_b[:1])
            progress.update(len(items))
    if corr.n == 0:
        raise ValueError("none of the images could be read")
    dead_a, dead_b = corr.dead()
    match = match_channels(corr.corr().numpy(), threshold, dead_a, dead_b)
    example_a, example_b = _examples(a, b, plan, *first)
    return LayerMatch(plan, match, progress.done - len(failed), corr.n, tuple(failed), example_a,
                      example_b)


def _examples(a, b, plan: MatchPlan, x_a, x_b):
    """Each layer's output (its last call) on the first image, for the mosaics."""
    out = []
    for loaded, layer, calls, x in ((a, plan.layer_a, plan.calls_a, x_a),
                                    (b, plan.layer_b, plan.calls_b, x_b)):
        seen = []
        module = dict(loaded.model.named_modules())[layer]
        with HookSet() as hooks, torch.no_grad():
            hooks.forward(module, lambda m, i, o, seen=seen: seen.append(
                o if isinstance(o, torch.Tensor) else None))
            loaded.model(x)
        t = seen[calls - 1] if len(seen) >= calls else None
        out.append(None if t is None else t[0].detach().float().cpu().clone())
    return out[0], out[1]
