"""Keep Python's full garbage collections short: freeze what start-up created.

A full (generation 2) collection walks every tracked object. With torch, torchvision and
pyqtgraph loaded that is hundreds of thousands of objects, and each full collection took
80-320 ms here, holding the GIL: the longest event-loop stalls the UI benchmark saw, on
whichever thread happened to trigger it. Nearly all of those objects live as long as the
app (modules, classes). `gc.freeze()` moves everything alive now into a permanent
generation that collections skip, so they only walk what came later.

Frozen objects are not scanned for cycles, so a cycle that exists at the moment of a freeze
is never collected (reference counting still frees everything else). That is why this
freezes a bounded number of times, once after the first run of each loaded model, and why
it unfreezes first: what an earlier freeze held (a replaced model, if anything of it sits in
a cycle) goes back to the collector before the next freeze.
"""

from __future__ import annotations

import gc


class StartupFreezer:
    def __init__(self) -> None:
        self._generation: int | None = None

    def after_run(self, model_generation: int) -> bool:
        """Call after a run finished; returns True when it froze."""
        if model_generation == self._generation:
            return False
        replacing = self._generation is not None
        self._generation = model_generation
        if replacing:  # give back what the last freeze held (a replaced model in a cycle)
            gc.unfreeze()
            gc.collect()
        gc.freeze()
        return True
