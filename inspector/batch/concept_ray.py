"""`concepts --engine ray`: the codes pass spread over a Ray cluster, one shard per task.

The fit is made before, in this process, so every actor codes with the same concepts; an
actor decodes its shard's images, codes them (batch/concept_pass.py, the local engine's
code) and returns the shard's JSON. This process writes each shard as it arrives, once.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from inspector.batch.inputs import Source, as_source, shard_range
from inspector.batch.probe import LayerPlan
from inspector.core.explain.concept_folder import FolderFit
from inspector.core.models.base import ModelSpec


class ConceptActor:
    def __init__(self, spec: ModelSpec, plan: LayerPlan, fitted: FolderFit, batch_size: int,
                 every: int, device: str) -> None:
        from inspector.core.models.load import load_model

        self.loaded = load_model(replace(spec, device=device))
        self.plan, self.fitted = plan, fitted
        self.batch_size, self.every = batch_size, every

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from inspector.batch.concept_pass import code_shard_items

        results = []
        for text in batch["items"]:
            items = [(int(i), Source(Path(p), None if f < 0 else int(f)))
                     for i, p, f in json.loads(str(text))]
            results.append(json.dumps(code_shard_items(
                self.loaded.model, self.plan, self.loaded.device, self.fitted,
                self.loaded.preprocess, items, self.batch_size, self.every)))
        return {"shard": np.asarray(batch["shard"], np.int64),
                "result": np.asarray(results, dtype=object)}


def run_ray(opts, sources, todo: list[int], store, fitted: FolderFit, plan: LayerPlan,
            on_images) -> None:
    import ray
    import ray.data

    from inspector.batch.ray_engine import connect

    started = connect(opts.ray_address, opts.verbose)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        size = opts.workers or gpus or max(1, int(resources.get("CPU", 1)))
        srcs = [as_source(s) for s in sources]
        rows = [{"shard": s, "items": json.dumps([
            [i, str(srcs[i].path), -1 if srcs[i].frame is None else srcs[i].frame]
            for i in shard_range(s, len(sources), opts.shard_size)])} for s in todo]
        ds = ray.data.from_items(rows).map_batches(
            ConceptActor,
            fn_constructor_kwargs={"spec": opts.spec, "plan": plan, "fitted": fitted,
                                   "batch_size": opts.batch_size, "every": opts.every,
                                   "device": "cuda" if gpus else "cpu"},
            batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(size, len(rows))),
            num_gpus=1 if gpus else 0, num_cpus=1,
        )
        written: set[int] = set()
        for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for shard, text in zip(out["shard"], out["result"]):
                shard = int(shard)
                if shard in written:
                    continue
                result = json.loads(str(text))
                for i, e in result["failed"]:
                    opts.warn(f"skipped {sources[int(i)]}: {e}")
                store.save_json(shard, result)
                written.add(shard)
                on_images(len(shard_range(shard, len(sources), opts.shard_size)))
        missing = sorted(set(todo) - written)
        if missing:
            raise RuntimeError(f"Ray returned no result for shard(s) "
                               f"{', '.join(map(str, missing))}")
    finally:
        if started:
            ray.shutdown()
