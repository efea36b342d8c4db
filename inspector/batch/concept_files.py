"""What `network-inspector concepts` writes once every shard is coded: the shards merged
(each concept's top images by their maximum code, the error and shares over all rows), the
receptive-field boxes and crops of the top images (as the atlas measures them: the gradient
of the concept's strongest channel at that position), concepts.npz and concepts.json last."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np

from inspector.batch.boxes import Entry
from inspector.batch.engine.shards import write_bytes_atomic
from inspector.batch.inputs import shard_count
from inspector.batch.writers import where, write_crops, write_json

TOP_CHANNELS = 5


def _f32(v: float) -> float | None:
    """The shortest decimal of a float32, as the atlas writes values; None if not finite."""
    v = float(v)
    return float(str(np.float32(v))) if np.isfinite(v) else None


def merge(opts, store, n_images: int, k: int):
    """(per concept its top (value, index, position) list, per image mean codes, sums,
    failed)."""
    images: dict[int, dict] = {}
    failed: list[tuple[int, str]] = []
    residual = total = 0.0
    share = np.zeros(k)
    rows = 0
    for shard in range(shard_count(n_images, opts.shard_size)):
        doc = store.load_json(shard)
        images.update({int(i): v for i, v in doc["images"].items()})
        failed += [(int(i), str(e)) for i, e in doc["failed"]]
        sums = doc["sums"]
        residual, total, rows = residual + sums["residual"], total + sums["total"], \
            rows + sums["rows"]
        share += np.asarray(sums["share"])
    top = []
    for c in range(k):
        ranked = sorted(((v["max"][c], i, v["pos"][c]) for i, v in images.items()),
                        key=lambda e: (-e[0], e[1]))
        top.append(ranked[:opts.top])
    return top, images, {"residual": residual, "total": total, "share": share, "rows": rows}, \
        failed


def write_results(opts, loaded, plan, sources, store, fitted, missing, t0: float) -> int:
    from inspector.batch.boxes import compute_boxes
    from inspector.batch.inputs import ImageFiles, default_workers
    from inspector.core.explain.concepts import concept_logits, top_classes

    out, k = Path(opts.out), fitted.components.shape[0]
    top, images, sums, failed = merge(opts, store, len(sources), k)
    w = fitted.components
    strongest = w.argmax(axis=1)  # the channel whose gradient gives a concept's box
    entries = {Entry(plan.name, int(strongest[c]), r, i, int(p)): Entry(plan.name, c, r, i, int(p))
               for c in range(k) for r, (_, i, p) in enumerate(top[c])}
    workers = default_workers() if opts.workers is None or opts.engine == "ray" else opts.workers
    measured, unreadable = compute_boxes(
        loaded.model, {plan.name: plan}, ImageFiles(sources, loaded.preprocess, every=opts.every),
        list(entries), loaded.device, opts.batch_size, workers)
    for index, message in unreadable.items():
        opts.warn(f"no box: {sources[index]} cannot be read any more: {message}")
    boxes = {entries[e]: box for e, box in measured.items()}
    for message in write_crops(out, sources, boxes, opts.every):
        opts.warn(f"no crop: {message}")

    norms = np.linalg.norm(w, axis=1, keepdims=True)
    vectors = (w / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    data = io.BytesIO()
    np.savez(data, vectors=vectors, components=w, offset=fitted.offset)
    write_bytes_atomic(out / "concepts.npz", data.getvalue())
    # The class effect as pytorch-grad-cam computes it: the concept's channel vector (with
    # the offset back) where the layer's output would be.
    logits = concept_logits(loaded, plan.name, w + fitted.offset[None])
    classes = top_classes(logits, loaded.categories) if logits is not None else None
    doc = _document(opts, loaded, plan, sources, fitted, top, boxes, images, sums, classes,
                    missing, failed)
    write_json(out / "concepts.json", doc)
    print(f"{k} concepts of {plan.name} over {len(images)} images (reconstruction error "
          f"{doc['error']:.3f}), {len(doc['failed'])} failed, in "
          f"{time.perf_counter() - t0:.1f} s; results in {out}")
    return 1 if doc["failed"] else 0


def _document(opts, loaded, plan, sources, fitted, top, boxes, images, sums, classes,
              missing, failed) -> dict:
    k = fitted.components.shape[0]
    n = len(images)
    means = np.mean([v["mean"] for v in images.values()], axis=0) if n else np.zeros(k)
    active = np.mean([np.asarray(v["max"]) > 0 for v in images.values()], axis=0) if n \
        else np.zeros(k)
    layer_top = {str(c): [{**where(sources[i]), "value": _f32(v),
                           "box": list(boxes[Entry(plan.name, c, r, i, p)])
                           if Entry(plan.name, c, r, i, p) in boxes else None}
                          for r, (v, i, p) in enumerate(top[c])] for c in range(k)}
    total = sums["total"]
    concepts = []
    for c in range(k):
        row = fitted.components[c]
        best = np.argsort(-row, kind="stable")[:TOP_CHANNELS]
        concepts.append({
            "index": c,
            "share": _f32(sums["share"][c] / total) if total else None,
            "top_channels": [{"channel": int(j), "weight": _f32(row[j])} for j in best],
            "top_classes": classes[c] if classes is not None else None,
        })
    return {
        "kind": "concepts",
        "model": loaded.name,
        "weights": opts.spec.checkpoint or opts.spec.pickle,
        "layer": plan.name,
        "k": k,
        "seed": opts.seed,
        "images": n,
        # sqrt(sum ||x - h W||^2 / sum ||x||^2) over every position of every image, after
        # the per-channel offset: what the concepts leave unexplained.
        "error": _f32(np.sqrt(sums["residual"] / total)) if total else None,
        "rows": sums["rows"],
        "fit": {"images": min(len(sources), opts.sample), "rows": fitted.fit_rows,
                "error": _f32(fitted.fit_error)},
        "vectors": "concepts.npz",
        "concepts": concepts,
        "failed": [{"path": p, "error": e} for p, e in missing]
        + [{**where(sources[i]), "error": e} for i, e in sorted(failed)],
        "layers": {plan.name: {"channels": k, "top": layer_top,
                               "mean": [_f32(v) for v in means],
                               "active_fraction": [_f32(v) for v in active], "dead": []}},
    }
