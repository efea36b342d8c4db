"""What the next run captures, and which module is shown first: choices the window makes
from the module tree, the selection and the user's options. Pure functions, no Qt."""

from __future__ import annotations

from inspector.core.frames import GRADIENT_KINDS

_GRADIENTS = frozenset(GRADIENT_KINDS)  # core keeps the kinds in a tuple, in hook order

# Previews (64 channels of 64 x 64 at most) of every captured module when they fit in this:
# then selecting another module after a run shows it at once, without running again. Over
# it, only the selected module's previews are captured (a big model would copy hundreds of
# MB per run) and selecting another module re-runs the image.
PREVIEW_BUDGET_BYTES = 48 * 2**20


def capture_modules(kinds: dict[str, frozenset[str]], backward: bool) -> dict[str, frozenset]:
    """The tree's hook kinds per module, without gradients when no backward pass is wanted."""
    if backward:
        return dict(kinds)
    forward_only = {n: frozenset(k) - _GRADIENTS for n, k in kinds.items()}
    return {n: k for n, k in forward_only.items() if k}


def preview_modules(tree, modules: dict, selected: str | None) -> frozenset[str]:
    """The selected module, or every captured module when their previews are small."""
    chosen = {selected} if selected is not None else set()
    if tree is None:
        return frozenset(chosen)
    total = 0
    for name, kinds in modules.items():
        shape = tree.modules[name].output_shape if name in tree.modules else None
        total += preview_bytes(shape) * len(kinds)
    if total <= PREVIEW_BUDGET_BYTES:
        chosen |= set(modules)
    return frozenset(chosen)


def preview_bytes(shape) -> int:
    """About what a preview of a tensor of this shape costs."""
    if not shape:
        return 0
    dims = list(shape[1:]) or [1]
    if len(dims) >= 3:
        dims = [min(dims[0], 64), min(dims[1], 64), min(dims[2], 64)]
    size = 4
    for d in dims:
        size *= d
    return min(size, 64 * 64 * 64 * 4)


def default_module(tree) -> str:
    """What to show first: the first layer with weights and a spatial output (the first
    convolution: its channels show what the network responds to), else the whole model."""
    spatial = [n for n in tree.with_spatial_output() if tree.modules[n].is_leaf]
    for name in spatial:
        if tree.modules[name].params_own:
            return name
    return spatial[0] if spatial else ""
