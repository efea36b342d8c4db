"""The module tree of a model: names, types, parameters, and what one probe forward showed.

The probe runs once (under no_grad, in eval mode, with hooks on every module that are
removed afterwards) and records each call's input and output shapes and the hazards that
make naive hooking go wrong:
- inplace: the module modifies its input in place (an `inplace=True` flag, or its input's
  version counter moved during its forward).
- output_modified_inplace: something after the module modified its output in place, so a
  stored reference to the output would show the wrong values (ReLU after BatchNorm).
- reused: called more than once per forward (its hooks fire several times).
- tuple_output: returns a tuple, list or dict rather than a tensor.
- never_called: its forward never ran (nn.MultiheadAttention's out_proj: the functional
  form uses its weights directly), so hooks on it will show nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from inspector.core.hookset import HookSet, ModelState, tensor_leaves

INPLACE = "inplace"
OUTPUT_MODIFIED_INPLACE = "output_modified_inplace"
REUSED = "reused"
TUPLE_OUTPUT = "tuple_output"
NEVER_CALLED = "never_called"

HAZARD_TEXT = {
    INPLACE: "modifies its input in place",
    OUTPUT_MODIFIED_INPLACE: "its output is modified in place later in the forward",
    REUSED: "called more than once per forward: one capture per call",
    TUPLE_OUTPUT: "returns a tuple, list or dict: each tensor in it is captured",
    NEVER_CALLED: "never called in a forward (its weights may be used directly), so its hooks never fire",
}


@dataclass(frozen=True)
class CallShapes:
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # (path, shape) of each tensor input
    outputs: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass
class ModuleInfo:
    name: str  # "" for the model itself
    type_name: str
    depth: int
    parent: str | None
    children: list[str] = field(default_factory=list)
    params_own: int = 0
    params_total: int = 0
    trainable: int = 0
    calls: list[CallShapes] = field(default_factory=list)
    hazards: frozenset[str] = frozenset()

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def output_shape(self) -> tuple[int, ...] | None:
        """Shape of the first tensor output of the first call, if any."""
        if self.calls and self.calls[0].outputs:
            return self.calls[0].outputs[0][1]
        return None

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1] if self.name else "(model)"


@dataclass
class ModuleTree:
    modules: dict[str, ModuleInfo]  # in named_modules() order; "" is the root
    # Modules in the order their first call returned in the probe forward (children before
    # their parents): the order in which their outputs exist.
    order: list[str] = field(default_factory=list)

    @property
    def root(self) -> ModuleInfo:
        return self.modules[""]

    def __getitem__(self, name: str) -> ModuleInfo:
        return self.modules[name]

    def __contains__(self, name: str) -> bool:
        return name in self.modules

    def __len__(self) -> int:
        return len(self.modules)

    def with_spatial_output(self) -> list[str]:
        """Modules whose output is (B, C, H, W) with H, W > 1, in output order: CAM targets."""
        names = self.order or list(self.modules)
        return [
            n
            for n in names
            if n and (s := self.modules[n].output_shape) and len(s) == 4 and s[2] * s[3] > 1
        ]


def build_tree(model: nn.Module, example_input: torch.Tensor | None = None) -> ModuleTree:
    """Describe `model`; with an example input, also probe one forward for shapes and hazards."""
    modules: dict[str, ModuleInfo] = {}
    for name, mod in model.named_modules():
        parent = name.rsplit(".", 1)[0] if "." in name else ("" if name else None)
        own = sum(p.numel() for p in mod.parameters(recurse=False))
        total = sum(p.numel() for p in mod.parameters())
        trainable = sum(p.numel() for p in mod.parameters() if p.requires_grad)
        info = ModuleInfo(
            name=name,
            type_name=type(mod).__name__,
            depth=name.count(".") + 1 if name else 0,
            parent=parent,
            params_own=own,
            params_total=total,
            trainable=trainable,
        )
        modules[name] = info
        if parent is not None and parent in modules:
            modules[parent].children.append(name)
    tree = ModuleTree(modules)
    if example_input is not None:
        _probe(model, example_input, tree)
    return tree


def _probe(model: nn.Module, x: torch.Tensor, tree: ModuleTree) -> None:
    hazards: dict[str, set[str]] = {n: set() for n in tree.modules}
    outputs: list[tuple[str, torch.Tensor, int]] = []  # (module, tensor, version at return)
    pending_inputs: dict[str, list[list[tuple[torch.Tensor, int]]]] = {}

    def pre(name):
        def hook(mod, args, kwargs):
            leaves = list(tensor_leaves((args, kwargs)))
            pending_inputs.setdefault(name, []).append([(t, t._version) for _, t in leaves])
            tree.modules[name].calls.append(
                CallShapes(tuple((p, tuple(t.shape)) for p, t in leaves), ())
            )

        return hook

    def post(name):
        def hook(mod, args, output):
            info = tree.modules[name]
            if name not in tree.order:
                tree.order.append(name)
            leaves = list(tensor_leaves(output))
            info.calls[-1] = CallShapes(
                info.calls[-1].inputs, tuple((p, tuple(t.shape)) for p, t in leaves)
            )
            if not isinstance(output, torch.Tensor):
                hazards[name].add(TUPLE_OUTPUT)
            for t, version in pending_inputs[name].pop():
                if t._version != version:
                    hazards[name].add(INPLACE)
            if getattr(mod, "inplace", False):
                hazards[name].add(INPLACE)
            for _, t in leaves:
                outputs.append((name, t, t._version))

        return hook

    with ModelState(model, training=False), HookSet() as hooks, torch.no_grad():
        for name, mod in model.named_modules():
            hooks.forward_pre(mod, pre(name), with_kwargs=True)
            hooks.forward(mod, post(name))
        model(x)
    for name, t, version in outputs:
        if t._version != version:
            hazards[name].add(OUTPUT_MODIFIED_INPLACE)
    for name, info in tree.modules.items():
        if len(info.calls) > 1:
            hazards[name].add(REUSED)
        if not info.calls:
            hazards[name].add(NEVER_CALLED)
        info.hazards = frozenset(hazards[name])
