"""Perturbed inputs through the model: in batches, without autograd, with progress.

Every metric of one image runs its perturbed copies of the input through one Forwarder, at
most `batch_size` at a time and at most MAX_BATCH_BYTES of inputs per forward (as
occlusion's), under torch.inference_mode. `progress(done, total)` counts forwarded inputs
and the other steps a metric reports (ROAD's solves); it is called after each batch, and
may raise (a cancelled run's RunCancelled) to stop between two batches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from inspector.core.explain.metrics.scores import Scorer
from inspector.core.explain.occlusion import MAX_BATCH_BYTES

Progress = Callable[[int, int], None]


class Forwarder:
    """Scores batches of perturbed inputs of one image, and counts the work done."""

    def __init__(self, scorer: Scorer, x: torch.Tensor, batch_size: int = 32,
                 progress: Progress | None = None, total: int = 0) -> None:
        self.scorer = scorer
        image_bytes = x[0].numel() * x.element_size()
        self.per_batch = max(1, min(int(batch_size), MAX_BATCH_BYTES // max(1, image_bytes)))
        self.progress = progress
        self.total = total
        self.done = 0
        self.forwards = 0  # inputs forwarded (benchmarks and tests count them)

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
        if self.progress is not None:
            self.progress(min(self.done, self.total), max(self.total, self.done))
