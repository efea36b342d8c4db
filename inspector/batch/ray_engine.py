"""The statistics pass on Ray Data: the same shards, the same reduction, many machines.

The images still to do become a Ray dataset of (index, path, frame) rows (frame -1: an image
file). `map_batches` sends batches to a pool of actors that each load the model once (one
actor per GPU, else one per CPU slot); an actor decodes its batch with the same code as the
local engine (image files on a few threads: Pillow releases the GIL; video frames in order,
each video front to back by one decoder the actor keeps), runs the same `Probe`, and returns per image the (C,) maxima,
positions and means of each layer, the predicted class and its Grad-CAM: a few KiB.

This process gathers the rows per shard, keyed by image index, so a row that arrives twice
(a task retried after a worker died) is counted once; a complete shard is folded, in index
order, into a `Reduction` with the same `Reduction.add` as the local engine and saved like a
local shard. `--resume` and the final merge therefore do not care which engine ran a shard.

Without an address Ray is started on this machine without its dashboard and stopped at the
end. Ray's servers listen on the network (also this local one); a Ray cluster belongs on a
trusted network only (see docs/atlas-and-ray.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from inspector.batch.engine.shards import ShardStore
from inspector.batch.inputs import Source, VideoFrames, as_source, collate, read_item, shard_range
from inspector.batch.job import StatsJob
from inspector.batch.probe import BatchStats, Probe
from inspector.core.models.base import ModelSpec

DECODE_THREADS = 4


class AtlasActor:
    """Holds the model; called by Ray Data with a batch of {"index", "path", "frame"} rows."""

    def __init__(self, job: StatsJob, spec: ModelSpec, device: str) -> None:
        from inspector.core.models.load import load_model

        self.job = job
        self.loaded = load_model(replace(spec, device=device))
        self.pool = ThreadPoolExecutor(DECODE_THREADS)
        # A batch's frames arrive in index order, and so do an actor's batches of a video
        # mostly: one decoder per video, kept between batches, reads on from where it is.
        self.videos = VideoFrames(job.every)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pre = self.job.preprocess
        sources = [(int(i), Source(Path(p), None if int(f) < 0 else int(f)))
                   for i, p, f in zip(batch["index"], batch["path"], batch["frame"])]
        files = [(i, s) for i, s in sources if s.frame is None]
        decoded = dict(zip((i for i, _ in files),
                           self.pool.map(lambda item: read_item(item[1], item[0], pre), files)))
        decoded.update((i, read_item(s, i, pre, videos=self.videos))
                       for i, s in sources if s.frame is not None)
        items = [decoded[i] for i, _ in sources]
        b = collate(items)
        n, ok = len(items), [it.error is None for it in items]
        out: dict[str, np.ndarray] = {
            "index": np.asarray(batch["index"], dtype=np.int64),
            "error": np.asarray([it.error or "" for it in items], dtype=object),
        }
        stats = None
        if b.x is not None:
            with Probe(self.loaded.model, self.job.plans, self.job.cam_layer) as probe:
                stats = probe.run(b.x.to(self.loaded.device))
        rows = np.flatnonzero(ok)
        for i, (name, plan) in enumerate(self.job.plans.items()):
            for key, dtype in (("max", np.float32), ("argmax", np.int64), ("mean", np.float32)):
                col = np.zeros((n, plan.channels), dtype=dtype)
                if stats is not None:
                    figures = {"max": stats.maxima, "argmax": stats.argmax, "mean": stats.means}
                    col[rows] = figures[key][name].cpu().numpy()
                out[f"{key}{i}"] = col
        out["predicted"] = np.zeros(n, dtype=np.int64)
        if stats is not None:
            out["predicted"][rows] = stats.predicted.numpy()
        if self.job.cam_shape is not None:
            out["cam"] = np.zeros((n, *self.job.cam_shape[1:]), dtype=np.float32)
            if stats is not None and stats.cams is not None:
                out["cam"][rows] = stats.cams.numpy()
        return out


def connect(address: str | None, verbose: bool = False) -> bool:
    """Start or join Ray; True when this process started it (and so stops it). Its log lines
    go where ray_logs puts them; `verbose`: the workers' output is shown here too."""
    import ray

    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.INFO, "log_to_driver": verbose}
    if address:
        ray.init(address=address, **quiet)
    else:
        # No dashboard (a web UI that can submit jobs). Ray itself cannot be bound to
        # localhost: it turns 127.0.0.1 into the machine's address, and its gRPC servers
        # listen on every interface (measured with Ray 2.60), see docs/atlas-and-ray.md.
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, **quiet)
    return True


def run_ray(
    job: StatsJob,
    spec: ModelSpec,
    shards: list[int],
    store: ShardStore,
    address: str | None,
    actors: int | None,
    on_images: Callable[[int], None] = lambda n: None,
    on_failed: Callable[[str], None] = lambda message: None,
    verbose: bool = False,
) -> None:
    """Run the given shards on Ray and save each one as it completes."""
    import ray
    import ray.data

    started = connect(address, verbose)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        size = actors or gpus or max(1, int(resources.get("CPU", 1)))
        n = len(job.paths)
        sources = [as_source(p) for p in job.paths]
        rows = [{"index": i, "path": str(sources[i].path),
                 "frame": -1 if sources[i].frame is None else sources[i].frame}
                for s in shards for i in shard_range(s, n, job.shard_size)]
        ds = ray.data.from_items(rows).map_batches(
            AtlasActor,
            fn_constructor_kwargs={"job": replace(job, paths=()), "spec": spec,
                                   "device": "cuda" if gpus else "cpu"},
            batch_size=job.batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=size),
            num_gpus=1 if gpus else 0,
            num_cpus=1,
            # Ray Data's defaults restart a dead actor and retry its tasks without limit;
            # an exception raised by our own code is not retried (it would fail again).
        )
        gather = _ShardGatherer(job, store, on_failed)
        for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
            on_images(gather.add(out))
        if gather.open_shards():
            raise RuntimeError(f"Ray returned no result for some images of shard(s) "
                               f"{', '.join(map(str, gather.open_shards()))}")
    finally:
        if started:
            ray.shutdown()


class _ShardGatherer:
    """Rows from the actors, per shard, keyed by image index; a complete shard is reduced
    and saved, then forgotten."""

    def __init__(self, job: StatsJob, store: ShardStore, on_failed) -> None:
        self.job, self.store, self.on_failed = job, store, on_failed
        self.pending: dict[int, dict[int, dict[str, np.ndarray]]] = {}
        self.saved: set[int] = set()

    def open_shards(self) -> list[int]:
        return sorted(self.pending)

    def add(self, out: dict[str, np.ndarray]) -> int:
        """Take a batch of rows; returns how many images were new."""
        new = 0
        for r, index in enumerate(out["index"].tolist()):
            shard = self.job.shard_of(index)
            rows = self.pending.setdefault(shard, {}) if shard not in self.saved else None
            if rows is None or index in rows:
                continue  # a retried task's row that already arrived
            rows[index] = {key: col[r] for key, col in out.items()}
            new += 1
            if len(rows) == len(shard_range(shard, len(self.job.paths), self.job.shard_size)):
                self._save(shard, self.pending.pop(shard))
        return new

    def _save(self, shard: int, rows: dict[int, dict[str, np.ndarray]]) -> None:
        job = self.job
        reduction = job.empty("cpu")
        ordered = [rows[i] for i in sorted(rows)]
        for row in ordered:
            if row["error"]:
                reduction.failed.append((int(row["index"]), str(row["error"])))
                self.on_failed(f"{job.paths[int(row['index'])]}: {row['error']}")
        good = [row for row in ordered if not row["error"]]
        for start in range(0, len(good), job.batch_size):
            part = good[start : start + job.batch_size]
            reduction.add(torch.tensor([int(row["index"]) for row in part]), _stats(job, part))
        self.store.save(shard, reduction)
        self.saved.add(shard)


def _stats(job: StatsJob, rows: list[dict[str, np.ndarray]]) -> BatchStats:
    def stack(key: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([row[key] for row in rows]))

    names = list(job.plans)
    return BatchStats(
        maxima={n: stack(f"max{i}") for i, n in enumerate(names)},
        argmax={n: stack(f"argmax{i}") for i, n in enumerate(names)},
        means={n: stack(f"mean{i}") for i, n in enumerate(names)},
        predicted=stack("predicted"),
        cams=stack("cam") if job.cam_shape is not None else None,
    )
