"""What the next run captures, and which module is shown first: choices the window makes
from the module tree, the selection and the user's options. Pure functions, no Qt."""

from __future__ import annotations

import math

from inspector.core.records.kinds import GRADIENT_KINDS, OUTPUT
from inspector.core.stats.previews import PREVIEW_ELEMENTS, preview_shape

_GRADIENTS = frozenset(GRADIENT_KINDS)  # core keeps the kinds in a tuple, in hook order

# Previews (every channel, about 1 MiB a tensor at most: core.stats.previews) of every captured
# module when they fit in this: then selecting another module after a run shows it at once, without running again. Over
# it, only the selected module's previews are captured (a big model would copy hundreds of
# MB per run) and selecting another module re-runs the image.
PREVIEW_BUDGET_BYTES = 48 * 2**20


def live_modules(kinds: dict[str, frozenset[str]], selected: str | None) -> dict[str, frozenset]:
    """What a live run (a video playing) captures: the selected module's output, the one
    tensor the activation view shows, when its output hook is on; nothing else."""
    wanted = kinds.get(selected, frozenset()) & {OUTPUT} if selected is not None else set()
    return {selected: frozenset(wanted)} if wanted else {}


def preview_modules(tree, modules: dict, selected: str | None,
                    gradients: bool = True) -> frozenset[str]:
    """The selected module, or every captured module when their previews are small (counting
    the kinds the run captures: no gradients when it computes none)."""
    chosen = {selected} if selected is not None else set()
    if tree is None:
        return frozenset(chosen)
    total = 0
    for name, kinds in modules.items():
        shape = tree.modules[name].output_shape if name in tree.modules else None
        captured = kinds if gradients else frozenset(kinds) - _GRADIENTS
        total += preview_bytes(shape) * len(captured)
    if total <= PREVIEW_BUDGET_BYTES:
        chosen |= set(modules)
    return frozenset(chosen)


def preview_bytes(shape) -> int:
    """About what a preview of a tensor of this shape costs (see core.stats.previews)."""
    if not shape:
        return 0
    dims = tuple(shape[1:]) or (1,)
    if len(dims) > 3:  # core keeps the middle slice of the dimensions between
        dims = (dims[0], dims[-2], dims[-1])
    size = 4 * math.prod(preview_shape(dims))
    # Tokens and vectors: core averages them down too, to about as much as a mosaic.
    return size if len(dims) == 3 else min(size, 4 * PREVIEW_ELEMENTS)


def default_module(tree) -> str:
    """What to show first: the first layer with weights and a spatial output (the first
    convolution: its channels show what the network responds to), else the whole model."""
    spatial = [n for n in tree.with_spatial_output() if tree.modules[n].is_leaf]
    for name in spatial:
        if tree.modules[name].params_own:
            return name
    return spatial[0] if spatial else ""
