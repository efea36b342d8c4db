"""`compare-models` before the first image: the inputs listed, the seeds fixed, both models
loaded and probed, the layers and the --match pair checked (exit 2 before any image is
read), the estimator and its plan chosen and said, the shards of an earlier run found.

Seeds: random weights must be the same in every process that builds a model (Ray actors, a
resumed run), so a seed is fixed here before either model is built: --seed for both (the
same architecture without weights is then the same network twice), else a new draw for each,
or, with --resume, the stored run's; B's is A's (--seed) or A's plus one (drawn).
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from inspector.batch.compare_models.pair import (
    choose_layers,
    plan_match,
    plan_side,
    split_match,
)
from inspector.batch.compare_models.plan import CompareJob, Plan, plan
from inspector.batch.engine.command import OptionError
from inspector.core.compare.cka import EXACT, MIN_IMAGES, MINIBATCH

EXACT_MAX_BLOCKS = 4  # the default estimator is exact up to this many blocks ((B-1)x images)


@dataclass
class Ready:
    a: object  # core.models.base.LoadedModel
    b: object  # the same object when B is A
    spec_a: object
    spec_b: object | None  # None: B is A
    job: CompareJob
    store: object  # batch.engine.shards.ShardStore
    todo: list[int]
    sources: list
    missing: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)


def setup(opts, inputs: list[str]):
    """A Ready, or the exit status (said through opts.warn)."""
    from inspector.batch.inputs import list_sources
    from inspector.core.inputs.images import ImageLoadError
    from inspector.core.inputs.video import is_video
    from inspector.core.run.runtime import apply_thread_setting

    apply_thread_setting()  # this command runs the models without a Session
    warn = opts.warn
    missing: list[tuple[str, str]] = []

    def on_missing(err: ImageLoadError) -> None:
        warn(f"skipped {err}")
        missing.append((str(err.path), err.reason))

    videos = [p for p in inputs if is_video(p)]
    for video in videos:
        warn(f"skipped {video}: compare-models reads image files, not videos")
    sources = list_sources([p for p in inputs if p not in videos], on_missing=on_missing)
    if not sources:
        warn(f"no image files found in {', '.join(inputs)}")
        return 1
    if len(sources) < MIN_IMAGES:
        warn(f"CKA compares how the images' representations relate to one another: it needs "
             f"at least {MIN_IMAGES} images, and {', '.join(inputs)} holds {len(sources)}")
        return 2
    rule = fix_seeds(opts)
    models = _load(opts)
    if isinstance(models, int):
        return models
    a, b, tree_a, tree_b = models
    try:
        job, notes = _job(opts, sources, a, b, tree_a, tree_b)
    except OptionError as e:
        warn(str(e))
        return 2
    for note in notes:
        warn(f"note: {note}")
    store, todo = _store(opts, job, sources, rule)
    return Ready(a, b, opts.spec_a, opts.spec_b, job, store, todo, sources, missing, notes)


def fix_seeds(opts) -> str:
    """Fix both seeds (see the module docstring); B's follows A's: "same" (--seed given) or
    "next" (drawn: A's plus one), so that a resumed run rebuilds both from the stored one."""
    stored_seed, stored_rule = None, None
    if opts.resume:
        try:
            stored = json.loads((Path(opts.out) / "shards" / "job.json").read_text())
            stored_seed, stored_rule = stored.get("seed"), stored["options"].get("seed_b")
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            pass
    rule = "same" if opts.spec_a.seed is not None else "next"
    if opts.spec_a.seed is None:
        opts.seeds_drawn = True
        seed = stored_seed if isinstance(stored_seed, int) else random.randrange(2**31 - 1)
        opts.spec_a = dataclasses.replace(opts.spec_a, seed=seed)
        rule = stored_rule if stored_rule in ("same", "next") else rule
    if opts.spec_b is not None and opts.spec_b.seed is None:
        seed_b = opts.spec_a.seed + (rule == "next")
        opts.spec_b = dataclasses.replace(opts.spec_b, seed=seed_b)
    return rule


def _load(opts):
    if opts.models is not None:
        return opts.models
    return load_pair(opts.spec_a, opts.spec_b, opts.warn)


def load_pair(spec_a, spec_b, warn):
    """(A, B, A's tree, B's tree), B the same objects as A's when spec_b is None; or the exit
    status 1, said through `warn`."""
    from inspector.core.models.files import ModelLoadError
    from inspector.core.models.load import load_model, probe_tree

    loaded, trees = [], []
    for side, spec in (("A", spec_a), ("B", spec_b)):
        if spec is None:
            loaded.append(loaded[0])
            trees.append(trees[0])
            continue
        try:
            model = load_model(spec)
            tree = probe_tree(model)
        except ModelLoadError as e:
            warn(f"model {side}: {e}")
            return 1
        except Exception as e:  # every loader failure is reported in words, not a traceback
            warn(f"could not load model {side}, {spec.what()}: {e}")
            return 1
        if not model.pretrained:
            warn(f"warning: model {side}, {model.description}: the similarities are an "
                 f"untrained network's")
        loaded.append(model)
        trees.append(tree)
    return loaded[0], loaded[1], trees[0], trees[1]


def choose_estimator(opts, n: int) -> tuple[str, list[str]]:
    """The estimator asked for, or the default: exact while its plan has at most
    EXACT_MAX_BLOCKS blocks, else minibatch; with the notes that say so."""
    if opts.estimator is not None:
        return opts.estimator, []
    blocks = plan(n, EXACT, opts.batch_size, opts.shard_size, 0).blocks
    if blocks <= EXACT_MAX_BLOCKS or opts.batch_size < 4:
        return EXACT, []
    return MINIBATCH, [f"{n} images are {blocks} blocks of {max(1, opts.batch_size // 2)} "
                       f"for the exact estimator ({blocks - 1}x the forwards): the minibatch "
                       f"estimator is used (--estimator exact, or a larger --batch-size, for "
                       f"the exact one)"]


def _job(opts, sources, a, b, tree_a, tree_b) -> tuple[CompareJob, list[str]]:
    hw_a, hw_b = a.preprocess.crop_size, b.preprocess.crop_size
    names_a = choose_layers(tree_a, opts.layers_a, "A")
    wanted_b = opts.layers_b
    if wanted_b is None:
        same = isinstance(opts.layers_a, list) and all(n in tree_b.modules for n in names_a)
        wanted_b = names_a if same or b is a else "auto"
    names_b = choose_layers(tree_b, wanted_b, "B")
    side_a = plan_side(tree_a, names_a, hw_a, "A")
    side_b = side_a if b is a and names_b == names_a else plan_side(tree_b, names_b, hw_b, "B")
    notes = []
    match = None
    if opts.match:
        la, lb = split_match(opts.match, tree_a, tree_b)
        match = plan_match(tree_a, tree_b, la, lb, hw_a, hw_b)
        if match.note:
            notes.append(f"--match {la}:{lb}: {match.note}")
        if (a.preprocess.crop_size, a.preprocess.resize_size) != (
                b.preprocess.crop_size, b.preprocess.resize_size):
            notes.append("the two models crop the images differently: the positions matched "
                         "cover different parts of each picture")
    estimator, more = choose_estimator(opts, len(sources))
    notes += more
    shard_size = opts.shard_size
    if estimator == MINIBATCH and shard_size % opts.batch_size:
        shard_size = max(opts.batch_size, shard_size - shard_size % opts.batch_size)
        notes.append(f"--shard-size {opts.shard_size} rounded to {shard_size}: a shard holds "
                     f"whole minibatches of {opts.batch_size}")
    opts.shard_size = shard_size
    the_plan = plan(len(sources), estimator, opts.batch_size, shard_size, opts.order_seed)
    notes.append(describe_plan(the_plan, len(sources), opts.batch_size, len(names_a),
                               len(names_b)))
    pre_b = None if b.preprocess == a.preprocess else b.preprocess
    job = CompareJob(tuple(sources), a.preprocess, pre_b, side_a, side_b, b is a, match,
                     the_plan, len(sources))
    return job, notes


def describe_plan(p: Plan, n: int, batch_size: int, la: int, lb: int) -> str:
    """One line: what will be computed, and what it costs in forwards."""
    pairs = f"{la} x {lb} layer pairs"
    if p.estimator == EXACT and p.blocks == 1:
        return f"linear CKA, exact, over {n} images in one forward: {pairs}"
    if p.estimator == EXACT:
        m = max(1, batch_size // 2)
        return (f"linear CKA, exact, over {n} images in {p.blocks} blocks of {m}: "
                f"{len(p.shards)} forwards of up to {2 * m} images ({p.blocks - 1}x the "
                f"images; --estimator minibatch: 1x): {pairs}")
    left = f"; the last {len(p.left_out)} image(s) left out (under 4)" if p.left_out else ""
    return (f"linear CKA, minibatch (Nguyen et al. 2021), over {n} images in {p.blocks} "
            f"minibatches of {batch_size} in a seeded random order{left}: {pairs}")


def _store(opts, job: CompareJob, sources, seed_rule: str):
    from inspector.batch.engine.shards import JobKey, ShardStore

    spec_b = opts.spec_b
    options = {
        "model_b": None if spec_b is None else str(spec_b.factory or spec_b.pickle or spec_b.name),
        "weights_b": None if spec_b is None else (spec_b.checkpoint or spec_b.pickle),
        "seed_b": None if spec_b is None else seed_rule,
        "layers_a": list(job.side_a.names), "layers_b": list(job.side_b.names),
        "estimator": job.plan.estimator, "batch_size": opts.batch_size,
        "order_seed": opts.order_seed if job.plan.estimator == MINIBATCH else None,
        "match": None if job.match is None else [job.match.layer_a, job.match.layer_b],
    }
    key = JobKey.of("compare-models", opts.spec_a, opts.spec_a.seed, options, opts.shard_size,
                    sources)
    store = ShardStore(opts.out)
    done = store.start(key, opts.resume, opts.seeds_drawn, opts.warn,
                       ("cka.json", "cka.png", "matches.json"))
    return store, [s for s in range(len(job.plan.shards)) if s not in done]
