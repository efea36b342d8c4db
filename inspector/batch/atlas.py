"""`network-inspector atlas`: which images each channel of a layer responds to most.

    options and the model checked (exit 2 before any image is read: unknown layer, ...)
    -> statistics pass, shard by shard (local engine, or Ray)   shards/shard-NNNNN.pt
    -> the shards merged (exact top-k, sums)
    -> receptive-field boxes of the final top-k only (a second, small pass; on this machine)
    -> crops/, classes/, classes.json, and atlas.json last (its presence: the run is complete)

Exit status: 0, 1 when an image could not be read (listed in atlas.json's "failed") or the
run failed or was cancelled, 2 for options that cannot work.

A program that runs an atlas on a thread of its own (the window's File ▸ New atlas…) passes
`on_progress` (called on that thread after each batch) and `cancel` (a threading.Event, looked
at after each batch): a cancelled run stops at the next batch with its finished shards kept,
for --resume.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inspector.batch.engine.command import OptionError, check_engine, run_command, shards_stopped
from inspector.batch.engine.out_dir import write_failure
from inspector.batch.engine.progress import JobCancelled, Progress
from inspector.batch.inputs import Source
from inspector.core.inputs.images import ImageLoadError
from inspector.core.models.base import ModelSpec

# What a finished run writes in DIR (atlas.json last), beside the shards.
RESULTS = ("atlas.json", "classes.json", "crops", "classes")


@dataclass
class AtlasOptions:
    spec: ModelSpec
    layers: list[str]
    out: Path
    top: int = 9
    batch_size: int = 32
    workers: int | None = None  # local: DataLoader processes; ray: actors (default: per slot)
    engine: str = "local"
    ray_address: str | None = None
    resume: bool = False
    shard_size: int = 256
    every: int = 1  # of a video's frames, the atlas ranks 0, every, 2 * every, ...
    progress: bool = True
    verbose: bool = False  # Ray's own log lines on the terminal (else in DIR/ray.log)
    seed_drawn: bool = False  # spec.seed was drawn, not given (--seed): see ShardStore.prepare
    warn: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))
    # (stage "atlas" or "boxes", images done, images to do), on the thread that runs the atlas
    on_progress: Callable[[str, int, int], None] | None = None
    cancel: threading.Event | None = None  # set: stop after the batch running

    def check(self) -> None:
        for name in ("top", "batch_size", "shard_size", "every"):
            if getattr(self, name) < 1:
                raise OptionError(f"--{name.replace('_', '-')} must be 1 or more")
        check_engine(self.engine, self.ray_address, self.workers)
        if not self.layers:
            raise OptionError("--layers names no module; see `network-inspector tree`")


def run_atlas(opts: AtlasOptions, inputs: list[str]) -> int:
    t0 = time.perf_counter()
    return run_command("atlas", opts, opts.check, lambda _: _run(opts, inputs, t0))


def _run(opts: AtlasOptions, inputs: list[str], t0: float) -> int:
    warn = opts.warn
    missing: list[tuple[str, str]] = []

    def on_missing(err: ImageLoadError) -> None:
        warn(f"skipped {err}")
        missing.append((str(err.path), err.reason))

    from inspector.batch.inputs import list_sources

    sources = list_sources(inputs, opts.every, on_missing=on_missing)
    if not sources:
        warn(f"no image files or video frames found in {', '.join(inputs)}")
        return 1
    setup = _setup(opts, sources)
    if isinstance(setup, int):
        return setup
    loaded, job, store, todo = setup

    from inspector.batch.inputs import shard_range

    todo_images = sum(len(shard_range(s, len(sources), job.shard_size)) for s in todo)
    bar = None
    try:
        bar = Progress(opts.progress, opts.on_progress, opts.cancel).stage("atlas", todo_images)
        _statistics(opts, loaded, job, store, todo, bar)
    except JobCancelled:
        return _cancelled(opts, store)
    except Exception as e:  # a model that fails in a forward, a lost cluster
        return shards_stopped(e, opts.out, store, warn)
    finally:
        if bar is not None:
            bar.close()
    try:
        return _finish(opts, loaded, job, store, missing, t0)
    except JobCancelled:
        return _cancelled(opts, store)


def _cancelled(opts: AtlasOptions, store) -> int:
    opts.warn(f"the atlas was cancelled; the finished shards are kept in {store.folder}: run "
              f"again with --resume to continue")
    return 1


def _setup(opts: AtlasOptions, sources: list[Source]):
    """The model loaded and checked, the job, its shard store and the shards still to do;
    or an exit status."""
    import torch

    from inspector.batch.engine.shards import JobKey, ShardStore
    from inspector.batch.inputs import shard_count
    from inspector.batch.job import StatsJob
    from inspector.batch.names import unknown_modules
    from inspector.batch.probe import plan_layers
    from inspector.batch.reduce import Reduction
    from inspector.core.explain.cam.compute import compute_cams
    from inspector.core.explain.cam.layer import default_target_layer
    from inspector.core.models.files import ModelLoadError
    from inspector.core.models.load import load_model, probe_tree
    from inspector.core.run.runtime import apply_thread_setting

    apply_thread_setting()  # this command runs the model without a Session
    warn = opts.warn
    try:
        loaded = load_model(opts.spec)
    except Exception as e:  # every loader failure is reported in words, not a traceback
        warn(f"could not load {opts.spec.what()}: {e}")
        return 1
    if not loaded.pretrained:
        warn(f"warning: {loaded.description}: the atlas shows an untrained network")
    h, w = loaded.preprocess.crop_size
    try:
        tree = probe_tree(loaded)
    except ModelLoadError as e:
        warn(str(e))
        return 1
    layers = list(dict.fromkeys(opts.layers))
    try:
        unknown = [n for n in layers if not n or n not in tree.modules]
        if unknown:
            raise ValueError(unknown_modules(unknown, tree))
        plans = plan_layers(tree, layers, (h, w))
    except ValueError as e:
        warn(str(e))
        return 2

    cam_layer = cam_shape = None
    try:
        cam_layer = default_target_layer(loaded.model, tree)
        trial = compute_cams(loaded.model, torch.zeros(1, 3, h, w, device=loaded.device),
                             ["gradcam"], cam_layer)
        cam_shape = (int(trial.logits.shape[-1]), *trial.raw["gradcam"].shape[-2:])
    except Exception as e:  # noqa: BLE001 - any failure only means: no class maps
        warn(f"note: no per-class Grad-CAM maps for this model: {type(e).__name__}: {e}")
        cam_layer = None

    spec = opts.spec
    key = JobKey.of("atlas", spec, spec.seed, {"layers": layers, "top": opts.top},
                    opts.shard_size, sources)
    # A fresh run: the files of an earlier one in this folder go now, so that a run killed
    # before it ends never leaves another run's atlas.json looking like its own.
    store = ShardStore(opts.out)
    done = store.start(key, opts.resume, opts.seed_drawn, warn, RESULTS,
                       check=lambda _, state: Reduction.from_state(state))
    job = StatsJob(
        paths=tuple(sources), preprocess=loaded.preprocess, plans=plans, cam_layer=cam_layer,
        cam_shape=cam_shape, top=opts.top, shard_size=opts.shard_size,
        batch_size=opts.batch_size, every=opts.every,
    )
    todo = [s for s in range(shard_count(len(sources), opts.shard_size)) if s not in done]
    return loaded, job, store, todo


def _statistics(opts: AtlasOptions, loaded, job, store, todo: list[int], bar) -> None:
    def failed(message: str) -> None:
        bar.write(f"skipped {message}", file=sys.stderr)

    if not todo:
        return
    if opts.engine == "ray":
        from inspector.batch.ray_engine import run_ray

        run_ray(job, opts.spec, todo, store, opts.ray_address, opts.workers,
                on_images=bar.update, on_failed=failed, verbose=opts.verbose)
    else:
        from inspector.batch.inputs import default_workers
        from inspector.batch.local import run_local

        workers = default_workers() if opts.workers is None else opts.workers
        run_local(job, loaded.model, loaded.device, todo, store, workers,
                  on_images=bar.update, on_failed=failed)


def _finish(opts: AtlasOptions, loaded, job, store, missing, t0: float) -> int:
    """Merge the shards, measure the boxes of the final top-k, write the files."""
    from inspector.batch.boxes import compute_boxes
    from inspector.batch.inputs import ImageFiles, default_workers, shard_count
    from inspector.batch.reduce import Reduction
    from inspector.batch.writers import (
        atlas_document,
        entries_of,
        write_classes,
        write_crops,
        write_json,
    )

    warn, out, sources = opts.warn, Path(opts.out), list(job.paths)
    total = job.empty("cpu")
    for shard in range(shard_count(len(sources), job.shard_size)):
        total.merge(Reduction.from_state(store.load_state(shard)))

    entries = entries_of(total)
    images = len({e.index for e in entries})
    workers = default_workers() if opts.workers is None or opts.engine == "ray" else opts.workers
    bar = Progress(opts.progress, opts.on_progress, opts.cancel).stage("boxes", images)
    try:
        boxes, unreadable = compute_boxes(
            loaded.model, job.plans, ImageFiles(sources, job.preprocess, every=job.every),
            entries,
            loaded.device, job.batch_size, workers, on_image=bar.update,
        )
    except JobCancelled:
        bar.close()
        raise
    except Exception as e:  # the statistics are safe in the shards; say what failed
        bar.close()
        if isinstance(e, OSError) and write_failure(e, Path(opts.out)) is not None:
            raise  # said in run_atlas, as a sentence about the disk
        warn(f"measuring the receptive-field boxes failed: {type(e).__name__}: {e}")
        return 1
    bar.close()
    for index, message in unreadable.items():
        warn(f"no box: {sources[index]} cannot be read any more: {message}")

    _remove_results(out)  # outputs of an earlier run of this job (a resumed one's too)
    for message in write_crops(out, sources, boxes, job.every):
        warn(f"no crop: {message}")
    if job.cam_layer is not None and total.cam_sum is not None:
        write_classes(out, total, loaded.categories, job.cam_layer, job.preprocess.crop_size)
    doc = atlas_document(loaded.name, opts.spec.checkpoint or opts.spec.pickle, sources, total,
                         boxes, missing)
    write_json(out / "atlas.json", doc)
    failed = len(doc["failed"])
    print(f"{total.images} images in the atlas, {failed} failed, in "
          f"{time.perf_counter() - t0:.1f} s; results in {out}")
    return 1 if failed else 0


def _remove_results(out: Path) -> None:
    """The files a finished run writes (atlas.json last), not the shards."""
    for name in RESULTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
