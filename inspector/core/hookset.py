"""Temporary changes to a model, all undone on exit: its hooks, its flags; and the two
exceptions a hook raises (HookError, RunCancelled).

Every piece of the engine that hooks or switches a model for one run (core.run.capture's
Capture, core.edits.hooks, the lean CAM path, the tree probe, input attributions, the demo's
evaluation) goes through the two context managers here, so none of them can leave a hook
behind or a model in eval mode when its body raises.

- `ModelState` saves each module's `training` and `inplace` flags and each parameter's
  `requires_grad` on entry and restores them on exit. Inside, `eval()`/`train()`, a frozen
  model (no parameter gradient is then recorded at all) or an `inplace=False` module are
  one call each.
- `HookSet` registers forward pre-hooks, forward hooks and tensor (gradient) hooks and
  removes every handle on exit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn


class HookError(RuntimeError):
    """A hook (a capture's or an edit's) raised; names the module and the hook kind."""

    def __init__(self, module: str, kind: str, error: BaseException) -> None:
        self.module = module
        where = module or "(the model itself)"
        super().__init__(f"{kind} hook on module '{where}' failed: {type(error).__name__}: {error}")


class RunCancelled(Exception):
    """Raised from a hook to stop a run early; not an error."""



def tensor_leaves(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in a (nested) tuple, list or dict output, with its path: "", "0", "1.logits"."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from tensor_leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from tensor_leaves(v, f"{path}.{i}" if path else str(i))


def replace_leaf(value: Any, path: str, new: torch.Tensor) -> Any:
    """`value` with the tensor at `path` (as tensor_leaves names it) replaced by `new`."""
    if not path:
        return new
    head, _, rest = path.partition(".")
    if isinstance(value, Mapping):
        items = {**value, head: replace_leaf(value[head], rest, new)}
        try:
            # Its own type: the modules after it read a ModelOutput's attributes
            # (Hugging Face's `outputs.pooler_output`), which a plain dict lacks.
            return type(value)(**items)
        except TypeError:
            return items
    items = list(value)
    items[int(head)] = replace_leaf(items[int(head)], rest, new)
    return type(value)(items) if isinstance(value, list) else tuple(items)


class ModelState:
    """`with ModelState(model, training=False, requires_grad=False): ...`

    training: None leaves each module's mode as it is; False is `model.eval()`, True
    `model.train()`. requires_grad: None leaves the parameters as they are; False freezes
    them for the body. Whatever the body changes (also by `disable_inplace`, or the model's
    own code) is put back on exit, also when the body raised.
    """

    def __init__(
        self,
        model: nn.Module,
        training: bool | None = None,
        requires_grad: bool | None = None,
    ) -> None:
        self.model = model
        self.training = training
        self.requires_grad = requires_grad
        self._flags: list[tuple[nn.Module, str, Any]] = []
        self._params: list[tuple[torch.Tensor, bool]] = []
        self._training = False  # whether a module was in training mode on entry

    def __enter__(self) -> ModelState:
        flags, params = self._flags, self._params
        for mod in self.model.modules():
            # Read from __dict__: hasattr() on a missing attribute goes through
            # Module.__getattr__ and an exception, which cost ~1 ms per run on resnet50.
            state = mod.__dict__
            for attr in ("training", "inplace"):
                if attr in state:
                    flags.append((mod, attr, state[attr]))
            self._training = self._training or state.get("training", False)
            for p in state["_parameters"].values():
                if p is not None:
                    params.append((p, p.requires_grad))
        try:
            if self.training is not None:
                self.model.train(self.training)
            if self.requires_grad is not None:
                for p, _ in params:
                    p.requires_grad_(self.requires_grad)
        except BaseException:
            self.restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def eval(self) -> None:
        """`model.eval()` for the body, skipped when no module was in training mode on entry:
        Module.train walks every module in Python (0.06 ms a run on the demo CNN, 0.24 ms on
        resnet50), and a model in the app is in eval mode but for these few lines."""
        if self._training:
            self.model.eval()

    def disable_inplace(self, module: nn.Module) -> bool:
        """Give `module` inplace=False for the body, when it has the flag set; True if so."""
        if not module.__dict__.get("inplace", False):
            return False
        module.inplace = False
        return True

    def restore(self) -> None:
        self._training = False
        flags, self._flags = self._flags, []
        for mod, attr, value in flags:
            if mod.__dict__.get(attr) is not value:  # Module.__setattr__ is slow: only changes
                setattr(mod, attr, value)
        params, self._params = self._params, []
        for p, flag in params:
            if p.requires_grad != flag:
                p.requires_grad_(flag)


class HookSet:
    """`with HookSet() as hooks: hooks.forward(module, fn); ...`: every handle registered
    through it is removed on exit, also when the body raised."""

    def __init__(self) -> None:
        self._handles: list[Any] = []

    def __enter__(self) -> HookSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __len__(self) -> int:
        return len(self._handles)

    def forward_pre(self, module: nn.Module, fn: Callable, *, with_kwargs: bool = False) -> Any:
        handle = module.register_forward_pre_hook(fn, with_kwargs=with_kwargs)
        self._handles.append(handle)
        return handle

    def forward(self, module: nn.Module, fn: Callable, *, with_kwargs: bool = False,
                prepend: bool = False) -> Any:
        """prepend: before the module's other forward hooks (they then see what it returns)."""
        handle = module.register_forward_hook(fn, with_kwargs=with_kwargs, prepend=prepend)
        self._handles.append(handle)
        return handle

    def tensor(self, t: torch.Tensor, fn: Callable[[torch.Tensor], Any]) -> Any:
        """A gradient hook on `t` (`Tensor.register_hook`): removed on exit, so a graph that
        outlives the run does not call back into it."""
        handle = t.register_hook(fn)
        self._handles.append(handle)
        return handle

    def remove(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()


def remaining_hooks(model: nn.Module) -> list[str]:
    """Modules that still have hooks of any kind ("name._forward_hooks"): empty after every
    run. The tests' check, and a debugging aid for a script that hooks the model too."""
    out = []
    for name, m in model.named_modules():
        for attr in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
        ):
            if getattr(m, attr, None):
                out.append(f"{name or '(model)'}.{attr}")
    return out
