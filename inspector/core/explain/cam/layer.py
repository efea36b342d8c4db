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
        return task_cam_layer(tree, loaded.task)
    try:
        return default_target_layer(loaded.model, tree)
    except Exception:  # noqa: BLE001 - no spatial or token layer
        return None


def task_cam_layer(tree, task: str) -> str | None:
    """The layer a detection or segmentation CAM reads when none is named: one that every
    detection's score (every pixel's class) reaches.

    - An FPN (a backbone with a "body"): the body's last single-tensor spatial module, the
      deepest level's input, which every pyramid level reads through the top-down pathway.
      (A pyramid level itself reaches only the boxes pooled or predicted from it.)
    - SSD: the VGG features, which the first level (rescaled) and the extra layers read;
      SSDlite: the backbone itself, whose first output is the finest feature map, from
      which every coarser level is computed.
    - Segmentation: the backbone's last single-tensor spatial module ("out"'s source).

    Never the modules after the backbone: the RoI pooling and the box head have one row per
    proposal, not per image."""
    order = [n for n in (tree.order or list(tree.modules)) if n]

    def spatial(name: str) -> bool:
        s = tree[name].output_shape
        return bool(s) and len(s) == 4 and s[0] == 1 and s[2] * s[3] > 1

    def last_under(prefix: str) -> str | None:
        found = [n for n in order if n.startswith(prefix)
                 and TUPLE_OUTPUT not in tree[n].hazards and spatial(n)]
        return found[-1] if found else None

    if task == tasks.DETECTION:
        if "backbone.body" in tree:
            return last_under("backbone.body.")
        for name in ("backbone.features", "backbone"):
            if name in tree and TUPLE_OUTPUT not in tree[name].hazards and spatial(name):
                return name  # SSD's VGG: its features feed the first level and the extras
        if "backbone" in tree and spatial("backbone"):
            return "backbone"
    return last_under("backbone.")
