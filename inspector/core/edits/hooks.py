"""The hooks that carry out a run's edits: a forward pre-hook for an edit of a module's input,
a forward hook for one of its output, and a tensor hook on that output for an edit of the
gradient flowing back into it.

They are registered before the capture's own hooks (core.run.capture), so that what is
captured, and what flows on, is the edited value: forward hooks run in registration order.
A hook that raises is a HookError naming the module. `EditHooks` alone (nothing captured) is
what the forwards a run makes after its own use (Score-CAM, attributions).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import torch
from torch import nn

from inspector.core.edits.interventions import Intervention, InterventionSet
from inspector.core.hookset import HookError, HookSet, RunCancelled


def install_edits(hooks: HookSet, modules: dict[str, nn.Module],
                  interventions: InterventionSet, run_id: int) -> None:
    """Register the hooks of every edit in `interventions` into `hooks` (which removes them)."""
    for name in sorted(interventions.modules()):
        _install(hooks, name, modules[name], interventions.for_module(name), run_id)


def _install(hooks: HookSet, name: str, module: nn.Module, items: list[Intervention],
             run_id: int) -> None:
    on_input = [i for i in items if i.edits_input]
    items = [i for i in items if not i.edits_input]

    def pre_hook(mod, args):
        try:
            first = args[0] if args else None
            # Detection models take a list of (3, H, W) images (core.tasks): edited as
            # the batch they stand for, and handed on as a list again.
            images = (isinstance(first, list) and bool(first)
                      and all(isinstance(t, torch.Tensor) for t in first))
            if not images and not isinstance(first, torch.Tensor):
                raise TypeError("input edits need a tensor (or a list of images) as the "
                                "first input")
            x = torch.stack(first) if images else first
            for item in on_input:
                edited = item.edit_input(x, run_id)
                if edited is not None:
                    x = edited
            return (list(x) if images else x, *args[1:])
        except Exception as e:
            raise HookError(name, "intervention", e) from e

    if on_input:
        hooks.forward_pre(module, pre_hook)
    if not items:
        return

    def forward_hook(mod, args, output):
        try:
            for item in items:
                if not isinstance(output, torch.Tensor):
                    raise TypeError(
                        f"interventions need a tensor output, got {type(output).__name__}"
                    )
                edited = item.edit_output(output, run_id)
                if edited is not None:
                    output = edited
                if item.edits_gradient and output.requires_grad:
                    hooks.tensor(output, item.edit_gradient)
            return output
        except Exception as e:
            raise HookError(name, "intervention", e) from e

    hooks.forward(module, forward_hook)


class EditHooks:
    """`with EditHooks(model, interventions, run_id, cancel):` the model runs with the
    edits on and nothing captured; every leaf stops a cancelled run before it computes."""

    def __init__(self, model: nn.Module, interventions: Iterable[Intervention], run_id: int,
                 cancel: threading.Event | None = None) -> None:
        self.model = model
        self.interventions = InterventionSet(tuple(interventions))
        self.run_id = run_id
        self.cancel = cancel
        self._hooks = HookSet()

    def __enter__(self) -> EditHooks:
        modules = dict(self.model.named_modules())
        missing = sorted(self.interventions.modules() - set(modules))
        if missing:
            raise KeyError(f"no module named {', '.join(repr(m) for m in missing)} in the model")
        try:
            install_edits(self._hooks, modules, self.interventions, self.run_id)
            if self.cancel is not None:
                for mod in modules.values():
                    if next(mod.children(), None) is None:
                        install_cancel_check(self._hooks, mod, self.cancel)
        except BaseException:
            self._hooks.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.remove()


def install_cancel_check(hooks: HookSet, module: nn.Module, cancel: threading.Event) -> None:
    """A leaf that stops a cancelled run before it computes."""

    def pre_hook(mod, args):
        if cancel.is_set():
            raise RunCancelled()

    hooks.forward_pre(module, pre_hook)
