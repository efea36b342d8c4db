"""The single-machine engine: a DataLoader decodes in worker processes, the model reduces.

Shards are done in order; each batch's figures fold into the shard's `Reduction` on the
model's device (the top-k merge included), and a finished shard goes to disk at once. What
the process holds is the model, a few decoded batches and one shard's reduction, however
many images the folder has.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from inspector.batch.engine.shards import ShardStore
from inspector.batch.inputs import ImageFiles, make_loader, shard_batches
from inspector.batch.job import StatsJob
from inspector.batch.probe import Probe


def run_local(
    job: StatsJob,
    model: nn.Module,
    device: torch.device,
    shards: list[int],
    store: ShardStore,
    workers: int,
    on_images: Callable[[int], None] = lambda n: None,
    on_failed: Callable[[str], None] = lambda message: None,
) -> None:
    """Run the given shards and save each one as it finishes."""
    dataset = ImageFiles(job.paths, job.preprocess, every=job.every)
    batches = shard_batches(shards, len(job.paths), job.shard_size, job.batch_size)
    loader = make_loader(dataset, batches, workers, pin_memory=device.type == "cuda")
    current, reduction = None, None
    with Probe(model, job.plans, job.cam_layer) as probe:
        for batch in loader:
            first = min([*batch.indices.tolist(), *(i for i, _ in batch.failed)])
            shard = job.shard_of(first)
            if shard != current:
                if reduction is not None:
                    store.save(current, reduction)
                current, reduction = shard, job.empty(device)
            for index, error in batch.failed:
                reduction.failed.append((index, error))
                on_failed(f"{job.paths[index]}: {error}")
            if batch.x is not None:
                stats = probe.run(batch.x.to(device, non_blocking=True))
                reduction.add(batch.indices, stats)
            on_images(len(batch))
        if reduction is not None:
            store.save(current, reduction)
