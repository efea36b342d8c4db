"""What every batch command (atlas, compare-models, visualise, concepts) does around its own
work, in one place so that each answers the same way: options that cannot work are one
sentence and exit status 2 before anything is read; so is an output folder that cannot be
written, that another run is writing (DIR is claimed, engine.out_dir) or that holds another
job's shards (engine.shards); Ray's own log lines
go to DIR/ray.log unless --verbose; a disk that fills up or a folder that stops being
writable is one sentence, exit status 1, and no half-written file is left."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from inspector.batch.engine.out_dir import OutDirError, claim, remove_partial, write_failure
from inspector.batch.engine.shards import JobMismatch

ENGINES = ("local", "ray")


RAY_INSTALL_HINT = "pip install 'network-inspector[cluster]'"


class OptionError(ValueError):
    """Options that cannot work: exit status 2, before any image is read."""


def require_ray() -> None:
    """OptionError with what to install when Ray Data cannot be imported."""
    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError as e:
        raise OptionError(
            f"--engine ray needs Ray Data, which cannot be imported here ({e}); install it "
            f"with: {RAY_INSTALL_HINT}"
        ) from None

Checked = TypeVar("Checked")


def check_engine(engine: str, ray_address: str | None, workers: int | None) -> None:
    """The engine options (--engine, --ray-address, --workers); OptionError when they
    cannot work."""
    if workers is not None and workers < 0:
        raise OptionError("--workers must be 0 or more")
    if engine not in ENGINES:
        raise OptionError(f"unknown engine '{engine}'; choose {' or '.join(ENGINES)}")
    if ray_address and engine != "ray":
        raise OptionError("--ray-address needs --engine ray")


def run_command(name: str, opts: Any, check: Callable[[], Checked],
                work: Callable[[Checked], int]) -> int:
    """Run command `name`'s `work` on what `check` returns (it raises OptionError for
    options that cannot work), with `opts`' out, engine, verbose and warn; the exit status."""
    from inspector.batch.engine.ray_logs import ray_logs_to_file

    warn, out = opts.warn, Path(opts.out)
    try:
        checked = check()
        if opts.engine == "ray":
            require_ray()
        lock = claim(out, name, warn=warn)  # before any work: another run's, or unwritable
    except (OptionError, OutDirError) as e:
        warn(str(e))
        return 2
    with lock, ray_logs_to_file(out, opts.verbose or opts.engine != "ray"):
        try:
            return work(checked)
        except JobMismatch as e:  # DIR holds another job's shards (ShardStore.start)
            warn(str(e))
            return 2
        except OSError as e:
            failure = write_failure(e, out)
            if failure is None:
                raise
            warn(str(failure))
            remove_partial(out)
            return 1


def shards_stopped(e: Exception, out, store, warn) -> int:
    """A job's shards stopped by `e` (a model that fails in a forward, a lost cluster): one
    sentence saying the finished shards are kept, exit status 1. A failure to write DIR is
    raised again, for run_command to say as a sentence about the disk."""
    if isinstance(e, OSError) and write_failure(e, Path(out)) is not None:
        raise e
    warn(f"the run stopped: {type(e).__name__}: {e}; the finished shards are kept in "
         f"{store.folder}: run again with --resume to continue")
    return 1
