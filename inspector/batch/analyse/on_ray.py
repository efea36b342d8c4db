"""analyse's shards on Ray: actors that each hold a Session with the model, a shard a task.

Why tasks per shard on an actor pool, and not Ray Data's map_batches as the atlas does: an
analyse image's result is files (an NPZ of whole activations and gradients, PNG figures,
TensorBoard records), megabytes rather than the atlas's few numbers per channel, and the
shard is already the unit that is finished, saved and resumed. So each actor runs a whole
shard with the local engine's code (`analyse_image`) into a scratch folder of its own node,
and returns the shard's entries with the bytes of its files and its TensorBoard records.
This process writes them into DIR (each file under a temporary name, then moved into place),
then the shard's record: the same files and shards/shard-NNNNN.json as the local engine, on
this machine even when the actors run on others (which need to read the same input paths).

A task whose actor died is retried on a restarted actor (Ray's max_task_retries); nothing is
written here before a shard's result arrives, so a retried shard is written once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from inspector.batch.analyse.image import ImageJob, analyse_image
from inspector.batch.inputs import Source, VideoFrames
from inspector.batch.ray_engine import connect

RETRIES = 3  # restarts of a dead actor, and retries of the shard it was running


class RecordedTensorBoard:
    """Stands in for core.export.files.TensorBoardLog on an actor: keeps the calls, to be replayed
    on the real log by the process that writes DIR."""

    def __init__(self) -> None:
        self.records: list[tuple[str, tuple]] = []

    def image(self, *args) -> None:
        self.records.append(("image", args))

    def histogram(self, *args) -> None:
        self.records.append(("histogram", args))

    def text(self, *args) -> None:
        self.records.append(("text", args))


class AnalyseActor:
    """Holds a Session with the model; runs whole shards."""

    def __init__(self, spec, job: ImageJob, every: int, device: str | None) -> None:
        from inspector.core.run.session import Session

        self.session = Session()
        self.loaded = self.session.load_model(replace(spec, device=device)).result()
        self.job, self.every = job, every

    def run(self, shard: int, items: list[tuple[Source, str, int]],
            tensorboard: bool) -> dict[str, Any]:
        """items: (input, folder name, step) per image of the shard."""
        tb = RecordedTensorBoard() if tensorboard else None
        images, compared = [], []
        with tempfile.TemporaryDirectory(prefix="analyse-shard-") as tmp, \
                VideoFrames(self.every) as videos:
            scratch = Path(tmp)
            for source, name, step in items:
                entry, c = analyse_image(self.session, self.loaded, self.job, source, name,
                                         scratch, step, tb, videos)
                images.append(entry)
                if c is not None:
                    compared.append(c)
            files = {p.relative_to(scratch).as_posix(): p.read_bytes()
                     for p in sorted(scratch.rglob("*")) if p.is_file()}
        return {"shard": shard, "images": images, "compared": compared, "files": files,
                "tensorboard": tb.records if tb is not None else []}


def write_shard_files(out: Path, result: dict[str, Any], tb) -> None:
    """A shard's files from an actor into DIR, and its TensorBoard records into `tb`."""
    for rel, data in result["files"].items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_bytes(data)
        os.replace(part, path)
    if tb is not None:
        for method, args in result["tensorboard"]:
            getattr(tb, method)(*args)


def run_ray_shards(
    spec,
    job: ImageJob,
    every: int,
    work: dict[int, list[tuple[Source, str, int]]],
    address: str | None,
    actors: int | None,
    device: str | None,
    tensorboard: bool,
    on_shard: Callable[[dict[str, Any]], None],
    verbose: bool = False,
) -> None:
    """Run the shards in `work` (shard -> its items) on Ray; `on_shard` gets each result,
    in the order they finish."""
    import ray
    from ray.util import ActorPool

    started = connect(address, verbose)
    try:
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        size = max(1, min(len(work), actors or gpus or int(resources.get("CPU", 1))))
        remote = ray.remote(num_cpus=1, num_gpus=1 if gpus else 0, max_restarts=RETRIES,
                            max_task_retries=RETRIES)(AnalyseActor)
        where = device or ("cuda" if gpus else "cpu")
        pool = ActorPool([remote.remote(spec, job, every, where) for _ in range(size)])
        for result in pool.map_unordered(
                lambda actor, shard: actor.run.remote(shard, work[shard], tensorboard),
                sorted(work)):
            on_shard(result)
    finally:
        if started:
            ray.shutdown()
