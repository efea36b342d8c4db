"""Perturbed inputs through the model: in batches, without autograd, with progress.

Every metric of one image runs its perturbed copies of the input through one Forwarder, at
most `batch_size` at a time and at most MAX_BATCH_BYTES of inputs per forward (as
occlusion's), under torch.inference_mode. `progress(done, total)` counts forwarded inputs
and the other steps a metric reports (ROAD's solves); it is called after each batch, and
may raise (a cancelled run's RunCancelled, or StopScoring) to stop between two batches.

A unit of one kind of work costs little like another: a batched forward takes a fraction
of a ROAD solve, which takes a fraction of a map remade for the sanity check. So the work
is planned in phases (`phases`: the units of each, known up front) and the time left is
each phase's units left at that phase's own pace; a phase not begun yet goes at the
slowest pace seen so far, per unit (so the estimate errs long and falls, rather than
growing as slower work starts). `progress` gets, besides (done, total), what is being
done (`begin`'s detail: "scoring Grad-CAM (3 of 12)") and that estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch

from inspector.core.explain.metrics.scores import Scorer
from inspector.core.explain.occlusion import MAX_BATCH_BYTES

Progress = Callable[..., None]  # (done, total, detail="", left=None)


class StopScoring(Exception):  # noqa: N818 - a request, not an error
    """Raised by a progress callback to stop the scoring but not the run: the maps scored
    so far stay (score_maps.iter_scores; core.run.metrics_stage)."""


class Forwarder:
    """Scores batches of perturbed inputs of one image, and counts the work done."""

    def __init__(self, scorer: Scorer, x: torch.Tensor, batch_size: int = 32,
                 progress: Progress | None = None, total: int = 0,
                 phases: Mapping[str, int] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.scorer = scorer
        image_bytes = x[0].numel() * x.element_size()
        self.per_batch = max(1, min(int(batch_size), MAX_BATCH_BYTES // max(1, image_bytes)))
        self.progress = progress
        self.total = total
        self.done = 0
        self.forwards = 0  # inputs forwarded (benchmarks and tests count them)
        self.planned = dict(phases or {})  # phase -> its units
        self.spent: dict[str, list[float]] = {}  # phase -> [units done, seconds]
        self.phase: str | None = None
        self.detail = ""
        self.clock = clock
        self._mark = (clock(), 0)  # when the phase's last units were counted, and done then

    def begin(self, phase: str, detail: str = "") -> None:
        """The next units are of `phase` (one of `phases`), `detail` saying what is done."""
        self._count()
        self.phase, self.detail = phase, detail
        self.check()

    def _count(self) -> None:
        now = self.clock()
        at, done = self._mark
        if self.phase is not None:
            spent = self.spent.setdefault(self.phase, [0, 0.0])
            spent[0] += self.done - done
            spent[1] += now - at
        self._mark = (now, self.done)

    def seconds_left(self) -> float | None:
        """The estimate of the module docstring; None before any phase has a pace."""
        self._count()
        paces = {p: s / n for p, (n, s) in self.spent.items() if n > 0}
        if not paces:
            return None
        slowest = max(paces.values())
        left = 0.0
        for phase, units in self.planned.items():
            n = self.spent.get(phase, [0, 0.0])[0]
            left += max(0, units - n) * paces.get(phase, slowest)
        return left
    def score(self, batch: torch.Tensor) -> torch.Tensor:
        """The scores of a batch of at most `per_batch` inputs, (n,) float32 on the CPU."""
        with torch.inference_mode():
            scores = self.scorer(batch)
        self.forwards += len(batch)
        self.advance(len(batch))
        return scores

    def score_all(self, inputs: torch.Tensor) -> torch.Tensor:
        """The scores of any number of inputs, `per_batch` at a time."""
        parts = [self.score(inputs[s : s + self.per_batch])
                 for s in range(0, len(inputs), self.per_batch)]
        return torch.cat(parts) if parts else torch.empty(0)

    def advance(self, n: int) -> None:
        """`n` more units of work done (inputs forwarded, solves finished)."""
        self.done += n
        self.check()

    def check(self) -> None:
        """Tell the progress callback where the work stands (it may raise to stop)."""
        if self.progress is None:
            return
        if self.planned:
            self.progress(min(self.done, self.total), max(self.total, self.done), self.detail,
                          self.seconds_left())
        else:
            self.progress(min(self.done, self.total), max(self.total, self.done))
