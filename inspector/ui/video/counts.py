"""A video's or the camera's frame counts: one record that the player updates and the status
bar reads, so that every figure shown about a stream comes from the same count.

Each frame shown counts once as shown. Then it is run (once, however often it is run again
in full), or dropped (replaced by the next frame before the busy model was free to run it),
or neither: the frame shown while it waits for the model, and every frame while no model is
loaded. So `shown == run + dropped + not run`, and nothing else is counted.

The rate is frames shown per second while playing, measured over the last RATE_WINDOW_S
(or the last MIN_RATE_FRAMES frames, when they took longer) and only once MIN_RATE_FRAMES
frames were shown since playing started: a step or a seek while paused, or the first
frames after Play, give no rate rather than one made of a single interval.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RATE_WINDOW_S = 2.0
MIN_RATE_FRAMES = 5
TOOLTIP = (
    "A video or the camera, counted since it was opened:\n"
    f"fps: frames shown per second while playing, over the last {RATE_WINDOW_S:g} s (at least "
    f"{MIN_RATE_FRAMES} frames; none while paused)\n"
    "shown: frames shown under the image (steps and seeks too)\n"
    "run: frames run through the model\n"
    "dropped: frames replaced by the next one while a run was busy (never queued)\n"
    "shown = run + dropped + the frames not run (the one waiting, or all without a model)")


@dataclass
class StreamCounts:
    shown: int = 0
    run: int = 0
    dropped: int = 0
    _times: deque = field(default_factory=deque, repr=False)  # when frames were shown, playing

    def reset(self) -> None:
        """A new video or camera: everything from 0."""
        self.shown = self.run = self.dropped = 0
        self._times.clear()

    def frame_shown(self, now: float, playing: bool) -> None:
        self.shown += 1
        if not playing:
            self._times.clear()  # a step or seek while paused: not a playing rate
            return
        times = self._times
        times.append(now)
        while len(times) > MIN_RATE_FRAMES and now - times[0] > RATE_WINDOW_S:
            times.popleft()

    def playing_changed(self) -> None:
        """Paused or playing again: the rate is measured afresh."""
        self._times.clear()

    def rate(self) -> float | None:
        """Frames shown per second while playing; None until measured over enough frames."""
        times = self._times
        if len(times) < MIN_RATE_FRAMES or times[-1] <= times[0]:
            return None
        return (len(times) - 1) / (times[-1] - times[0])

    def text(self, source: str = "video") -> str:
        rate = self.rate()
        head = f"{source} {rate:.1f} fps" if rate is not None else source
        return f"{head} · {self.shown:,} shown · {self.run:,} run · {self.dropped:,} dropped"
