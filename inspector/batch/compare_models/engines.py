"""The engines of `compare-models`: the shards of a CompareJob run here (a DataLoader decodes
the images in worker processes) or on Ray actors that each load both models once.

Both run a shard through the same `plan.ShardRun`, one forward per group of images,
and hand its state to `save` as it finishes; the merge (plan.merge) is done by the
caller from the saved shards in shard order, so the two engines give the same result and a
resumed run continues either's shards. On Ray a task is a whole shard (a minibatch's Gram
needs all of its images in one forward): the actor reads its images itself, so the machines
need the same paths; a shard that arrives twice (a retried task) is saved once.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace

from torch.utils.data import DataLoader

from inspector.batch.compare_models.pair import ImagePairs, collate_pairs, read_pair
from inspector.batch.compare_models.plan import CompareJob, ShardRun

DECODE_THREADS = 4
RETRIES = 3  # restarts of a dead actor, and retries of the shard it was running


def run_local(job: CompareJob, model_a, model_b, device, todo: list[int],
              save: Callable[[int, dict], None], workers: int,
              on_images: Callable[[int], None] = lambda n: None) -> None:
    """Run the shards `todo` in order; `save(shard, state)` as each finishes. `on_images`
    (images forwarded) may raise to stop the run (a cancel): the finished shards stay."""
    groups = [(s, g) for s in todo for g in job.plan.shards[s]]
    if not groups:
        return
    loader = DataLoader(ImagePairs(job.sources, job.pre_a, job.pre_b),
                        batch_sampler=[list(g.images) for _, g in groups], num_workers=workers,
                        collate_fn=collate_pairs, prefetch_factor=2 if workers > 0 else None)
    current, run = None, None
    with ExitStack() as stack:
        for (shard, group), items in zip(groups, loader, strict=True):
            if shard != current:
                if run is not None:
                    save(current, run.state())
                    stack.close()
                current = shard
                run = stack.enter_context(ShardRun(job, model_a, model_b, device, shard))
            run.add(group, {it.index: it for it in items})
            on_images(len(group.images))
        if run is not None:
            save(current, run.state())


class CompareActor:
    """Holds both models (one, when B is A); runs whole shards."""

    def __init__(self, job: CompareJob, spec_a, spec_b, device: str) -> None:
        from inspector.core.models.load import load_model

        self.job = job
        self.a = load_model(replace(spec_a, device=device))
        self.b = self.a if spec_b is None else load_model(replace(spec_b, device=device))
        self.pool = ThreadPoolExecutor(DECODE_THREADS)

    def run(self, shard: int) -> dict:
        job = self.job
        with ShardRun(job, self.a.model, self.b.model, self.a.device, shard) as run:
            for group in job.plan.shards[shard]:
                items = list(self.pool.map(
                    lambda i: read_pair(job.sources[i], i, job.pre_a, job.pre_b), group.images))
                run.add(group, {it.index: it for it in items})
        return run.state()


def run_ray(job: CompareJob, spec_a, spec_b, todo: list[int], save: Callable[[int, dict], None],
            address: str | None, actors: int | None,
            on_images: Callable[[int], None] = lambda n: None, verbose: bool = False) -> None:
    """Run the shards `todo` on Ray (started here without an address, stopped at the end)."""
    import ray
    from ray.util import ActorPool

    from inspector.batch.ray_engine import connect

    started = connect(address, verbose)
    try:
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        size = max(1, min(len(todo), actors or gpus or int(resources.get("CPU", 1))))
        remote = ray.remote(num_cpus=1, num_gpus=1 if gpus else 0, max_restarts=RETRIES,
                            max_task_retries=RETRIES)(CompareActor)
        device = "cuda" if gpus else "cpu"
        pool = ActorPool([remote.remote(job, spec_a, spec_b, device) for _ in range(size)])
        saved: set[int] = set()
        for state in pool.map_unordered(lambda actor, s: actor.run.remote(s), todo):
            shard = int(state["shard"])
            if shard in saved:
                continue  # a retried task's second result
            save(shard, state)
            saved.add(shard)
            on_images(sum(len(g.images) for g in job.plan.shards[shard]))
        missing = sorted(set(todo) - saved)
        if missing:
            raise RuntimeError(f"Ray returned no result for shard(s) "
                               f"{', '.join(map(str, missing))}")
    finally:
        if started:
            ray.shutdown()
