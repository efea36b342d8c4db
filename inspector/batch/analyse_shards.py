"""analyse's shards: a finished one read back from DIR/shards, the others run by the
engine, in this process (each image through batch.analyse_image) or on Ray actors
(batch.analyse_ray), each image's files written and then the shard's record.
"""

from __future__ import annotations

import sys

from inspector.batch.analyse_image import analyse_image
from inspector.batch.inputs import Source, VideoFrames, shard_count, shard_range
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
            from inspector.batch.analyse_ray import run_ray_shards, write_shard_files

            def on_shard(result: dict) -> None:
                write_shard_files(a.out, result, tb)
                for entry in result["images"]:
                    _say(bar, entry)
                save(result["shard"], {"images": result["images"],
                                       "compared": result["compared"]})
                bar.update(len(result["images"]))

            work = {s: [(sources[i], names[i], i) for i in shard_range(s, n, a.shard_size)]
                    for s in todo}
            # a.spec holds the seed this process's model was built with (Analysis._fix_seed).
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
