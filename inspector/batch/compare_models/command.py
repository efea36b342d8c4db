"""`network-inspector compare-models`: how similar every layer of model A is to every layer of
model B over a folder of images (linear CKA, core.compare.cka), and which channels of a layer
pair match (--match).

    options checked (exit 2), the output folder claimed, both models loaded and probed,
    their layers chosen (exit 2 for an unknown one, before any image is read)
    -> the plan: exact (all images in one forward, or blocks) or minibatch (a seeded
       permutation in minibatches), said in one line; cut into shards
    -> the shards, here or on Ray                          DIR/shards/shard-NNNNN.pt
    -> the shards merged in order                          DIR/cka.json, cka.png,
                                                           matches.json (--match)

Exit status: 0, 1 when an image could not be read (listed in cka.json's "failed") or the run
failed or was cancelled, 2 for options that cannot work.

A program that runs it on a thread of its own (the window's File ▸ Compare with model…)
passes `on_progress("compare", done, total)` and `cancel` (a threading.Event looked at after each
forward): a cancelled run stops with its finished shards kept, for --resume.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inspector.batch.engine.command import OptionError, check_engine, run_command, shards_stopped
from inspector.batch.engine.progress import JobCancelled, Progress
from inspector.core.compare.cka import ESTIMATORS, EXACT, MIN_MINIBATCH, MINIBATCH
from inspector.core.models.base import ModelSpec


@dataclass
class CompareOptions:
    spec_a: ModelSpec
    spec_b: ModelSpec | None  # None: B is A itself
    out: Path
    layers_a: list[str] | str = "auto"
    layers_b: list[str] | str | None = None  # None: A's names where B has them all, else auto
    # None: exact up to setup.EXACT_MAX_BLOCKS blocks, else minibatch
    estimator: str | None = None
    batch_size: int = 64  # images per forward; the minibatch size
    order_seed: int = 0  # the minibatches' permutation
    shard_size: int = 256
    match: str | None = None  # "LA:LB"
    match_threshold: float = 0.5
    atlas_a: Path | None = None
    atlas_b: Path | None = None
    workers: int | None = None
    engine: str = "local"
    ray_address: str | None = None
    resume: bool = False
    progress: bool = True
    verbose: bool = False
    seeds_drawn: bool = False  # the seeds were drawn, not given (see ShardStore.prepare)
    # (A, B, A's tree, B's tree) already loaded and probed from spec_a and spec_b (B is A's
    # object when spec_b is None): the window keeps its pair loaded between runs.
    models: tuple | None = None
    warn: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))
    on_progress: Callable[[str, int, int], None] | None = None
    cancel: threading.Event | None = None

    def check(self) -> None:
        for name in ("batch_size", "shard_size"):
            if getattr(self, name) < 1:
                raise OptionError(f"--{name.replace('_', '-')} must be 1 or more")
        if self.estimator is not None and self.estimator not in ESTIMATORS:
            raise OptionError(f"unknown estimator '{self.estimator}'; choose "
                              f"{' or '.join(ESTIMATORS)}")
        if self.estimator == MINIBATCH and self.batch_size < MIN_MINIBATCH:
            raise OptionError(f"--estimator minibatch needs --batch-size {MIN_MINIBATCH} or "
                              f"more (HSIC_1 is defined from 4 images)")
        if self.estimator == EXACT and self.batch_size < 2:
            raise OptionError("--estimator exact needs --batch-size 2 or more")
        if not -1.0 <= self.match_threshold <= 1.0:
            raise OptionError("--match-threshold is a correlation: between -1 and 1")
        if (self.atlas_a or self.atlas_b) and not self.match:
            raise OptionError("--atlas-a and --atlas-b add crops to --match's channels: give "
                              "--match LAYER_A:LAYER_B")
        from inspector.batch.compare_models.writers import check_atlas

        for flag, folder in (("--atlas-a", self.atlas_a), ("--atlas-b", self.atlas_b)):
            if folder is not None and (problem := check_atlas(folder, flag)):
                raise OptionError(problem)
        check_engine(self.engine, self.ray_address, self.workers)


def run_compare_models(opts: CompareOptions, inputs: list[str]) -> int:
    t0 = time.perf_counter()
    return run_command("compare-models", opts, opts.check, lambda _: _run(opts, inputs, t0))


def _run(opts: CompareOptions, inputs: list[str], t0: float) -> int:
    from inspector.batch.compare_models.setup import setup

    warn = opts.warn
    ready = setup(opts, inputs)
    if isinstance(ready, int):
        return ready
    total = ready.job.plan.images_forwarded()
    todo_images = sum(len(g.images) for s in ready.todo for g in ready.job.plan.shards[s])
    bar = Progress(opts.progress, opts.on_progress, opts.cancel).stage(
        "compare", total, done=total - todo_images)
    try:
        _shards(opts, ready, bar)
    except JobCancelled:
        warn(f"the comparison was cancelled; the finished shards are kept in "
             f"{ready.store.folder}: run again with --resume to continue")
        return 1
    except Exception as e:  # a model that fails in a forward, a lost cluster
        return shards_stopped(e, opts.out, ready.store, warn)
    finally:
        bar.close()
    from inspector.batch.compare_models.finish import finish

    return finish(opts, ready, t0)


def _shards(opts: CompareOptions, ready, bar: Progress) -> None:
    import torch

    def save(shard: int, state: dict) -> None:
        ready.store.save(shard, _State(state))

    if not ready.todo:
        return
    if opts.engine == "ray":
        from inspector.batch.compare_models.engines import run_ray

        run_ray(ready.job, ready.spec_a, ready.spec_b, ready.todo, save, opts.ray_address,
                opts.workers, on_images=bar.update, verbose=opts.verbose)
        return
    from inspector.batch.compare_models.engines import run_local
    from inspector.batch.inputs import default_workers

    workers = default_workers() if opts.workers is None else opts.workers
    with torch.no_grad():
        run_local(ready.job, ready.a.model, ready.b.model, ready.a.device, ready.todo, save,
                  workers, on_images=bar.update)


class _State:
    """A shard's state as batch.engine.shards.ShardStore.save takes it (anything with state())."""

    def __init__(self, state: dict) -> None:
        self._state = state

    def state(self) -> dict:
        return self._state
