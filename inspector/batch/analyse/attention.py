"""analyse's attention options, checked once the model is loaded (core.explain.attention):

- the attention maps asked for (--cam rollout,gradrollout,legrad) on a model they do not
  apply to (a CNN, Swin) are dropped with one note on stderr, and the run goes on;
- LeGrad's first block (--cam-layer, when given) must be in a transformer block: else one
  line and exit status 2;
- --layers may name attention modules: their attention (heads, tokens, tokens) of each image
  goes to the NPZ as attention/NAME, and they are not captured as layers;
- --logit-lens on a model without transformer blocks is dropped with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from inspector.core.explain.attention.options import LEGRAD_BLOCKS, AttentionOptions
from inspector.core.explain.catalog import ATTENTION_CAMS


@dataclass(frozen=True)
class AttentionChoice:
    """What the runs ask of attention once checked against the model."""

    methods: list[str]  # every CAM method kept, the layer CAMs and the attention maps
    options: AttentionOptions | None  # RunRequest.attention; None: nothing beyond maps
    legrad_from: str | None  # LeGrad's first block (the layer of its (method, layer))
    layers: list[str]  # --layers without the attention modules


def check_attention(methods: list[str], options: AttentionOptions, lens_topk: int,
                    cam_layer: str | None, layers: list[str], loaded, tree,
                    warn: Callable[[str], None]) -> AttentionChoice:
    """See the module docstring; ValueError, one line, for a LeGrad layer that cannot work."""
    from inspector.core.explain.attention.find import find_attention, legrad_blocks, refusal

    model = loaded.model
    found = find_attention(model)
    attention_names = set(found.attention) if found is not None else set()
    keep = [n for n in layers if n in attention_names]
    asked = [m for m in methods if m in ATTENTION_CAMS]
    why = refusal(model, tree, found) if asked else ""
    if why:
        warn(f"note: {', '.join(asked)}: {why} No attention map is written.")
        methods = [m for m in methods if m not in ATTENTION_CAMS]
    elif "legrad" in asked and loaded.task != "classification":
        warn(f"note: legrad: LeGrad reads a classifier's head, not a {loaded.task} model's. "
             f"No LeGrad map is written.")
        methods = [m for m in methods if m != "legrad"]
    legrad_from = cam_layer if "legrad" in methods else None
    if legrad_from is not None:
        legrad_blocks(found, legrad_from, LEGRAD_BLOCKS)  # ValueError: exit status 2
    if lens_topk and (found is None or loaded.task != "classification"):
        reason = ("the model has no transformer blocks" if found is None
                  else f"it reads a classifier's head, not a {loaded.task} model's")
        warn(f"note: --logit-lens: {reason}. No logit lens is written.")
        lens_topk = 0
    options = replace(options, lens=lens_topk, keep=frozenset(keep))
    return AttentionChoice(methods=methods, options=options,
                           legrad_from=legrad_from,
                           layers=[n for n in layers if n not in attention_names])


def attention_summary(methods: list[str], options: AttentionOptions | None,
                      legrad_from: str | None) -> dict | None:
    """summary.json's "attention": how the attention maps and the lens were made."""
    asked = [m for m in methods if m in ATTENTION_CAMS]
    if not asked and (options is None or not options.asks_beyond_maps):
        return None
    options = options or AttentionOptions()
    return {
        "methods": asked,
        "rollout": {"fusion": options.fusion, "discard": options.discard,
                    "discard_applies_to": "each block's head-fused attention, per image, "
                                          "sparing the class token's attention to itself "
                                          "(vit-explain's discard_ratio)"},
        "legrad_blocks": (f"from {legrad_from} to the last" if legrad_from
                          else f"the last {LEGRAD_BLOCKS}"),
        "grid": "grid/METHOD in each NPZ: the map on the patch grid (rows x columns), before "
                "upsampling and scaling",
        "attention_modules": sorted(options.keep),
        "logit_lens": ("per image, after each block in forward order: the top-"
                       f"{options.lens} of the softmax of the model's own final norm and head "
                       f"on that block's tokens") if options.lens else None,
    }
