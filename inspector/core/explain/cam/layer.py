"""The layer a CAM reads when the user names none (see default_target_layer)."""

from __future__ import annotations

from torch import nn

from inspector.core import tasks
from inspector.core.models.tree import TUPLE_OUTPUT
from inspector.core.tokens import NCHW, NHWC, TOKENS, Layout, detect_layout


def _input_hw(tree) -> tuple[int, int] | None:
    root = tree.modules.get("")
    if root is not None and root.calls and root.calls[0].inputs:
        shape = root.calls[0].inputs[0][1]
        if len(shape) == 4:
            return int(shape[-2]), int(shape[-1])
    return None


def cam_layers(tree) -> list[str]:
    """Every module a CAM can read, in forward order: those whose output is a spatial map
    (B, C, h, w), a channels-last map (B, h, w, C) or a token grid (B, N, D) of two or more
    cells (core.tokens reads them; default_target_layer picks among them)."""
    input_hw = _input_hw(tree)
    names = tree.order or list(tree.modules)
    return [n for n in names if n and _grid_cells(tree.modules[n].output_shape, input_hw) >= 2]


def _grid_cells(shape, input_hw) -> int:
    found = detect_layout(shape, input_hw) if shape else None
    return found.grid[0] * found.grid[1] if found is not None else 0


def default_target_layer(model: nn.Module, tree) -> str:
    """The layer a CAM reads when the user names none.

    Transformers (ViT, Swin): the first norm of the last block, the last place where every
    patch token still reaches the class score (after ViT's last block only the class token
    is read, so patch-token gradients there are zero). A block is a module with two or more
    LayerNorms over token or channels-last outputs. CNNs: the last module with a spatial
    (B, C, h, w) output of more than one cell (resnet's layer4, not its 1 x 1 avgpool),
    one that returns a plain tensor where there is one.
    """
    input_hw = _input_hw(tree)
    modules = dict(model.named_modules())
    order = [n for n in (tree.order or list(tree.modules)) if n]

    def layout(name: str) -> Layout | None:
        shape = tree.modules[name].output_shape
        if not shape:
            return None
        found = detect_layout(shape, input_hw)
        return found if found is not None and found.grid[0] * found.grid[1] >= 2 else None

    blocks: dict[str, list[str]] = {}
    for name in order:
        mod = modules.get(name)
        is_norm = isinstance(mod, nn.LayerNorm) or "LayerNorm" in tree.modules[name].type_name
        found = layout(name) if is_norm else None
        if found is not None and found.kind in (TOKENS, NHWC):
            blocks.setdefault(tree.modules[name].parent or "", []).append(name)
    blocks = {parent: norms for parent, norms in blocks.items() if len(norms) >= 2}
    if blocks:
        last = max(blocks.values(), key=lambda norms: order.index(norms[-1]))
        return last[0]
    spatial = [n for n in order if layout(n) is not None]
    candidates = [n for n in spatial if layout(n).kind == NCHW] or spatial
    # A module that returns a plain tensor rather than a wrapper of several (Hugging Face's
    # backbone returns a ModelOutput after its last stage): the same map, a simpler layer.
    plain = [n for n in candidates if TUPLE_OUTPUT not in tree.modules[n].hazards]
    candidates = plain or candidates
    if candidates:
        return candidates[-1]
    raise ValueError(
        "no module of this model has a spatial output (B, C, h, w) or a token grid: "
        "name the CAM layer explicitly"
    )


def find_cam_layer(loaded, tree) -> str | None:
    """The CAM layer of a loaded model when none is named, found on the worker when the
    model loads (it walks the model); None when the model has no layer a CAM can use. A
    detection or segmentation model's is its backbone's (core.tasks)."""
    if loaded.task != tasks.CLASSIFICATION:
        return tasks.default_cam_layer(tree, loaded.task)
    try:
        return default_target_layer(loaded.model, tree)
    except Exception:  # noqa: BLE001 - no spatial or token layer
        return None
