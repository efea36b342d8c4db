"""A job's finished shards on disk: what `--resume` continues from.

DIR/shards/job.json describes the job (the command, model, weights, the seed of its random
weights, the command's options, the shard size, and a hash of the input list).
DIR/shards/shard-NNNNN.pt holds one finished shard's tensors (an atlas shard's `Reduction`);
DIR/shards/shard-NNNNN.json one finished analyse shard's summary entries (its images' files
are written before it). Every file is written to a `.part` file first and moved into place
with os.replace, so a run killed at any moment leaves either a whole shard or none.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

_SHARD = re.compile(r"shard-(\d+)\.(?:pt|json)")


class JobMismatch(ValueError):
    """The output folder holds shards of another job."""


class ShardDamaged(ValueError):
    """A finished shard's file holds something its command does not read as a shard."""


@dataclass(frozen=True)
class JobKey:
    """What a finished shard's result depends on; a resumed run must agree on all of it."""

    command: str  # "atlas" or "analyse": their shards hold different things
    model: str
    weights: str | None
    # The seed the model's random weights were built with (None: all from files); a resumed
    # run without --seed takes the stored one (stored_seed), never a new draw.
    seed: int | None
    options: dict[str, Any] = field(hash=False)  # the command's own (JSON values)
    shard_size: int = 1
    files: str = ""  # sha256 of the inputs (absolute paths, video frames), one a line
    images: int = 0
    # Whether `seed` was the user's (--seed) rather than drawn: not part of the job (a resumed
    # run without --seed continues it), but what its results record (analyse's summary).
    seed_given: bool | None = None

    @classmethod
    def of(cls, command: str, spec, seed: int | None, options: dict[str, Any],
           shard_size: int, inputs: Sequence, seed_given: bool | None = None) -> JobKey:
        """`spec`: the core.models.load.ModelSpec; `inputs`: paths or inputs.Source, in order."""
        digest = hashlib.sha256()
        for item in inputs:
            key = item.key() if hasattr(item, "key") else os.path.abspath(item)
            digest.update(key.encode("utf-8", "surrogateescape") + b"\n")
        weights = spec.checkpoint or spec.pickle
        return cls(command, str(spec.factory or spec.pickle or spec.name),
                   None if weights is None else os.path.abspath(weights),
                   None if seed is None else int(seed), json.loads(json.dumps(options)),
                   int(shard_size), digest.hexdigest(), len(inputs), seed_given)

    def describe_difference(self, other: dict) -> str:
        mine = _jsonable(self)
        names = {"files": "the image files", "images": "the number of images",
                 "seed": "the seed (--seed)"}
        differ = []
        for k in mine:
            if k == "seed_given":
                continue
            if k == "options" and isinstance(other.get(k), dict):
                theirs = other[k]
                differ += [f"--{o.replace('_', '-')}" for o in {**mine[k], **theirs}
                           if mine[k].get(o) != theirs.get(o)]
            elif mine[k] != other.get(k):
                differ.append(names.get(k, k))
        return ", ".join(dict.fromkeys(differ)) or "the job"


def _jsonable(key: JobKey) -> dict:
    return json.loads(json.dumps(asdict(key)))


def _same_job(stored: dict, mine: dict, ignore_seed: bool) -> bool:
    ignored = {"seed_given": None, **({"seed": None} if ignore_seed else {})}
    return {**stored, **ignored} == {**mine, **ignored}


def stored_seed(out: Path) -> tuple[int | None, bool]:
    """(the seed of the job whose shards are in `out`, None: none or weights from files;
    whether it was the user's --seed)."""
    try:
        stored = json.loads((Path(out) / "shards" / "job.json").read_text())
    except (OSError, ValueError):
        return None, False
    seed = stored.get("seed") if isinstance(stored, dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool):
        return None, False
    return seed, stored.get("seed_given") is True


class ShardStore:
    def __init__(self, out: Path) -> None:
        self.folder = Path(out) / "shards"

    def path(self, shard: int) -> Path:
        return self.folder / f"shard-{shard:05d}.pt"

    def finished(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.folder.iterdir()
                      if (m := _SHARD.fullmatch(p.name)))

    def start(self, key: JobKey, resume: bool, drawn_seed: bool, warn,
              results: Sequence[str] = (),
              check: Callable[[int, Any], None] | None = None) -> set[int]:
        """prepare(), with its note said by `warn`; a finished shard that cannot be read
        back (a truncated file, a pickle, bad JSON, or what `check(shard, value)` refuses
        with ShardDamaged) named in one sentence, removed and so redone; on a fresh run
        (nothing reused), the files or folders a finished run of the job wrote in DIR
        (`results`) removed, so that an earlier run's results never pass for this one's.
        JobMismatch as prepare."""
        done, note = self.prepare(key, resume, drawn_seed=drawn_seed)
        damaged = self.drop_damaged(done, warn, check)
        if damaged and resume:  # the note counts what is really reused
            note = f"resuming: {len(done)} finished shard(s) reused" if done else None
        if note:
            warn(note)
        if not done:
            for name in results:
                path = self.folder.parent / name
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return done

    def prepare(self, key: JobKey, resume: bool,
                drawn_seed: bool = False) -> tuple[set[int], str | None]:
        """Finished shards to reuse, and a note for the user; JobMismatch if the folder holds
        another job's shards (never overwritten: they may be hours of someone's work).
        `drawn_seed`: no --seed was given; a run that is not resumed then replaces the same
        job's shards even though its seed differs."""
        job_file = self.folder / "job.json"
        note = None
        if job_file.is_file():
            try:
                stored = json.loads(job_file.read_text())
            except (OSError, ValueError):
                stored = None
            mine = _jsonable(key)
            same = isinstance(stored, dict) and _same_job(
                stored, mine, ignore_seed=drawn_seed and not resume)
            if not same:
                what = key.describe_difference(stored) if isinstance(stored, dict) else "the job"
                raise JobMismatch(
                    f"{self.folder.parent} holds shards of a different {key.command} job ({what} "
                    f"differ); choose another --out or delete {self.folder}"
                )
            done = self.finished()
            if resume:
                return set(done), (f"resuming: {len(done)} finished shard(s) reused" if done
                                   else None)
            if done:
                note = (f"not resuming: {len(done)} finished shard(s) in {self.folder} are "
                        f"discarded and redone (pass --resume to continue them)")
            shutil.rmtree(self.folder)
        elif self.finished():
            raise JobMismatch(f"{self.folder} has shards but no job.json, so which job they "
                              f"belong to is unknown; choose another --out or delete it")
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(job_file, (json.dumps(_jsonable(key), indent=2) + "\n").encode())
        return set(), note

    def drop_damaged(self, done: set[int], warn,
                     check: Callable[[int, Any], None] | None = None) -> int:
        """Remove from `done` (and from disk) every shard that cannot be read back; each is
        named to `warn`. The number removed."""
        removed = 0
        for shard in sorted(done):
            path = self.path(shard) if self.path(shard).is_file() else self.json_path(shard)
            try:
                value = self.read(shard)
                if check is not None:
                    check(shard, value)
            except Exception as e:  # noqa: BLE001 - any damage means: redo it
                # torch's and json's own messages advise what does not apply here
                # (weights_only=False, a line and column); the kind of damage is enough.
                why = str(e) if isinstance(e, ShardDamaged) else f"{type(e).__name__}"
                warn(f"{path} is damaged ({why}), so its shard is redone")
                path.unlink(missing_ok=True)
                done.discard(shard)
                removed += 1
        return removed

    def read(self, shard: int) -> Any:
        """A finished shard's stored value: the state of a .pt (tensors only), or a .json."""
        if self.path(shard).is_file():
            return torch.load(self.path(shard), weights_only=True)
        value = json.loads(self.json_path(shard).read_text())
        if value is None:
            raise ShardDamaged("it holds no record")
        return value

    def save(self, shard: int, value) -> None:
        """A finished shard of tensors: `value.state()` (a dict of tensors) as its .pt."""
        # Serialised in memory, then written: torch.save on a full disk raises a RuntimeError
        # about its zip writer, where a write raises OSError saying the disk is full.
        data = io.BytesIO()
        torch.save(value.state(), data)
        _write_atomic(self.path(shard), data.getvalue())

    def load_state(self, shard: int) -> dict:
        """What save() stored: the state (tensors only)."""
        return torch.load(self.path(shard), weights_only=True)

    def json_path(self, shard: int) -> Path:
        return self.folder / f"shard-{shard:05d}.json"

    def save_json(self, shard: int, value: Any) -> None:
        _write_atomic(self.json_path(shard), (json.dumps(value) + "\n").encode())

    def load_json(self, shard: int) -> Any:
        return json.loads(self.json_path(shard).read_text())


def _write_atomic(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    _fsync_replace(part, path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, data)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, text.encode())


def _fsync_replace(part: Path, final: Path) -> None:
    # The data reaches the disk before the name does: after a power cut a shard's name never
    # points at a file that is only partly written.
    with open(part, "rb") as f:
        os.fsync(f.fileno())
    os.replace(part, final)
