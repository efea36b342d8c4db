"""The faithfulness scores of the image the window shows: the latest MetricsFrame per
(method, layer), kept while the runs shown are of the same image, class and edits.

Scoring every method is one run; choosing another method to look at is another run, of the
same image: its scores must stay. So the cache is not the run store's (which keeps a few
runs' frames each): it follows the run shown (`follow`) and lets every score go when that
run's image (its RunStarted's display), its class (the predictions' target, else the top
class), its edits or the scores' protocol change, or a new model loads (`clear`). A map's
caption shows a score only for the very map it was computed on (`for_map`).

No Qt: plain Python over the store (core.run.store.RunStore).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from inspector.core.records.frames import CamFrame, MetricsFrame


@dataclass(frozen=True)
class Context:
    """What a score depends on, besides its map."""

    display: np.ndarray | None
    target: Any
    edits: tuple[str, ...]

    def same(self, other: Context | None) -> bool:
        if other is None or self.target != other.target or self.edits != other.edits:
            return False
        a, b = self.display, other.display
        return a is b or (a is not None and b is not None and a.shape == b.shape
                          and np.array_equal(a, b))


def context_of(store, run_id: int | None) -> Context | None:
    """The Context of a run in the store; None until its start and predictions are in."""
    started = store.started(run_id)
    predictions = store.get(("predictions",), run_id)
    if started is None or predictions is None:
        return None
    target = predictions.target
    if target is None and predictions.top:
        target = predictions.top[0].index
    return Context(started.display, target, tuple(started.edits))


class MetricsCache:
    def __init__(self) -> None:
        self.context: Context | None = None
        self.frames: dict[tuple[str, str], MetricsFrame] = {}

    @property
    def protocol(self) -> str | None:
        """The protocol every cached score was computed with (they share one)."""
        return next(iter(self.frames.values())).protocol if self.frames else None

    def clear(self) -> bool:
        """Forget every score; whether there was any."""
        had = bool(self.frames)
        self.frames.clear()
        self.context = None
        return had

    def follow(self, store, run_id: int | None) -> bool:
        """The window shows `run_id`: keep the scores if it is of the same image, class
        and edits as theirs, else forget them. Whether scores were forgotten."""
        context = context_of(store, run_id)
        if context is None:
            return False
        if self.context is not None and not context.same(self.context):
            had = self.clear()
            self.context = context
            return had
        self.context = context
        return False

    def add(self, frame: MetricsFrame, store) -> None:
        """A map's scores, from a run of the store (the scores of another image, class,
        edits or protocol than those kept replace them all)."""
        context = context_of(store, frame.run_id)
        if context is not None and not context.same(self.context):
            self.clear()
            self.context = context
        if self.protocol is not None and frame.protocol != self.protocol:
            self.frames.clear()
        self.frames[(frame.method, frame.layer)] = frame

    def get(self, method: str, layer: str | None) -> MetricsFrame | None:
        found = self.frames.get((method, layer))
        if found is None and layer is None:  # the layer not known yet: the method's only
            found = next((f for (m, _), f in self.frames.items() if m == method), None)
        return found

    def for_map(self, cam: CamFrame) -> MetricsFrame | None:
        """The scores computed on exactly this map (same method, layer, class and values)."""
        found = self.frames.get((cam.method, cam.layer))
        if found is None or found.target != cam.target or found.cam is None:
            return None
        if found.cam is not cam.cam and not (found.cam.shape == cam.cam.shape
                                             and np.array_equal(found.cam, cam.cam)):
            return None
        return found
