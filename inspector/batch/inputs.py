"""Images in: the inputs named (files, folders, videos' frames), their fixed shards, and a
DataLoader that decodes them.

`list_sources` turns what the command line names into `Source`s: the image files (folders
expanded, naturally sorted), then each video's frames 0, N, 2N, ... (`--every N`);
`VideoFrames` decodes those frames in order, each video once, front to back.

Each image is decoded with `core.inputs.images.load_image` (a frame by `VideoFrames`) and turned into
the model's input by the model's `Preprocess`, exactly as `analyse` does, inside DataLoader
worker processes. An image that cannot be read comes back as an error string instead of a
tensor, so one bad file costs one entry in `failed`, not the run.

Shards are fixed runs of the sorted list (shard i holds images i*S .. i*S+S-1), so the same
files and shard size always give the same shards: what makes a killed run resumable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from inspector.core.inputs.images import ImageLoadError, load_image
from inspector.core.inputs.preprocess import Preprocess


@dataclass(frozen=True)
class Source:
    """One input: an image file, or one frame (its index, from 0) of a video."""

    path: Path
    frame: int | None = None

    def __str__(self) -> str:  # how messages name it
        return str(self.path) if self.frame is None else f"{self.path} frame {self.frame}"

    def key(self) -> str:  # what a resumed run must agree on (shards.JobKey)
        where = os.path.abspath(self.path)
        return where if self.frame is None else f"{where}\tframe {self.frame}"


def as_source(item: Source | str | os.PathLike[str]) -> Source:
    """A Source as is; a path as the image file it names."""
    return item if isinstance(item, Source) else Source(Path(item))


def list_sources(inputs: Sequence[str], every: int = 1,
                 on_missing: Callable[[ImageLoadError], None] | None = None) -> list[Source]:
    """The image files named (folders expanded, as images.expand_paths does), then the frames
    0, every, 2 * every, ... of each video named, in the order given. A missing path, or a
    video that cannot be opened (PyAV missing among the reasons), goes to `on_missing`."""
    from inspector.core.inputs.images import expand_paths
    from inspector.core.inputs.video import is_video
    from inspector.core.inputs.video_reader import VideoLoadError, VideoReader

    if every < 1:
        raise ValueError(f"--every must be 1 or more, not {every}")
    report = on_missing or _raise
    videos = [Path(p) for p in inputs if is_video(p) and Path(p).is_file()]
    listed = {str(v) for v in videos}
    images = expand_paths([p for p in inputs if str(Path(p)) not in listed], on_missing=report)
    sources = [Source(p) for p in images]
    for video in dict.fromkeys(videos):
        try:
            with VideoReader(video) as reader:
                count = reader.frame_count
        except VideoLoadError as e:
            report(e)
            continue
        sources.extend(Source(video, i) for i in range(0, count, every))
    return sources


def _raise(err: ImageLoadError) -> None:
    raise err


class VideoFrames:
    """Frames of the videos of a source list, asked for in the list's order: each video is
    decoded once, front to back (frames depend on each other), and only the frames asked for
    become images; a frame asked for out of order is sought. Close it (or use `with`)."""

    def __init__(self, every: int = 1) -> None:
        self.every = every
        self._readers: dict[Path, object] = {}
        self._iters: dict[Path, Iterator] = {}

    def read(self, source: Source):
        """The PIL image of a video frame; core.inputs.video_reader.VideoLoadError when it cannot be had."""
        from inspector.core.inputs.video_reader import VideoLoadError, VideoReader

        reader = self._readers.get(source.path)
        if reader is None:
            reader = self._readers[source.path] = VideoReader(source.path)
        frames = self._iters.get(source.path)
        if frames is None:
            frames = self._iters[source.path] = reader.frames(self.every, start=source.frame)
        for got in frames:
            if got.index == source.frame:
                return got.image
            if got.index > source.frame:
                break
        # Out of order (a resumed run starts mid-video): seek, and go on from there.
        self._iters[source.path] = reader.frames(self.every, start=source.frame)
        for got in self._iters[source.path]:
            if got.index == source.frame:
                return got.image
            break
        raise VideoLoadError(source.path, f"frame {source.frame} could not be decoded")

    def close(self) -> None:
        self._iters.clear()
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

    def __enter__(self) -> VideoFrames:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_workers() -> int:
    return min(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class Item:
    """One decoded image: its place in the job's file list, the model input or the reason."""

    index: int
    x: torch.Tensor | None
    size: tuple[int, int] | None  # (width, height) of the original image
    error: str | None  # what is wrong with the file, in words (the path is said elsewhere)


def read_item(source: Source | Path, index: int, preprocess: Preprocess,
              stretch: bool = False, videos: VideoFrames | None = None) -> Item:
    """The Item of an image file or (with `videos`, which decodes it) a video's frame."""
    source = as_source(source)
    if source.frame is not None and videos is None:
        raise TypeError(f"{source}: a video's frame is read with a VideoFrames (videos=)")
    try:
        if source.frame is None:
            image = load_image(source.path, stretch=stretch)
        else:
            image = videos.read(source)
        x = preprocess(image)
    except ImageLoadError as e:
        return Item(index, None, None, e.reason)
    except Exception as e:  # an image Pillow reads but the preprocessing cannot use
        return Item(index, None, None, f"cannot preprocess ({type(e).__name__}: {e})")
    return Item(index, x, image.size, None)


class ImageFiles(Dataset):
    """`dataset[i]` is the Item of sources[i] (an image file or a video's frame); picklable,
    for DataLoader worker processes. Each process decodes frames with its own VideoFrames
    (`every`: the stride of the frames listed). A worker's batches come in index order, so
    it reads each video once, front to back; frames depend on each other, so every worker
    that gets frames of a video decodes it through, in parallel with the others."""

    def __init__(self, sources: Sequence[Source | Path], preprocess: Preprocess,
                 stretch: bool = False, every: int = 1):
        self.sources = [as_source(s) for s in sources]
        self.preprocess = preprocess
        self.stretch = stretch
        self.every = every
        self._videos: VideoFrames | None = None  # per process: open decoders do not pickle

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_videos": None}

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> Item:
        source = self.sources[index]
        if source.frame is not None and self._videos is None:
            self._videos = VideoFrames(self.every)
        return read_item(source, index, self.preprocess, self.stretch, self._videos)

    def close(self) -> None:
        """Close this process's video decoders (worker processes' go when they end)."""
        if self._videos is not None:
            self._videos.close()
            self._videos = None


@dataclass
class Batch:
    """The readable images of a batch stacked, and the others' errors."""

    indices: torch.Tensor  # (n,) int64, into the job's file list
    x: torch.Tensor | None  # (n, 3, H, W); None when no image of the batch was readable
    sizes: list[tuple[int, int]]
    failed: list[tuple[int, str]]  # (index, error)

    def pin_memory(self) -> Batch:  # called by the DataLoader's pinning thread
        if self.x is not None:
            self.x = self.x.pin_memory()
        return self

    def __len__(self) -> int:
        return len(self.indices) + len(self.failed)


def collate(items: list[Item]) -> Batch:
    ok = [it for it in items if it.error is None]
    return Batch(
        indices=torch.tensor([it.index for it in ok], dtype=torch.int64),
        x=torch.stack([it.x for it in ok]) if ok else None,
        sizes=[it.size for it in ok],
        failed=[(it.index, it.error) for it in items if it.error is not None],
    )


# -- shards ---------------------------------------------------------------------------------------


def shard_count(n_images: int, shard_size: int) -> int:
    return -(-n_images // shard_size)


def shard_range(shard: int, n_images: int, shard_size: int) -> range:
    return range(shard * shard_size, min(n_images, (shard + 1) * shard_size))


def shard_batches(shards: Sequence[int], n_images: int, shard_size: int,
                  batch_size: int) -> list[list[int]]:
    """Batches of indices, in order, that never cross a shard boundary: a shard's result then
    depends only on its own images, whichever shards run before it."""
    out = []
    for shard in shards:
        r = shard_range(shard, n_images, shard_size)
        out.extend(list(r[i : i + batch_size]) for i in range(0, len(r), batch_size))
    return out


def make_loader(dataset: Dataset, batches: list[list[int]], workers: int,
                pin_memory: bool = False) -> DataLoader:
    """Batches decoded by `workers` processes (0: in this process), in the order given."""
    return DataLoader(
        dataset,
        batch_sampler=batches,
        num_workers=workers,
        collate_fn=collate,
        pin_memory=pin_memory,
        # Two batches ahead per worker (the default) keeps the model fed without holding
        # more decoded images than that in memory.
        prefetch_factor=2 if workers > 0 else None,
    )
