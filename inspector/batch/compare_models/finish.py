"""`compare-models` after its shards: their states merged in shard order, the CKA matrix and
(with --match) the matched channels, and the files written (batch.compare_models.writers):
matches.json and cka.png first, cka.json last (its presence: the run is complete).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from inspector.batch.compare_models.plan import merge
from inspector.batch.compare_models.writers import (
    atlas_crops,
    cka_document,
    matches_document,
    write_cka,
    write_cka_png,
)
from inspector.batch.writers import where, write_json
from inspector.core.compare.matching import match_channels


def load_states(store, shards: int) -> list[dict]:
    return [torch.load(store.path(s), weights_only=True) for s in range(shards)]


def finish(opts, ready, t0: float) -> int:
    """Merge, write, say what was done; the exit status."""
    job, out = ready.job, Path(opts.out)
    merged = merge(job, load_states(ready.store, len(job.plan.shards)))
    values = merged.cka.value()
    images = merged.cka.images
    failed = [{"path": p, "error": e} for p, e in ready.missing]
    failed += [{**where(ready.sources[i]), "error": e} for i, e in sorted(merged.failed.items())]
    notes = list(ready.notes)
    if merged.skipped:
        notes.append(f"{merged.skipped} minibatch(es) left out: fewer than 4 readable images")
    if job.plan.left_out:
        notes.append(f"{len(job.plan.left_out)} image(s) of a last short minibatch left out")
    info = {
        "model_a": ready.a.name, "model_b": ready.b.name, "images": images,
        "estimator": job.plan.estimator,
        "batch_size": opts.batch_size,
        "order_seed": opts.order_seed if job.plan.estimator == "minibatch" else None,
        "blocks": job.plan.blocks,
        "weights_a": ready.a.source or None, "weights_b": ready.b.source or None,
        "seed_a": ready.a.seed if not ready.a.pretrained else None,
        "seed_b": ready.b.seed if not ready.b.pretrained else None,
        "same_model": job.same_model,
        "failed": failed,
        "notes": notes,
    }
    doc = cka_document(info, job.side_a.names, job.side_b.names, values.numpy())
    if job.match is not None and merged.corr is not None:
        _write_matches(opts, ready, merged, images, notes)
    write_cka_png(out, doc)
    write_cka(out, doc)
    diag = ""
    if job.side_a.names == job.side_b.names and values.shape[0]:
        d = torch.diagonal(values)
        d = d[torch.isfinite(d)]
        if d.numel():
            diag = f"; diagonal from {float(d.min()):.3f} to {float(d.max()):.3f}"
    print(f"{images} images compared ({job.plan.estimator}), {len(failed)} failed, "
          f"{len(job.side_a.names)} x {len(job.side_b.names)} layers{diag}, in "
          f"{time.perf_counter() - t0:.1f} s; results in {out}")
    return 1 if failed else 0


def _write_matches(opts, ready, merged, images: int, notes: list[str]) -> None:
    plan = ready.job.match
    corr = merged.corr
    if corr.n == 0:
        opts.warn(f"--match {plan.layer_a}:{plan.layer_b}: no image was read; no matches.json")
        return
    dead_a, dead_b = corr.dead()
    match = match_channels(corr.corr().numpy(), opts.match_threshold, dead_a, dead_b)
    crops_a, note_a = atlas_crops(opts.atlas_a, ready.a.name, plan.layer_a)
    crops_b, note_b = atlas_crops(opts.atlas_b, ready.b.name, plan.layer_b)
    for note in (note_a, note_b):
        if note:
            opts.warn(f"note: {note}")
    extra = [n for n in (plan.note, note_a, note_b) if n]
    doc = matches_document(plan, match, images, corr.n, crops_a, crops_b, extra)
    write_json(Path(opts.out) / "matches.json", doc)
    notes.append(f"matches.json: {len(match.pairs)} pairs of {plan.layer_a} and "
                 f"{plan.layer_b}, {len(match.lost)} lost, {len(match.new)} new")
