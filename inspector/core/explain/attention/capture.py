"""Attention probabilities of one run, fused attention or not, without changing the outputs.

Fused kernels (`scaled_dot_product_attention`, torchvision's `need_weights=False`) never
materialise softmax(QK^T / sqrt(d)), so no hook can see it. `AttentionCapture` switches each
attention module to its non-fused path for the run only and hooks the tensor that multiplies
V; on exit, also when the forward raised, every hook is removed and every flag put back, so
a run that asks for no attention runs the fused path untouched.

- torchvision (`nn.MultiheadAttention`): a pre-hook asks for `need_weights=True,
  average_attn_weights=False`; the forward hook reads the per-head weights and returns to the
  caller what it asked for. The weights returned are a view of the softmax output, and the
  view is used by nothing downstream: gradients are taken with respect to its `_base`, the
  (B*heads, N, N) tensor that multiplied V.
- timm: `fused_attn = False` for the run, and a forward hook on `attn_drop`, which in eval
  returns the softmax output itself.
- Hugging Face: `model.set_attn_implementation("eager")` for the run (and back), and the
  attention module's second output. Not `output_attentions=True`: it leaves transformers'
  own hooks on the model, and under SDPA returns nothing.

With `grad`, the first captured attention's input becomes a fresh leaf with autograd on
from there (unless it is in a graph already): the probabilities then carry a graph even
under `torch.no_grad` and with frozen parameters, and nothing before that block records.
Each probability tensor's gradient is kept in `Captured.grad` when a backward passes
through it (a tensor hook), or returned by `gradients(score)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from inspector.core.explain.attention.find import HF, TIMM, TORCHVISION, AttentionModel
from inspector.core.hookset import HookSet

_NEED_WEIGHTS, _AVERAGE = 4, 6  # positions in nn.MultiheadAttention.forward's arguments


@dataclass
class Captured:
    """One call of one attention module."""

    name: str
    probs: torch.Tensor  # (B, heads, N, N), rows sum to 1
    root: torch.Tensor  # what the gradient is taken with respect to (same values)
    grad: torch.Tensor | None = None  # d score / d probs, shaped as probs, once computed


class AttentionCapture:
    """`with AttentionCapture(model, found, grad=...) as cap: model(x)`; then `cap.captured`.

    only: the attention modules to capture (None: all of them); the others keep their fused
        path. keep_blocks: blocks whose output tokens are kept (`cap.block_outputs`), with
        their graph: the logit lens, LeGrad.
    """

    def __init__(self, model: nn.Module, found: AttentionModel, *, grad: bool = False,
                 only=None, keep_blocks=()) -> None:
        self.model, self.found, self.grad = model, found, grad
        self.names = tuple(n for n in found.attention if only is None or n in set(only))
        self.keep_blocks = tuple(keep_blocks)
        self.captured: list[Captured] = []
        self.block_outputs: dict[str, torch.Tensor] = {}
        self.leaf: torch.Tensor | None = None
        self._hooks = HookSet()
        self._undo: list[tuple[object, str, object]] = []
        self._grad_mode = True

    # -- context ----------------------------------------------------------------------------
    def __enter__(self) -> AttentionCapture:
        self._grad_mode = torch.is_grad_enabled()
        try:
            modules = dict(self.model.named_modules())
            for i, name in enumerate(self.names):
                self._install(name, modules[name], first=i == 0)
            if self.found.family == HF and self.names:
                before = self.model.config._attn_implementation
                if before != "eager":
                    self._undo.append((self.model, "attn_implementation", before))
                    self.model.set_attn_implementation("eager")
            for block in self.keep_blocks:
                self._hooks.forward(modules[block], self._block_hook(block))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        torch.set_grad_enabled(self._grad_mode)
        try:
            self._hooks.remove()
        finally:
            undo, self._undo = self._undo, []
            for owner, attr, value in reversed(undo):
                if attr == "attn_implementation":
                    owner.set_attn_implementation(value)
                else:
                    setattr(owner, attr, value)

    def _install(self, name: str, module: nn.Module, first: bool) -> None:
        family = self.found.family
        if family == TORCHVISION:
            asked: list[tuple[bool, bool]] = []  # per call: what the caller asked for
            self._hooks.forward_pre(module, self._tv_pre(asked, first), with_kwargs=True)
            self._hooks.forward(module, self._tv_post(name, asked), with_kwargs=True,
                                prepend=True)
            return
        if first and self.grad:
            self._hooks.forward_pre(module, self._leaf_pre, with_kwargs=True)
        if family == TIMM:
            self._undo.append((module, "fused_attn", module.fused_attn))
            module.fused_attn = False
            self._hooks.forward(module.attn_drop, self._probs_hook(name))
        else:
            self._hooks.forward(module, self._probs_hook(name))

    # -- hooks ------------------------------------------------------------------------------
    def _make_leaf(self, t: torch.Tensor) -> torch.Tensor:
        """The first attention's input as a fresh leaf, autograd on from here (see the module
        docstring); a tensor already in a graph stays as it is."""
        torch.set_grad_enabled(True)  # put back on exit
        if t.requires_grad or not t.is_floating_point():
            return t
        self.leaf = t.detach().requires_grad_(True)
        return self.leaf

    def _leaf_pre(self, mod, args, kwargs):
        if self.leaf is not None or not args or not isinstance(args[0], torch.Tensor):
            return None
        return (self._make_leaf(args[0]), *args[1:]), kwargs

    def _tv_pre(self, asked: list, first: bool):
        def hook(mod, args, kwargs):
            args, kwargs = list(args), dict(kwargs)
            if first and self.grad and self.leaf is None and args:
                query = args[0]
                leaf = self._make_leaf(query)
                # Self-attention passes one tensor as query, key and value: keep it one.
                args = [leaf if a is query else a for a in args[:3]] + args[3:]
            need = args[_NEED_WEIGHTS] if len(args) > _NEED_WEIGHTS else kwargs.get(
                "need_weights", True)
            average = args[_AVERAGE] if len(args) > _AVERAGE else kwargs.get(
                "average_attn_weights", True)
            asked.append((bool(need), bool(average)))
            for position, key, value in ((_NEED_WEIGHTS, "need_weights", True),
                                         (_AVERAGE, "average_attn_weights", False)):
                if len(args) > position:
                    args[position] = value
                else:
                    kwargs[key] = value
            return tuple(args), kwargs

        return hook

    def _tv_post(self, name: str, asked: list):
        def hook(mod, args, kwargs, output):
            weights = output[1]
            base = weights._base
            # The softmax output that multiplied V (the view returned is used by nothing).
            root = base if base is not None and base.numel() == weights.numel() else weights
            self._keep(name, weights, root)
            need, average = asked.pop() if asked else (True, True)
            return output[0], ((weights.mean(dim=1) if average else weights) if need else None)

        return hook

    def _probs_hook(self, name: str):
        family = self.found.family

        def hook(mod, args, output):
            probs = output if family == TIMM else output[1]
            if isinstance(probs, torch.Tensor):
                self._keep(name, probs, probs)

        return hook

    def _keep(self, name: str, probs: torch.Tensor, root: torch.Tensor) -> None:
        entry = Captured(name, probs, root)
        self.captured.append(entry)
        if self.grad and root.requires_grad:

            def store(grad: torch.Tensor) -> None:
                entry.grad = grad.detach().reshape(entry.probs.shape)

            self._hooks.tensor(root, store)

    def _block_hook(self, name: str):
        def hook(mod, args, output):
            tokens = output if isinstance(output, torch.Tensor) else output[0]
            self.block_outputs[name] = tokens

        return hook

    # -- results ----------------------------------------------------------------------------
    def probs(self) -> list[torch.Tensor]:
        return [c.probs for c in self.captured]

    def gradients(self, score: torch.Tensor, retain_graph: bool = False) -> list[torch.Tensor]:
        """d score / d each captured probability tensor (zeros where the score does not
        depend on it), shaped like the probabilities; also kept in each Captured.grad."""
        roots = [c.root for c in self.captured]
        wanted = [i for i, r in enumerate(roots) if r.requires_grad]
        found = torch.autograd.grad(score, [roots[i] for i in wanted], retain_graph=retain_graph,
                                    allow_unused=True) if wanted else ()
        for i, g in zip(wanted, found, strict=True):
            if g is not None:
                self.captured[i].grad = g.detach().reshape(self.captured[i].probs.shape)
        return [c.grad if c.grad is not None else torch.zeros_like(c.probs)
                for c in self.captured]

    def check(self, batch: int, input_hw: tuple[int, int]) -> str:
        """"" when every captured tensor is one softmax over the patch grid per image; else
        the one sentence why the maps are off (windowed attention, a non-softmax)."""
        if not self.captured:
            return ("No attention probabilities were seen in the forward (the model may call "
                    "a fused kernel directly), so there are no attention maps.")
        for c in self.captured:
            a = c.probs
            if a.ndim != 4 or a.shape[0] != batch or a.shape[-1] != a.shape[-2]:
                return (f"The attention of {c.name} has shape {list(a.shape)}: not one "
                        f"softmax over the whole patch grid per image (windowed attention, as "
                        f"in Swin?), so attention maps are off.")
            if self.found.layout(int(a.shape[-1]), tuple(input_hw)) is None:
                return (f"The {a.shape[-1]} tokens of {c.name} are not a patch grid of the "
                        f"{input_hw[0]} x {input_hw[1]} input, so attention maps are off.")
        first = self.captured[0].probs.detach().float()
        if float(first.amin()) < -1e-6 or float((first.sum(-1) - 1).abs().amax()) > 1e-3:
            return (f"The attention weights of {self.captured[0].name} are not a softmax (rows "
                    f"do not sum to 1), so attention rollout is not defined for them.")
        return ""

    def layout(self, input_hw: tuple[int, int]) -> tuple[int, tuple[int, int]]:
        """(prefix tokens, patch grid) of this run's attention (after `check` passed)."""
        found = self.found.layout(int(self.captured[0].probs.shape[-1]), tuple(input_hw))
        assert found is not None, "check() first"
        return found

    def release(self) -> None:
        """Let go of every tensor (and the graph they hold)."""
        self.captured.clear()
        self.block_outputs.clear()
        self.leaf = None
