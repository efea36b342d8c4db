"""analyse's shards: a finished one read back from DIR/shards, the others run by the
engine, in this process (each image through batch.analyse.image) or on Ray actors
(batch.analyse.on_ray), each image's files written and then the shard's record; and what a
resumed run must agree on with the one it continues (the job's key, the weights' seed).
"""

from __future__ import annotations

import dataclasses
import sys

from inspector.batch.analyse.image import analyse_image
from inspector.batch.analyse.writers import edits_of
from inspector.batch.inputs import Source, VideoFrames, shard_count, shard_range
from inspector.batch.metric_boxes import digest
from inspector.batch.names import input_names


def run_shards(a, session, loaded, sources: list[Source], store, done: set[int], tb,
               finished: dict[int, dict], partial: dict[str, list]) -> None:
    """Every shard of `a` (a batch.analyse.Analysis): a finished one read back, the others
    run (each image's files written, then the shard's record) by its engine. `finished`
    (shard -> its record) and `partial` (the local engine's shard in progress) describe an
    interrupted run."""
    from tqdm import tqdm

    names = input_names(sources)
    n = len(sources)
    for shard in sorted(done):
        finished[shard] = store.load_json(shard)
    todo = [s for s in range(shard_count(n, a.shard_size)) if s not in done]
    bar = tqdm(total=sum(len(shard_range(s, n, a.shard_size)) for s in todo), unit="img",
               desc="analysing", file=sys.stderr, disable=not a.progress, dynamic_ncols=True)

    def save(shard: int, record: dict) -> None:
        store.save_json(shard, record)
        finished[shard] = record

    try:
        if a.engine == "ray" and todo:
            from inspector.batch.analyse.on_ray import run_ray_shards, write_shard_files

            def on_shard(result: dict) -> None:
                write_shard_files(a.out, result, tb)
                for entry in result["images"]:
                    _say(bar, entry)
                save(result["shard"], {"images": result["images"],
                                       "compared": result["compared"]})
                bar.update(len(result["images"]))

            work = {s: [(sources[i], names[i], i) for i in shard_range(s, n, a.shard_size)]
                    for s in todo}
            # a.spec holds the seed this process's model was built with (fix_seed, below).
            run_ray_shards(a.spec, a.job, a.every, work, a.ray_address, a.workers,
                           a.spec.device, tb is not None, on_shard, a.verbose)
            return
        with VideoFrames(a.every) as videos:
            for shard in todo:
                for i in shard_range(shard, n, a.shard_size):
                    entry, compared = analyse_image(session, loaded, a.job, sources[i],
                                                    names[i], a.out, i, tb, videos)
                    _say(bar, entry)
                    partial["images"].append(entry)
                    if compared is not None:
                        partial["compared"].append(compared)
                    bar.update(1)
                save(shard, {"images": list(partial["images"]),
                             "compared": list(partial["compared"])})
                for kept in partial.values():
                    kept.clear()
    finally:
        bar.close()


def _say(bar, entry: dict) -> None:
    """An image's failure, or its note (decoded reduced), on stderr above the progress bar."""
    if entry["error"]:
        bar.write(f"skipped {entry['error']}", file=sys.stderr)
    elif entry.get("note"):
        bar.write(f"note: {entry['note']}", file=sys.stderr)


def fix_seed(a) -> None:
    """The seed the model is built with, before it is: the user's (--seed); resumed
    without one, the stored run's (a new draw would mix two sets of random weights);
    else a new draw. Fixed here, not by the loader, so that the shards' key always holds
    the seed that built the weights, and Ray's actors build the same ones."""
    import random

    from inspector.batch.engine.shards import stored_seed

    if a.spec.seed is not None:
        return
    seed, given = stored_seed(a.out) if a.resume else (None, False)
    a.seed_given = given  # the run continued records what the uncut run would have
    a.spec = dataclasses.replace(
        a.spec, seed=random.randrange(2**31) if seed is None else seed)


def shard_store(a, loaded, sources: list[Source]):
    """(DIR/shards for this job, the shards an earlier run of it finished: resume);
    shards.JobMismatch when DIR holds another job's."""
    from inspector.batch.engine.shards import ShardStore

    a.out.mkdir(parents=True, exist_ok=True)
    store = ShardStore(a.out)
    done = store.start(job_key(a, loaded, sources), a.resume, not a.seed_given, a.warn,
                       ("summary.json", "compare.json"),
                       check=lambda _, record: check_record(a.out, record))
    return store, done


def check_record(out, record) -> None:
    """A finished shard's record as run_shards reads it, and every file it lists still in
    DIR (a copy of shards/ alone must not pass for the finished images); ShardDamaged."""
    from pathlib import Path

    from inspector.batch.engine.shards import ShardDamaged

    if not (isinstance(record, dict) and isinstance(record.get("images"), list)
            and isinstance(record.get("compared"), list)
            and all(isinstance(e, dict) and isinstance(e.get("files", {}), dict)
                    for e in record["images"])):
        raise ShardDamaged("not a record of images")
    missing = [rel for e in record["images"] for rel in e.get("files", {}).values()
               if not isinstance(rel, str) or not (Path(out) / rel).is_file()]
    if missing:
        raise ShardDamaged(f"{len(missing)} of the files it lists are missing, "
                           f"{missing[0]} first")


def job_key(a, loaded, sources: list[Source]):
    """What a resumed run must agree on (shards.JobKey)."""
    from inspector.batch.engine.shards import JobKey

    options = {
        "layers": a.layers, "cam": a.methods, "cam_layer": a.cam_layer,
        "target": str(a.target_text), "topk": a.topk, "stretch": a.stretch,
        "attr": a.attributions, "attr_options": a.attribution_options.as_dict(),
        "edit": [e["spec"] for e in edits_of(a.edits)], "compare": a.compare,
        "every": a.every,
        "attention": [a.attention.fusion, a.attention.discard, a.attention.lens,
                      sorted(a.attention.keep)],
        "patch_sweep": a.patch_sweep, "sweep_depth": a.sweep_depth,
        "dff": a.dff, "dff_layer": a.dff_layer,
        "metrics": None if a.metrics is None else dataclasses.asdict(a.metrics),
        "boxes": digest(a.boxes),
    }
    return JobKey.of("analyse", a.spec, a.spec.seed, options, a.shard_size, sources,
                     seed_given=a.seed_given)
