"""Keep Python's full garbage collections short: freeze what start-up created.

A full (generation 2) collection walks every tracked object. With torch, torchvision, numba
and pyqtgraph loaded that is about 320,000 objects, and each full collection took 80-320 ms
here, holding the GIL: the longest event-loop stalls the benchmark saw (bench_ui's max
lateness), on whichever thread happened to trigger it. Nearly all of those objects live
as long as the app (modules, classes, the model). `gc.freeze()` moves everything alive now
into a permanent generation that collections skip, so they only walk what came later.

Frozen objects are never collected: garbage cycles that exist at the moment of a freeze
stay. That is why this freezes a bounded number of times: once after the first run of each
loaded model, and once more when the statistics kernel has finished building (its import
of numba creates many objects), not after every run.
"""

from __future__ import annotations

import gc


class StartupFreezer:
    def __init__(self) -> None:
        self._stages: set[tuple[int, bool]] = set()

    def after_run(self, model_generation: int) -> bool:
        """Call after a run finished; returns True when it froze."""
        from inspector.core import fused_stats  # no numba import: only reads a flag

        stage = (model_generation, fused_stats.ready())
        if stage in self._stages:
            return False
        self._stages.add(stage)
        gc.freeze()
        return True
