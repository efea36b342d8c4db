"""Videos in the window: which files are videos, a video's first frame for its listing, and
ReadAhead, which decodes a few frames ahead of what a player shows, on its own thread, so
that a window showing a video at its frame rate never waits for the decoder (nor for the
model). The frames are decoded by core.inputs.video_reader's VideoReader. No torch and no Qt
here.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from inspector.core.inputs.video_reader import (
    FALLBACK_FPS,
    VideoFrame,
    VideoInfo,
    VideoLoadError,
    VideoReader,
    ffmpeg_reason,
    require_av,
)

VIDEO_EXTENSIONS = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm"})
READ_AHEAD = 4  # frames decoded ahead of the one shown: a seek throws at most these away


def is_video(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS


def first_frame(path: str | os.PathLike[str]) -> tuple[Image.Image, VideoInfo]:
    """The first frame and what the video is, quickly (the window lists a video with these
    on its UI thread): the container's header only, no index of the frames, so the frame
    count is the header's, or its duration x frame rate (VideoReader counts exactly)."""
    path = Path(path)
    av = require_av(path)
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoLoadError(path, "no video stream in this file")
            stream = container.streams.video[0]
            image = None
            for frame in container.decode(stream):
                image = frame.to_image()
                break
            if image is None:
                raise VideoLoadError(path, "the video stream has no frames")
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else FALLBACK_FPS
            count = stream.frames
            if count <= 0:
                seconds = (float(stream.duration * stream.time_base) if stream.duration
                           else (container.duration or 0) / 1e6)
                count = max(1, round(seconds * fps))
            return image, VideoInfo(path, count, fps, image.size)
    except (av.error.FFmpegError, OSError, UnicodeDecodeError) as e:
        raise VideoLoadError(path, ffmpeg_reason(e)) from e


class ReadAhead:
    """Decodes a video on its own thread, up to `ahead` frames before the one taken.

    `take()` never blocks: it returns the next decoded frame, or None while the decoder is
    behind (a player then shows the frame it has a little longer). `seek(i)` throws away what
    was decoded ahead; the frames taken after it start at frame i. Opening the file (listing
    its frames) happens on the thread too: `info` is set, or `error`, once it is done.
    Always `close()` it: that stops and joins the thread."""

    def __init__(self, path: str | os.PathLike[str], ahead: int = READ_AHEAD,
                 start: int = 0, display_max: int | None = None) -> None:
        self.path = Path(path)
        self.ahead = max(1, ahead)
        # Frames larger than this get a `display` copy at most this large, scaled here rather
        # than on the UI thread (a 1080p frame's scaling is several milliseconds there).
        self.display_max = display_max
        # Called on each frame's image on the decoding thread, its result the frame's
        # `prepared` (the player: the loaded model's Preprocess.prepare, so that the model
        # input is made here, off the inference worker). Set it at any time; None: nothing.
        self.prepare: Callable[[Image.Image], Any] | None = None
        self.info: VideoInfo | None = None
        self.error: VideoLoadError | None = None
        self.ended = False  # the last frame was decoded (no seek since)
        self._cond = threading.Condition()
        self._frames: deque[VideoFrame] = deque()
        self._seek_to: int | None = start
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="video-decode", daemon=True)
        self._thread.start()

    # -- the consumer's side ---------------------------------------------------------------------
    def take(self) -> VideoFrame | None:
        with self._cond:
            if not self._frames:
                return None
            frame = self._frames.popleft()
            self._cond.notify_all()  # room to decode another
            return frame

    def seek(self, index: int) -> None:
        with self._cond:
            self._frames.clear()
            self._seek_to = index
            self.ended = False
            self._cond.notify_all()

    def close(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._frames.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the decoding thread ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            reader = VideoReader(self.path)
        except VideoLoadError as e:
            self._fail(e)
            return
        except Exception as e:  # noqa: BLE001 - any decoder failure is the file's problem
            self._fail(VideoLoadError(self.path, f"{type(e).__name__}: {e}"))
            return
        with reader:
            with self._cond:
                self.info = reader.info
                self._cond.notify_all()
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._stop or self._seek_to is not None or (
                        len(self._frames) < self.ahead and not self.ended))
                    if self._stop:
                        return
                    target, self._seek_to = self._seek_to, None
                try:  # outside the lock: the consumer takes and seeks meanwhile
                    if target is not None:
                        reader.seek(target)
                    frame = reader.next_frame()
                    if frame is not None and self.display_max is not None \
                            and max(frame.image.size) > self.display_max:
                        display = frame.image.copy()
                        display.thumbnail((self.display_max, self.display_max))
                        frame = VideoFrame(frame.index, frame.image, display)
                    if frame is not None:
                        frame = self._prepared(frame)
                except Exception as e:  # noqa: BLE001 - a broken frame ends the video
                    self._fail(e if isinstance(e, VideoLoadError)
                               else VideoLoadError(self.path, f"{type(e).__name__}: {e}"))
                    return
                with self._cond:
                    if self._seek_to is not None or self._stop:
                        continue  # a seek came while decoding: this frame is not wanted
                    if frame is None:
                        self.ended = True
                    else:
                        self._frames.append(frame)
                    self._cond.notify_all()

    def _prepared(self, frame: VideoFrame) -> VideoFrame:
        prepare = self.prepare
        if prepare is None:
            return frame
        try:
            prepared = prepare(frame.image)
        except Exception:  # noqa: BLE001 - the run makes it again, and reports what fails
            return frame
        return VideoFrame(frame.index, frame.image, frame.display, prepared)

    def _fail(self, error: VideoLoadError) -> None:
        with self._cond:
            self.error = error
            self.ended = True
            self._cond.notify_all()
