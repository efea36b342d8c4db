"""`network-inspector concepts`: K concepts shared by a folder's images at one layer.

    options and the model checked (exit 2 before any image is read)
    -> fit: a seeded sample of the images (--sample), a random quarter of each one's
       positions, MiniBatchNMF (core.explain.concept_folder)      shards/fit.npz
    -> codes: every image, shard by shard (local or Ray): per concept its maximum, where,
       its mean; the error terms summed over all rows           shards/shard-NNNNN.json
    -> receptive-field boxes and crops of each concept's top images (as `atlas`)
    -> concepts.npz (W, the unit vectors, the offset) and concepts.json last

concepts.json has the atlas's layout (its "layers" hold one layer whose "channels" are the
K concepts), so the window's Dataset dock opens it as an atlas, plus per concept its share
of the layer's activation, its top classes and channels, and the reconstruction error over
all rows. Exit status as `atlas`: 0, 1 (unreadable images, a failed or cancelled run), 2.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inspector.batch.engine.command import OptionError, check_engine, run_command, shards_stopped
from inspector.batch.engine.progress import JobCancelled, Progress
from inspector.core.models.base import ModelSpec

FIT_FILE = "fit.npz"


@dataclass
class ConceptOptions:
    spec: ModelSpec
    layer: str
    k: int
    out: Path
    seed: int = 0  # the fit's (the model's random weights: spec.seed)
    sample: int = 2000  # images in the fit
    top: int = 9
    batch_size: int = 32
    shard_size: int = 256
    engine: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    resume: bool = False
    every: int = 1
    progress: bool = True
    verbose: bool = False
    seed_drawn: bool = False
    warn: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))
    on_progress: Callable[[str, int, int], None] | None = None
    cancel: threading.Event | None = None

    def check(self) -> None:
        for name in ("k", "sample", "top", "batch_size", "shard_size", "every"):
            if getattr(self, name) < 1:
                raise OptionError(f"--{name.replace('_', '-')} must be 1 or more")
        check_engine(self.engine, self.ray_address, self.workers)
        if not self.layer:
            raise OptionError("--layer names no module; see `network-inspector tree`")


def run_concepts(opts: ConceptOptions, inputs: list[str]) -> int:
    return run_command("concepts", opts, lambda: _check(opts), lambda _: _work(opts, inputs))


def _check(opts: ConceptOptions) -> None:
    from inspector.core.explain.concepts import ConceptsUnavailable, sklearn_decomposition

    opts.check()
    try:
        sklearn_decomposition()
    except ConceptsUnavailable as e:  # the [concepts] extra is missing: said as an option
        raise OptionError(str(e)) from None


def _work(opts: ConceptOptions, inputs: list[str]) -> int:
    try:
        return _run(opts, inputs)
    except JobCancelled:
        opts.warn(f"the concepts run was cancelled; the finished shards are kept in "
                  f"{Path(opts.out) / 'shards'}: run again with --resume to continue")
        return 1


def _run(opts: ConceptOptions, inputs: list[str]) -> int:
    from inspector.batch.inputs import list_sources

    t0 = time.perf_counter()
    missing: list[tuple[str, str]] = []

    def on_missing(err) -> None:
        opts.warn(f"skipped {err}")
        missing.append((str(err.path), err.reason))

    sources = list_sources(inputs, opts.every, on_missing=on_missing)
    if not sources:
        opts.warn(f"no image files or video frames found in {', '.join(inputs)}")
        return 1
    setup = _setup(opts, sources)
    if isinstance(setup, int):
        return setup
    loaded, plan, store, done = setup
    bar = Progress(opts.progress, opts.on_progress, opts.cancel)
    try:
        fitted = _fit(opts, loaded, plan, sources, store, bar)
        _codes(opts, loaded, plan, sources, store, done, fitted, bar)
    except JobCancelled:
        raise
    except ValueError as e:  # K above what the sample allows
        opts.warn(str(e))
        return 2
    except Exception as e:  # a model that fails in a forward, a lost cluster
        return shards_stopped(e, opts.out, store, opts.warn)
    finally:
        bar.close()
    from inspector.batch.concept_files import write_results

    return write_results(opts, loaded, plan, sources, store, fitted, missing, t0)


def _setup(opts: ConceptOptions, sources):
    from inspector.batch.engine.shards import JobKey, ShardStore
    from inspector.batch.names import unknown_modules
    from inspector.batch.probe import plan_layers
    from inspector.core.models.load import load_model, probe_tree
    from inspector.core.run.runtime import apply_thread_setting

    apply_thread_setting()
    try:
        loaded = load_model(opts.spec)
    except Exception as e:  # every loader failure is reported in words, not a traceback
        opts.warn(f"could not load {opts.spec.what()}: {e}")
        return 1
    if not loaded.pretrained:
        opts.warn(f"warning: {loaded.description}: the concepts are an untrained network's")
    tree = probe_tree(loaded)
    try:
        if opts.layer not in tree.modules:
            raise ValueError(unknown_modules([opts.layer], tree))
        plan = plan_layers(tree, [opts.layer], tuple(loaded.preprocess.crop_size))[opts.layer]
        if opts.k > plan.channels:
            raise ValueError(f"--k {opts.k} is more than the {plan.channels} channels of "
                             f"{opts.layer}")
    except ValueError as e:
        opts.warn(str(e))
        return 2
    key = JobKey.of("concepts", opts.spec, opts.spec.seed,
                    {"layer": opts.layer, "k": opts.k, "fit_seed": opts.seed,
                     "sample": opts.sample, "top": opts.top}, opts.shard_size, sources)
    store = ShardStore(opts.out)
    done = store.start(key, opts.resume, opts.seed_drawn, opts.warn, ("concepts.json", "crops"),
                       check=_check_shard)
    _check_fit(store, done, opts.warn)
    return loaded, plan, store, done


def _check_shard(_shard: int, doc) -> None:
    """A finished shard's record as concept_files.merge reads it; ShardDamaged."""
    from inspector.batch.engine.shards import ShardDamaged

    if not (isinstance(doc, dict) and isinstance(doc.get("images"), dict)
            and isinstance(doc.get("failed"), list) and isinstance(doc.get("sums"), dict)
            and {"residual", "total", "rows", "share"} <= set(doc["sums"])):
        raise ShardDamaged("not a record of concept codes")


def _check_fit(store, done: set[int], warn) -> None:
    """A stored fit (FIT_FILE) that cannot be read is fitted again, and the shards coded
    with it are redone: their codes belong to the concepts that were lost."""
    path = store.folder / FIT_FILE
    if not path.is_file():
        return
    try:
        with np.load(path) as npz:
            for name in ("components", "offset", "fit_rows", "fit_error", "seed"):
                npz[name]
    except Exception as e:  # noqa: BLE001 - any damage means: fit again
        warn(f"{path} is damaged ({type(e).__name__}), so the concepts are fitted again "
             f"and {len(done)} finished shard(s) redone")
        path.unlink(missing_ok=True)
        for shard in done:
            store.json_path(shard).unlink(missing_ok=True)
        done.clear()


def sample_indices(n: int, sample: int, seed: int) -> list[int]:
    """The fit's images: a seeded subset of the job's indices, in index order."""
    rng = np.random.default_rng(seed)
    return sorted(rng.permutation(n)[:min(n, sample)].tolist())


def _fit(opts, loaded, plan, sources, store, bar):
    from inspector.batch.concept_pass import fit_sample
    from inspector.batch.engine.shards import write_bytes_atomic
    from inspector.batch.inputs import default_workers
    from inspector.core.explain.concept_folder import FolderFit, fit

    path = store.folder / FIT_FILE
    if path.is_file():  # a resumed run: the concepts its shards were coded with
        with np.load(path) as npz:
            return FolderFit(npz["components"], npz["offset"], int(npz["fit_rows"]),
                             float(npz["fit_error"]), int(npz["seed"]))
    indices = sample_indices(len(sources), opts.sample, opts.seed)
    bar.stage("fit", len(indices), announce=False)
    workers = default_workers() if opts.workers is None or opts.engine == "ray" else opts.workers
    rows = fit_sample(loaded.model, plan, loaded.device, sources, loaded.preprocess, indices,
                      opts.seed, opts.batch_size, workers, opts.every, bar.update)
    fitted = fit(rows, opts.k, opts.seed)
    data = io.BytesIO()
    np.savez(data, components=fitted.components, offset=fitted.offset,
             fit_rows=fitted.fit_rows, fit_error=fitted.fit_error, seed=fitted.seed)
    write_bytes_atomic(path, data.getvalue())
    return fitted


def _codes(opts, loaded, plan, sources, store, done, fitted, bar) -> None:
    from inspector.batch.inputs import shard_count, shard_range

    todo = [s for s in range(shard_count(len(sources), opts.shard_size)) if s not in done]
    bar.stage("codes", sum(len(shard_range(s, len(sources), opts.shard_size)) for s in todo),
              announce=False)
    if not todo:
        return
    if opts.engine == "ray":
        from inspector.batch.concept_ray import run_ray

        run_ray(opts, sources, todo, store, fitted, plan, bar.update)
        return
    from inspector.batch.concept_pass import Coder, code_batch, shard_result
    from inspector.batch.inputs import ImageFiles, default_workers, make_loader, shard_batches

    workers = default_workers() if opts.workers is None else opts.workers
    dataset = ImageFiles(sources, loaded.preprocess, every=opts.every)
    for shard in todo:
        coder, result = Coder(fitted), shard_result()
        batches = shard_batches([shard], len(sources), opts.shard_size, opts.batch_size)
        for batch in make_loader(dataset, batches, workers):
            result["failed"] += [[i, e] for i, e in batch.failed]
            for i, e in batch.failed:
                opts.warn(f"skipped {sources[i]}: {e}")
            if batch.x is not None:
                code_batch(coder, loaded.model, plan, batch.x.to(loaded.device),
                           batch.indices.tolist(), result)
            bar.update(len(batch))
        result["sums"] = coder.sums()
        store.save_json(shard, result)
    dataset.close()
