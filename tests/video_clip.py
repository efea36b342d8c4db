"""A short video for the tests, written with PyAV: shapes that move, so frames differ; and
the next frame a ReadAhead decodes, waited for as the player waits for it."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

FPS = 10
SECONDS = 3
FRAMES = FPS * SECONDS


def codec() -> str:
    """libx264 (B-frames: decoding order differs from presentation order) when the installed
    PyAV wheel has it, else mpeg4, which every wheel has."""
    import av

    try:
        av.codec.Codec("libx264", "w")
        return "libx264"
    except Exception:  # noqa: BLE001 - UnknownCodecError, or a wheel without the encoder
        return "mpeg4"


def frame_pixels(i: int, size: int) -> np.ndarray:
    """Frame i: a square sliding right and a bar sliding down, on a grey that darkens
    (and starts over every 50 frames)."""
    a = np.full((size, size, 3), 120 - (2 * i) % 100, np.uint8)
    x = (4 * i) % (size - size // 4)
    a[size // 8: size // 8 + size // 4, x: x + size // 4] = (250, 200, 30)
    y = (3 * i) % (size - size // 8)
    a[y: y + size // 8, size // 2:] = (30, 60, 230)
    return a


def write_clip(path: Path, size: int = 64, frames: int = FRAMES, fps: int = FPS,
               codec_name: str | None = None) -> Path:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec_name or codec(), rate=fps)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_pixels(i, size), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def next_frame(ahead, timeout: float = 10.0):
    """The next frame `ahead` (a core.inputs.video.ReadAhead) decodes, polling take() as the
    video player does; None once the video ended or failed (read `ahead.error`)."""
    deadline = time.monotonic() + timeout
    while True:
        done = ahead.ended or ahead.error is not None  # read first: set after the last frame
        frame = ahead.take()
        if frame is not None or done:
            return frame
        if time.monotonic() > deadline:
            raise TimeoutError(f"no frame decoded in {timeout} s")
        time.sleep(0.0002)
