"""Which modules of a model are its self-attention, and whether attention maps apply to it.

Three families are known, each by what its attention module is:

- torchvision: `nn.MultiheadAttention` (ViT's `encoder.layers.encoder_layer_N.self_attention`);
  one class token, at index 0.
- timm: a module with a bool `fused_attn` and an `nn.Dropout` child `attn_drop` applied to
  the softmax (timm.layers.Attention, AttentionRope, BEiT's and EVA's attention:
  `blocks.N.attn`); prefix tokens `model.num_prefix_tokens` (class, distillation, registers).
- Hugging Face: the classes the model records its `attentions` from
  (`_can_record_outputs`), where they return (output, weights): `vit.layers.N.attention`.
  A recorder at another index (Swin's stages) is not a block's attention.

A block is the attention module's parent. The methods apply when such modules exist and the
first one's input, as the module tree's probe forward recorded it, is (batch, tokens, dim)
with the tokens a patch grid of the input (core.tokens.token_grid), possibly after prefix
tokens; otherwise `refusal` says in one sentence why not: no attention of a known kind (a
CNN, ConvNeXt, torchvision's Swin), or attention over windows of tokens (timm's Swin).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from inspector.core.tokens import token_grid

TORCHVISION, TIMM, HF = "torchvision", "timm", "hf"

NO_ATTENTION = (
    "This model has no self-attention whose probabilities can be read (torchvision's "
    "nn.MultiheadAttention, timm's or Hugging Face's ViT attention): attention maps need a "
    "ViT-style transformer, not a CNN or a windowed transformer such as Swin."
)


@dataclass(frozen=True)
class AttentionModel:
    """A model's self-attention modules, in the order their blocks run.

    prefix: the tokens before the patch grid (class, distillation, registers) as the model
        says, or None where it does not (read off the token count, see `layout`).
    class_token: whether token 0 is a class token (maps read its row; without one, the
        mean over the patch rows).
    """

    family: str
    attention: tuple[str, ...]
    prefix: int | None
    class_token: bool

    @property
    def blocks(self) -> tuple[str, ...]:
        """Each attention module's block: its parent ("blocks.3" of "blocks.3.attn")."""
        return tuple(block_of(name) for name in self.attention)

    def layout(self, n_tokens: int, input_hw: tuple[int, int]
               ) -> tuple[int, tuple[int, int]] | None:
        """(prefix tokens, patch grid) of `n_tokens` tokens for an input of input_hw, or
        None when they are no patch grid of it."""
        if self.prefix is not None:
            found = token_grid(n_tokens - self.prefix, input_hw, max_extra=0)
            return None if found is None else (self.prefix, found[1])
        return token_grid(n_tokens, input_hw)


def block_of(attention: str) -> str:
    return attention.rsplit(".", 1)[0] if "." in attention else ""


def _hf_attention_classes(model: nn.Module) -> tuple[type, ...]:
    """The classes a Hugging Face model records `attentions` from, where a forward returns
    (output, weights): a bare class, or an OutputRecorder of index 1 without a layer name."""
    recorded = getattr(model, "_can_record_outputs", None) or {}
    kinds = recorded.get("attentions") if isinstance(recorded, dict) else None
    kinds = kinds if isinstance(kinds, (list, tuple)) else [kinds]
    found = []
    for kind in kinds:
        if isinstance(kind, type):
            found.append(kind)
        elif (isinstance(getattr(kind, "target_class", None), type)
              and getattr(kind, "index", 1) == 1 and getattr(kind, "layer_name", None) is None):
            found.append(kind.target_class)
    return tuple(found)


def _is_timm_attention(module: nn.Module) -> bool:
    state = module.__dict__
    return isinstance(state.get("fused_attn"), bool) and isinstance(
        state.get("_modules", {}).get("attn_drop"), nn.Dropout)


def find_attention(model: nn.Module) -> AttentionModel | None:
    """The model's self-attention modules (see the module docstring), or None."""
    config = getattr(model, "config", None)
    hf = _hf_attention_classes(model) if hasattr(config, "_attn_implementation") else ()
    if hf:
        names = tuple(n for n, m in model.named_modules() if isinstance(m, hf))
        if names:
            deit = getattr(config, "model_type", "") == "deit"
            return AttentionModel(HF, names, 2 if deit else None, True)
    names = tuple(n for n, m in model.named_modules() if _is_timm_attention(m))
    if names:
        prefix = getattr(model, "num_prefix_tokens", None)
        cls = getattr(model, "cls_token", None) is not None if prefix is not None else True
        return AttentionModel(TIMM, names, int(prefix) if prefix is not None else None,
                              bool(cls and (prefix or 0) > 0))
    names = tuple(n for n, m in model.named_modules() if isinstance(m, nn.MultiheadAttention))
    if names:
        vit = hasattr(model, "class_token")  # torchvision's VisionTransformer
        return AttentionModel(TORCHVISION, names, 1 if vit else None, True)
    return None


def _token_shape(model: nn.Module, name: str, tree) -> tuple[int, int] | None:
    """(batch, tokens) of the attention module's first input in the tree's probe."""
    info = tree.modules.get(name)
    if info is None or not info.calls:
        return None
    shapes = [s for _, s in info.calls[0].inputs if len(s) == 3]
    if not shapes:
        return None
    shape = shapes[0]
    module = dict(model.named_modules()).get(name)
    if isinstance(module, nn.MultiheadAttention) and not module.batch_first:
        return shape[1], shape[0]
    return shape[0], shape[1]


def _probe_input(tree) -> tuple[int, tuple[int, int]] | None:
    root = tree.modules.get("")
    if root is None or not root.calls:
        return None
    shapes = [s for _, s in root.calls[0].inputs if len(s) == 4]
    return (shapes[0][0], (shapes[0][2], shapes[0][3])) if shapes else None


def refusal(model: nn.Module, tree, found: AttentionModel | None = None) -> str:
    """"" when the attention methods apply to the model (see the module docstring), else
    the one sentence that says why they do not. `tree`: its core.models.tree.ModuleTree
    with the probe's shapes; `found`: find_attention(model), when already known."""
    found = found if found is not None else find_attention(model)
    if found is None:
        return NO_ATTENTION
    first = found.attention[0]
    probe = _probe_input(tree)
    tokens = _token_shape(model, first, tree)
    if tokens is None or probe is None:
        return (f"Its attention ({first}) took no (batch, tokens, features) input in the "
                f"probe forward, so attention maps cannot be read from it.")
    batch, input_hw = probe
    if tokens[0] != batch:
        return (f"Its attention ({first}) runs over windows of {tokens[1]} tokens, not over the "
                f"whole patch grid (as in Swin), so attention maps are not defined for it.")
    if found.layout(tokens[1], input_hw) is None:
        return (f"Its attention's {tokens[1]} tokens are not a patch grid of the "
                f"{input_hw[0]} x {input_hw[1]} input, so attention maps are not defined for it.")
    return ""


def attention_refusal(loaded, tree) -> str:
    """`refusal` for a loaded model (core.models.base.LoadedModel), said at load time; a
    model whose probe recorded nothing usable is refused, never an error."""
    try:
        return refusal(loaded.model, tree)
    except Exception as e:  # noqa: BLE001 - a model of an unexpected shape: refused, said so
        return f"Attention maps cannot be read from this model ({type(e).__name__}: {e})."


def legrad_blocks(found: AttentionModel, first: str | None, count: int) -> tuple[int, ...]:
    """The blocks LeGrad reads (indices into found.attention): from the block `first` names
    (a block, its attention, or any module inside the block) to the last; None: the last
    `count` (all of them when there are fewer). ValueError naming the module otherwise."""
    n = len(found.attention)
    if first is None or first == "":
        return tuple(range(max(0, n - count), n))
    for i, (attention, block) in enumerate(zip(found.attention, found.blocks, strict=True)):
        if first in (attention, block) or first.startswith(block + "."):
            return tuple(range(i, n))
    raise ValueError(f"'{first}' is not in a transformer block: LeGrad's layer names its first "
                     f"block ({found.blocks[max(0, n - count)]}) or that block's attention "
                     f"({found.attention[max(0, n - count)]})")


def describe_blocks(found: AttentionModel, indices) -> str:
    """"blocks.8 to blocks.11 (4 blocks)": what a map was computed over, for headers."""
    indices = list(indices)
    if not indices:
        return "no block"
    first, last = found.blocks[indices[0]], found.blocks[indices[-1]]
    if len(indices) == 1:
        return first
    return f"{first} to {last} ({len(indices)} blocks)"
