"""`visualise --engine ray`: the shards of channels spread over a Ray cluster.

Each row of the Ray dataset is one shard (a batch of channels), so an actor optimises the
same batch the local engine would, and the pictures are the same. An actor loads the model
once (one per GPU, else one per CPU slot), renders its shard and returns the pictures as
PNG bytes (encoded on the actor: a few hundred KB per shard) with each final objective.
This process writes them and the shard's JSON as each shard arrives; a shard returned twice
(a retried task) is written once.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
from PIL import Image

from inspector.batch.engine.shards import ShardStore
from inspector.core.explain.featurevis.settings import FeatureVisSettings, Target
from inspector.core.models.base import ModelSpec


class VisualiseActor:
    """Holds the model; called by Ray Data with a batch of {"shard", "targets"} rows."""

    def __init__(self, spec: ModelSpec, layer: str, settings: FeatureVisSettings,
                 device: str) -> None:
        from inspector.core.models.load import load_model

        self.loaded = load_model(replace(spec, device=device))
        self.layer, self.settings = layer, settings

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from inspector.core.explain.featurevis.render import render

        shards, pngs, values, errors = [], [], [], []
        for shard, text in zip(batch["shard"], batch["targets"]):
            targets = [Target(t["kind"], t["index"], None if t["vector"] is None
                              else tuple(t["vector"])) for t in json.loads(str(text))]
            try:
                vis = render(self.loaded, self.layer, targets, self.settings)
            except Exception as e:  # noqa: BLE001 - said by the driver, with the shard
                shards.append(int(shard))
                pngs.append([])
                values.append([])
                errors.append(f"{type(e).__name__}: {e}")
                continue
            encoded = []
            for px in vis.pixels:
                data = io.BytesIO()
                Image.fromarray(px).save(data, format="PNG", compress_level=1)
                encoded.append(data.getvalue())
            shards.append(int(shard))
            pngs.append(encoded)
            values.append([float(v) for v in vis.objective])
            errors.append("")
        return {"shard": np.asarray(shards, np.int64), "png": _objects(pngs),
                "objective": _objects(values), "error": np.asarray(errors, dtype=object)}


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def run_ray(opts, batches: list[list[Target]], todo: list[int], store: ShardStore,
            on_steps, write_shard) -> None:
    """The shards `todo` on Ray; each is written as it arrives, by `write_shard` (the local
    engine's: visualise.write_shard, passed in so that this module stays below it)."""
    import ray
    import ray.data

    from inspector.batch.ray_engine import connect

    started = connect(opts.ray_address, opts.verbose)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        size = opts.workers or gpus or max(1, int(resources.get("CPU", 1)))
        rows = [{"shard": s, "targets": json.dumps([
            {"kind": t.kind, "index": t.index, "vector": None if t.vector is None
             else list(t.vector)} for t in batches[s]])} for s in todo]
        ds = ray.data.from_items(rows).map_batches(
            VisualiseActor,
            fn_constructor_kwargs={"spec": opts.spec, "layer": opts.layer,
                                   "settings": opts.settings(),
                                   "device": "cuda" if gpus else "cpu"},
            batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(size, len(rows))),
            num_gpus=1 if gpus else 0, num_cpus=1,
        )
        written: set[int] = set()
        for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for shard, pngs, values, error in zip(out["shard"], out["png"], out["objective"],
                                                  out["error"]):
                shard = int(shard)
                if shard in written:
                    continue  # a retried task's result that already arrived
                if error:
                    raise RuntimeError(f"shard {shard} failed on its actor: {error}")
                pixels = np.stack([np.asarray(Image.open(io.BytesIO(p)).convert("RGB"))
                                   for p in pngs])
                write_shard(opts, store, shard, batches[shard], pixels, np.asarray(values))
                written.add(shard)
                on_steps(len(batches[shard]) * opts.steps)
        missing = sorted(set(todo) - written)
        if missing:
            raise RuntimeError(f"Ray returned no result for shard(s) "
                               f"{', '.join(map(str, missing))}")
    finally:
        if started:
            ray.shutdown()
