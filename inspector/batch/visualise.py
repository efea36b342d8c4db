"""`network-inspector visualise`: the picture each channel of a layer would draw, by
optimisation (core.explain.featurevis), over many channels, on one machine or on Ray.

    options checked, the model loaded, SPEC checked against the layer (exit 2 before work)
    -> the channels in batches of --batch-size, each batch one shard: its pictures
       DIR/<layer>/channel_NNNN.png, then shards/shard-NNNNN.json {channel: objective}
    -> DIR/visualise.json last (its presence: the run is complete)

Every image has its own seed (from --seed, the layer and the channel), so a picture does not
depend on the machine that made it; a resumed run (--resume) skips the finished shards.
Exit status: 0; 1 when the run failed or was cancelled (finished shards kept); 2 for options
that cannot work.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inspector.batch.engine.command import OptionError, check_engine, run_command, shards_stopped
from inspector.batch.engine.progress import JobCancelled, Progress
from inspector.batch.names import safe_name
from inspector.core.explain.featurevis.settings import (
    CLASS,
    DIRECTION,
    MAX_SIZE,
    MAX_STEPS,
    OBJECTIVES,
    FeatureVisSettings,
    Target,
)
from inspector.core.models.base import ModelSpec

OUTPUT_FOLDER = "output"  # the picture folder of --objective class without --layer
# More channels (or classes) than any layer has: a range past it is refused before it is
# expanded (a mistyped 0-100000000000 would otherwise fill the memory).
MAX_CHANNEL = 1 << 20


def parse_channels(spec: str) -> list[int]:
    """"0-63", "3,17", "0-7,12" -> sorted unique indices; OptionError for anything else."""
    out: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            a, b = (int(lo), int(hi)) if dash else (int(part), int(part))
        except ValueError:
            raise OptionError(f"--channels: '{part}' is not a channel or a range like 0-63") \
                from None
        if a < 0 or b < a:
            raise OptionError(f"--channels: '{part}' is not a range from low to high")
        if b >= MAX_CHANNEL:
            raise OptionError(f"--channels: '{part}' goes past {MAX_CHANNEL - 1}, more "
                              f"channels than any layer has")
        out.update(range(a, b + 1))
    if not out:
        raise OptionError("--channels names no channel; give e.g. 0-63 or 3,17")
    return sorted(out)


@dataclass
class VisualiseOptions:
    spec: ModelSpec
    layer: str
    channels: str
    out: Path
    steps: int = 512
    size: int | None = None
    seed: int = 0  # the optimisation's (the model's random weights: spec.seed)
    objective: str = "channel"
    directions: Path | None = None  # --objective direction: NPZ of concept vectors
    batch_size: int = 8
    engine: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    resume: bool = False
    progress: bool = True
    verbose: bool = False
    seed_drawn: bool = False
    warn: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))
    on_progress: Callable[[str, int, int], None] | None = None  # (stage, steps done, steps)
    cancel: threading.Event | None = None

    def settings(self) -> FeatureVisSettings:
        return FeatureVisSettings(steps=self.steps, size=self.size, seed=self.seed)

    def check(self) -> list[int]:
        """The channels; OptionError for options that cannot work."""
        if self.objective not in OBJECTIVES:
            raise OptionError(f"unknown objective '{self.objective}'; choose "
                              f"{', '.join(OBJECTIVES)}")
        if self.batch_size < 1:
            raise OptionError("--batch-size must be 1 or more")
        if not 1 <= self.steps <= MAX_STEPS:  # in the option's name; settings.check() too
            raise OptionError(f"--steps must be from 1 to {MAX_STEPS}")
        if self.size is not None and not 8 <= self.size <= MAX_SIZE:
            raise OptionError(f"--size must be from 8 to {MAX_SIZE} pixels")
        check_engine(self.engine, self.ray_address, self.workers)
        if self.objective == DIRECTION and self.directions is None:
            raise OptionError("--objective direction needs --directions FILE (concepts.npz "
                              "from `network-inspector concepts`, or an analyse --dff NPZ)")
        if not self.layer and self.objective != CLASS:
            raise OptionError("--layer is needed (only --objective class reads the output)")
        try:
            self.settings().check()
        except ValueError as e:
            raise OptionError(str(e)) from None
        return parse_channels(self.channels)


def load_directions(path: Path) -> np.ndarray:
    """(K, C) unit-free vectors: `vectors` of a concepts.npz, or `dff/concepts` (C x K) of
    an analyse NPZ. OptionError when the file has neither."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            found = None
            if "vectors" in npz:
                found = np.asarray(npz["vectors"], np.float32)
            elif "dff/concepts" in npz:
                found = np.asarray(npz["dff/concepts"], np.float32).T
    except (OSError, ValueError, AttributeError, TypeError):
        # numpy's own messages speak of pickles and zip files; a text file, a single .npy
        # (no `with`) or a damaged NPZ are all the same answer to the user.
        raise OptionError(f"--directions {path} is not an NPZ file (give the concepts.npz "
                          f"of `network-inspector concepts`, or an analyse --dff NPZ)") \
            from None
    if found is not None:
        if found.ndim != 2 or not np.isfinite(found).all():
            raise OptionError(f"--directions {path} holds values that are not finite numbers "
                              f"in a (directions x channels) table")
        return found
    raise OptionError(f"--directions {path} has no 'vectors' (concepts.npz) or 'dff/concepts' "
                      f"(analyse --dff) array")


def targets_for(opts: VisualiseOptions, channels: list[int],
                vectors: np.ndarray | None) -> list[Target]:
    if opts.objective == DIRECTION:
        return [Target(DIRECTION, c, tuple(float(v) for v in vectors[c])) for c in channels]
    return [Target(opts.objective, c) for c in channels]


def picture_path(out: Path, layer: str, channel: int) -> Path:
    return Path(out) / (safe_name(layer) or OUTPUT_FOLDER) / f"channel_{channel:04d}.png"


def run_visualise(opts: VisualiseOptions) -> int:
    return run_command("visualise", opts, lambda: _check(opts),
                       lambda checked: _run(opts, targets_for(opts, *checked)))


def _check(opts: VisualiseOptions):
    """(the channels, the --directions' vectors or None); OptionError."""
    channels = opts.check()
    vectors = load_directions(opts.directions) if opts.objective == DIRECTION else None
    if vectors is not None and channels[-1] >= len(vectors):
        raise OptionError(f"--directions has {len(vectors)} directions: "
                          f"{channels[-1]} is out of range")
    return channels, vectors


def _setup(opts: VisualiseOptions, targets: list[Target]):
    """The model loaded and the targets checked; or an exit status."""
    from inspector.batch.names import unknown_modules
    from inspector.core.explain.featurevis.render import target_count
    from inspector.core.models.load import load_model, probe_tree
    from inspector.core.run.runtime import apply_thread_setting

    apply_thread_setting()
    try:
        loaded = load_model(opts.spec)
    except Exception as e:  # every loader failure is reported in words, not a traceback
        opts.warn(f"could not load {opts.spec.what()}: {e}")
        return 1
    if not loaded.pretrained:
        opts.warn(f"warning: {loaded.description}: the pictures show an untrained network")
    if opts.layer:
        tree = probe_tree(loaded)
        if opts.layer not in tree.modules:
            opts.warn(unknown_modules([opts.layer], tree))
            return 2
    try:
        count = target_count(loaded, opts.layer, opts.objective)
        _size(opts, loaded)  # --size below the model input
    except ValueError as e:
        opts.warn(f"{opts.layer or 'the output'}: {e}")
        return 2
    what = "classes" if opts.objective == CLASS else "channels"
    bad = [t.index for t in targets if t.vector is None and t.index >= count]
    if bad:
        opts.warn(f"--channels: {opts.layer or 'the output'} has {count} {what} (0-{count - 1}); "
                  f"{bad[0]} is out of range")
        return 2
    if any(t.vector is not None and len(t.vector) != count for t in targets):
        opts.warn(f"--directions: the vectors have {len(targets[0].vector)} values, the layer "
                  f"{count} channels")
        return 2
    return loaded


def _run(opts: VisualiseOptions, targets: list[Target]) -> int:
    from inspector.batch.engine.shards import JobKey, ShardStore

    t0 = time.perf_counter()
    loaded = _setup(opts, targets)
    if isinstance(loaded, int):
        return loaded
    options = {"layer": opts.layer, "objective": opts.objective, "steps": opts.steps,
               "size": opts.size, "opt_seed": opts.seed, "settings": opts.settings().key(),
               "channels": [t.index for t in targets],
               "directions": None if opts.directions is None else str(opts.directions)}
    key = JobKey.of("visualise", opts.spec, opts.spec.seed, options, opts.batch_size, [])
    store = ShardStore(opts.out)
    done = store.start(key, opts.resume, opts.seed_drawn, opts.warn, ("visualise.json",),
                       check=_check_shard)
    batches = [targets[i:i + opts.batch_size] for i in range(0, len(targets), opts.batch_size)]
    todo = [s for s in range(len(batches)) if s not in done]
    # the optimisation looks at the cancel after each step (a last step makes whole pictures)
    bar = Progress(opts.progress, opts.on_progress, opts.cancel, check_cancel=False).stage(
        "visualise", sum(len(batches[s]) for s in todo) * opts.steps, unit="step",
        announce=False)
    try:
        if opts.engine == "ray" and todo:
            from inspector.batch.visualise_ray import run_ray

            run_ray(opts, batches, todo, store, bar.update, write_shard)
        for s in todo if opts.engine == "local" else ():
            if bar.cancelled:
                raise JobCancelled
            _local_shard(opts, loaded, batches[s], s, store, bar)
    except JobCancelled:
        opts.warn(f"the visualisation was cancelled; the finished shards are kept in "
                  f"{store.folder}: run again with --resume to continue")
        return 1
    except Exception as e:  # a model that fails in a forward, a lost cluster
        return shards_stopped(e, opts.out, store, opts.warn)
    finally:
        bar.close()
    return _finish(opts, loaded, batches, store, t0)


def _local_shard(opts, loaded, targets: list[Target], shard: int, store, bar) -> None:
    from inspector.core.explain.featurevis.render import Cancelled, render

    last = [0]

    def on_step(done: int, _total: int, _values) -> None:
        bar.update(len(targets) * (done - last[0]))
        last[0] = done

    try:
        vis = render(loaded, opts.layer, targets, opts.settings(), on_step, opts.cancel)
    except Cancelled:
        raise JobCancelled from None
    write_shard(opts, store, shard, targets, vis.pixels, vis.objective)


def write_shard(opts, store, shard: int, targets: list[Target], pixels: np.ndarray,
                objective: np.ndarray) -> None:
    """The shard's pictures, then its JSON: a shard on disk is always whole."""
    from inspector.core.export.files import save_png

    for t, px in zip(targets, pixels):
        final = picture_path(opts.out, opts.layer, t.index)
        part = final.with_name(final.name + ".part")
        save_png(part, px)
        part.replace(final)
    store.save_json(shard, {str(t.index): float(v) for t, v in zip(targets, objective)})


def _check_shard(_shard: int, value) -> None:
    """A finished shard's record, as _finish reads it: channel -> objective."""
    from inspector.batch.engine.shards import ShardDamaged

    if not isinstance(value, dict) or not all(
            k.isdecimal() and isinstance(v, (int, float)) for k, v in value.items()):
        raise ShardDamaged("not a record of channels and objectives")


def _finish(opts, loaded, batches, store, t0: float) -> int:
    from inspector.batch.writers import write_json
    from inspector.core.explain.featurevis.cache import weights_hash

    out = Path(opts.out)
    channels = {}
    for s in range(len(batches)):
        for c, value in store.load_json(s).items():
            path = picture_path(out, opts.layer, int(c))
            channels[c] = {"path": path.relative_to(out).as_posix(), "objective": value}
    doc = {"model": loaded.name, "layer": opts.layer, "steps": opts.steps, "seed": opts.seed,
           "objective": opts.objective, "size": list(_size(opts, loaded)),
           "weights": opts.spec.checkpoint or opts.spec.pickle,
           "weights_hash": weights_hash(loaded.model),
           # the seed that drew random weights; weights of the model's own never need one
           "model_seed": None if loaded.pretrained else loaded.seed,
           "settings": opts.settings().key(), "channels": channels}
    write_json(out / "visualise.json", doc)
    print(f"{len(channels)} pictures of {opts.layer or 'the output'} in "
          f"{time.perf_counter() - t0:.1f} s; results in {out}")
    return 0


def _size(opts, loaded) -> tuple[int, int]:
    from inspector.core.explain.featurevis.render import picture_size

    return picture_size(opts.settings(), tuple(loaded.preprocess.crop_size))


def read_visualise(out: Path) -> dict:
    """DIR/visualise.json (tests, scripts)."""
    return json.loads((Path(out) / "visualise.json").read_text())
