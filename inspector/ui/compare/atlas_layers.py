"""Which layer of an atlas gives a CKA row its crops. The CKA rows are leaf modules
(`stage3.1.relu`) while an atlas is often of a stage (`stage3`): a leaf takes the stage's
crops only when its output is the stage's output, the same tensor channel for channel,
which is known for sure only through nn.Sequential (its output is its last child's). A
leaf elsewhere inside the stage has other channels, and gets a sentence, not crops."""

from __future__ import annotations

from torch import nn


def output_leaf(model: nn.Module, name: str) -> str | None:
    """The leaf module whose output is module `name`'s output, or None when that is not
    known from the structure (a module with a forward of its own)."""
    modules = dict(model.named_modules())
    module = modules.get(name)
    while module is not None:
        children = list(module.named_children())
        if not children:
            return name
        if not isinstance(module, nn.Sequential):
            return None
        child, module = children[-1]
        name = f"{name}.{child}" if name else child
    return None


def atlas_layer_for(model: nn.Module, layer: str, atlas_layers) -> tuple[str | None, str]:
    """The atlas layer whose crops are `layer`'s (itself, or the module around it whose
    output it is), and, when there is none, why (one clause)."""
    atlas_layers = list(atlas_layers)
    if layer in atlas_layers:
        return layer, ""
    around = [a for a in atlas_layers if layer.startswith(f"{a}.")]
    for outer in sorted(around, key=len):
        if output_leaf(model, outer) == layer:
            return outer, ""
    if around:
        outer = around[0]
        return None, (f"its atlas has {outer}, and {layer} is inside it but is not its output "
                      f"(its channels are not {outer}'s); an atlas of {layer} would have them")
    shown = ", ".join(atlas_layers[:4]) + (", \u2026" if len(atlas_layers) > 4 else "")
    return None, f"its atlas has no layer {layer} nor one around it (it has {shown})"
