"""A job's finished shards on disk: what `--resume` continues from.

DIR/shards/job.json describes the job (model, weights, layers, top, shard size, and a hash
of the file list) and DIR/shards/shard-NNNNN.pt holds one finished shard's `Reduction`.
Every file is written to a `.part` file first and moved into place with os.replace, so a
run killed at any moment leaves either a whole shard or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .reduce import Reduction

_SHARD = re.compile(r"shard-(\d+)\.pt")


class JobMismatch(ValueError):
    """The output folder holds shards of another job."""


@dataclass(frozen=True)
class JobKey:
    """What a finished shard's result depends on; a resumed run must agree on all of it."""

    model: str
    weights: str | None
    layers: tuple[str, ...]
    top: int
    shard_size: int
    files: str  # sha256 of the absolute paths, one a line, in the job's order
    images: int

    @classmethod
    def of(cls, model, weights, layers, top, shard_size, paths) -> JobKey:
        digest = hashlib.sha256()
        for p in paths:
            digest.update(os.path.abspath(p).encode("utf-8", "surrogateescape") + b"\n")
        return cls(str(model), None if weights is None else os.path.abspath(weights),
                   tuple(layers), int(top), int(shard_size), digest.hexdigest(), len(paths))

    def describe_difference(self, other: dict) -> str:
        mine = _jsonable(self)
        names = {"files": "the image files", "images": "the number of images"}
        differ = [names.get(k, k) for k in mine if mine[k] != other.get(k)]
        return ", ".join(dict.fromkeys(differ)) or "the job"


def _jsonable(key: JobKey) -> dict:
    d = asdict(key)
    d["layers"] = list(d["layers"])
    return d


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

    def prepare(self, key: JobKey, resume: bool) -> tuple[set[int], str | None]:
        """Finished shards to reuse, and a note for the user; JobMismatch if the folder holds
        another job's shards (never overwritten: they may be hours of someone's work)."""
        job_file = self.folder / "job.json"
        note = None
        if job_file.is_file():
            try:
                stored = json.loads(job_file.read_text())
            except (OSError, ValueError):
                stored = None
            if stored != _jsonable(key):
                what = key.describe_difference(stored) if isinstance(stored, dict) else "the job"
                raise JobMismatch(
                    f"{self.folder.parent} holds shards of a different atlas job ({what} "
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

    def save(self, shard: int, reduction: Reduction) -> None:
        part = self.path(shard).with_suffix(".pt.part")
        torch.save(reduction.state(), part)
        _fsync_replace(part, self.path(shard))

    def load(self, shard: int) -> Reduction:
        return Reduction.from_state(torch.load(self.path(shard), weights_only=True))


def _write_atomic(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    _fsync_replace(part, path)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, text.encode())


def _fsync_replace(part: Path, final: Path) -> None:
    # The data reaches the disk before the name does: after a power cut a shard's name never
    # points at a file that is only partly written.
    with open(part, "rb") as f:
        os.fsync(f.fileno())
    os.replace(part, final)
