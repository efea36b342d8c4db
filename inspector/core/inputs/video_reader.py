"""Video files decoded with PyAV: every frame counted, and sought exactly.

PyAV is an optional extra (`pip install 'network-inspector[video]'`); without it every entry
point raises a `VideoLoadError` that says which command installs it, so the window and the
CLI report one line instead of a traceback. It is imported only when a video is opened.

Frame `i` is the i-th frame in presentation order, counting from 0. `VideoReader` lists the
presentation times of every frame once, from the container's packets (demuxing, no decoding:
fast), so the frame count is exact and a seek lands on the frame asked for, also in files
whose frame rate varies or whose header has no frame count (Matroska, WebM). Each frame comes
out as an upright 8-bit RGB PIL image, what `Session.run` and `images.load_image` give too.
No torch and no Qt here.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from inspector.core.inputs.images import ImageLoadError

INSTALL_HINT = "pip install 'network-inspector[video]'"
MISSING_PYAV = f"video files need PyAV, which is not installed: {INSTALL_HINT}"
FALLBACK_FPS = 25.0  # a stream that states no rate at all (rare): shown at a usual rate


class VideoLoadError(ImageLoadError):
    """A video that cannot be read (or PyAV missing); `str()` is "<path>: <reason>", as for
    images, so the callers that report unreadable images report videos the same way."""


def _import_av():
    import av  # noqa: PLC0415 - optional: only when a video is opened

    return av


def require_av(path) -> Any:
    """The av module; VideoLoadError naming `path` and the install line without it."""
    try:
        return _import_av()
    except ImportError as e:
        raise VideoLoadError(path, MISSING_PYAV) from e


@dataclass(frozen=True)
class VideoInfo:
    path: Path
    frame_count: int
    fps: float
    size: tuple[int, int]  # width, height


@dataclass(frozen=True)
class VideoFrame:
    index: int
    image: Image.Image  # RGB
    # A smaller copy to show (core.inputs.video.ReadAhead's display_max), made on the
    # decoding thread; None: show `image`.
    display: Image.Image | None = None
    # What ReadAhead's `prepare` made of `image` on the decoding thread (the model input:
    # core.inputs.preprocess.PreparedImage); None without one.
    prepared: Any = None


class VideoReader:
    """One video file, decoded frame by frame. Not thread-safe: one thread uses it at a time
    (ReadAhead's thread, or the CLI's loop). Close it (or use `with`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        av = require_av(self.path)
        self._av_error = av.error.FFmpegError
        if not self.path.is_file():
            raise VideoLoadError(self.path, "no such file")
        pts = self._presentation_times(av)
        try:
            self._container = av.open(str(self.path))
        except (self._av_error, OSError) as e:  # pragma: no cover - the index read it
            raise VideoLoadError(self.path, ffmpeg_reason(e)) from e
        self._stream = self._container.streams.video[0]
        self._stream.thread_type = "AUTO"  # the codec's own frame threads: decoding keeps up
        rate = self._stream.average_rate or self._stream.guessed_rate
        self._pts = pts  # sorted; None when the packets carry no times (then: counting)
        ctx = self._stream.codec_context
        self.info = VideoInfo(self.path, len(pts) if pts is not None else self._stream.frames,
                              float(rate) if rate else FALLBACK_FPS, (ctx.width, ctx.height))
        self._decoded: Iterator | None = None
        self._next = 0  # the index of the frame next_frame gives next
        self._pending: tuple[int, Any] | None = None  # decoded by a seek, not yet given
        # A jump forward of more than this is a seek; a shorter one decodes its way there.
        self._gop_guess = max(int(self.info.fps), 12)
        if self.info.frame_count <= 0:
            self.close()
            raise VideoLoadError(self.path, "the video stream has no frames")

    def _presentation_times(self, av) -> list[int] | None:
        """Every frame's presentation time, sorted, from the packets (no decoding)."""
        try:
            with av.open(str(self.path)) as container:
                if not container.streams.video:
                    raise VideoLoadError(self.path, "no video stream in this file")
                stream = container.streams.video[0]
                times = []
                for packet in container.demux(stream):
                    if packet.size == 0:
                        continue  # the flush packet at the end
                    t = packet.pts if packet.pts is not None else packet.dts
                    times.append(t)
        except (self._av_error, OSError, UnicodeDecodeError) as e:
            raise VideoLoadError(self.path, ffmpeg_reason(e)) from e
        if not times:
            raise VideoLoadError(self.path, "the video stream has no frames")
        if any(t is None for t in times) or len(set(times)) != len(times):
            return None  # no usable times: frames are counted as they are decoded
        return sorted(times)

    # -- reading ---------------------------------------------------------------------------------
    @property
    def frame_count(self) -> int:
        return self.info.frame_count

    def next_frame(self) -> VideoFrame | None:
        """The next frame in order, or None after the last."""
        got = self._advance()
        if got is None:
            return None
        index, raw = got
        return VideoFrame(index, raw.to_image())

    def _advance(self):
        """(index, av.VideoFrame) of the next frame, or None after the last; not yet
        converted to an image (the CLI's --every converts only the frames it keeps)."""
        if self._pending is not None:
            (index, raw), self._pending = self._pending, None
            self._next = index + 1
            return index, raw
        if self._decoded is None:
            self._decoded = self._container.decode(self._stream)
        raw = self._decode(self._next)
        if raw is None:
            return None
        index = self._index_of(raw.pts)
        self._next = index + 1
        return index, raw

    def _decode(self, index: int):
        """The decoder's next av.VideoFrame, or None at the end."""
        try:
            return next(self._decoded)
        except StopIteration:
            return None
        except (self._av_error, OSError) as e:
            raise VideoLoadError(self.path, f"frame {index}: {ffmpeg_reason(e)}") from e

    def seek(self, index: int) -> None:
        """Make frame `index` (clamped to the video) the next that next_frame gives: from the
        key frame at or before it, decoding and dropping the frames in between."""
        index = max(0, min(index, self.frame_count - 1))
        if self._pending is not None:
            if self._pending[0] == index:
                return
            self._next, self._pending = self._pending[0], None
        if index == self._next and self._decoded is not None:
            return
        if self._pts is None or index < self._next or self._decoded is None \
                or index - self._next > self._gop_guess:
            self._restart(index)
        self._skip_to(index)

    def _restart(self, index: int) -> None:
        if self._pts is None or index == 0:
            self._container.seek(0)
            self._next = 0
        else:
            # To the key frame at or before the frame's time (offset in the stream's units).
            self._container.seek(self._pts[index], stream=self._stream, backward=True)
            self._next = -1  # known once a frame is decoded
        self._decoded = self._container.decode(self._stream)

    def _skip_to(self, index: int) -> None:
        """Decode until frame `index`, which becomes the pending next frame."""
        restarted = False
        while True:
            frame = self._decode(index)
            if frame is None:
                self._next = self.frame_count
                return
            got = self._index_of(frame.pts)
            if got > index and self._next == -1 and not restarted:
                # The demuxer landed after the frame (a file without a key-frame index):
                # decode from the start instead.
                self._container.seek(0)
                self._decoded = self._container.decode(self._stream)
                self._next, restarted = 0, True
                continue
            self._next = got + 1
            if got >= index:
                self._pending = (got, frame)
                return

    def _index_of(self, pts: int | None) -> int:
        if self._pts is None or pts is None:
            return max(self._next, 0)
        return bisect.bisect_left(self._pts, pts)

    def read(self, index: int) -> Image.Image:
        """Frame `index` as an RGB image (seeks when it is not the next one)."""
        self.seek(index)
        frame = self.next_frame()
        if frame is None:
            raise VideoLoadError(self.path, f"no frame {index} (the video has "
                                            f"{self.frame_count})")
        return frame.image

    def frames(self, every: int = 1, start: int = 0) -> Iterator[VideoFrame]:
        """Frames start, start + every, ... in order (every frame is decoded: they depend on
        each other; only those kept are converted to images)."""
        if every < 1:
            raise ValueError("every must be at least 1")
        self.seek(start)
        while (got := self._advance()) is not None:
            index, raw = got
            if (index - start) % every == 0:
                yield VideoFrame(index, raw.to_image())

    def close(self) -> None:
        container = getattr(self, "_container", None)
        if container is not None:
            self._decoded = None
            container.close()
            self._container = None

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def ffmpeg_reason(e: BaseException) -> str:
    """What went wrong, in one line, of a PyAV (FFmpeg) error."""
    # FFmpeg's errors (OSErrors in PyAV) read "[Errno N] What went wrong: 'path'": the caller
    # names the file already, so only what went wrong is kept.
    text = getattr(e, "strerror", None) or str(e).strip() or type(e).__name__
    return text.splitlines()[0]
