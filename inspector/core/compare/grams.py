"""Forward hooks that turn each chosen layer's output into its Gram matrix at once
(core.compare.cka.gram), so that no activation outlives the module that made it: memory is the
forward's own plus n x n numbers per layer, however wide the layers are.

A module that runs several times per forward is read at its last call (as the atlas reads
it); (N, B, D) token outputs are read batch first. One layer may also give its channels as
samples (core.compare.channels.ChannelRead) for matched channels, in the same forward (two
layers, when A and B are one model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from inspector.core.compare.channels import ChannelRead
from inspector.core.compare.cka import gram
from inspector.core.hookset import HookSet, ModelState, tensor_leaves


class GramRecorder:
    """`with GramRecorder(model, calls) as rec: grams, samples = rec.run(x)`.

    calls: layer -> its calls per forward (the Gram is taken at the last); seq_first: the
    layers whose output is (N, B, D); samples: (layer, read, its calls per forward) of each
    layer whose channels to return as samples too (at its last call). The hooks are removed
    on exit, also after a failure.
    """

    def __init__(self, model: nn.Module, calls: Mapping[str, int],
                 seq_first: frozenset[str] = frozenset(),
                 samples: Sequence[tuple[str, ChannelRead, int]] = ()) -> None:
        self.model = model
        self.calls = dict(calls)
        self.seq_first = seq_first
        self.sampled = list(samples)
        self._seen: dict[str, int] = {}
        self._grams: dict[str, torch.Tensor] = {}
        self._samples: dict[int, torch.Tensor] = {}
        self._hooks = HookSet()
        self._state = ModelState(model, training=False)

    def __enter__(self) -> GramRecorder:
        modules = dict(self.model.named_modules())
        wanted = set(self.calls) | {layer for layer, _, _ in self.sampled}
        missing = sorted(wanted - set(modules))
        if missing:
            raise KeyError(f"no module named {', '.join(map(repr, missing))} in the model")
        self._state.__enter__()
        try:
            for name in wanted:
                self._hooks.forward(modules[name], self._hook(name))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._hooks.remove()
        finally:
            self._state.restore()

    def _hook(self, name: str):
        last = self.calls.get(name)
        in_gram = name in self.calls
        seq_first = name in self.seq_first
        sampled = [(k, read, calls) for k, (layer, read, calls) in enumerate(self.sampled)
                   if layer == name]

        def hook(module, args, output):
            count = self._seen[name] = self._seen.get(name, 0) + 1
            t = output if isinstance(output, torch.Tensor) else next(
                (v for _, v in tensor_leaves(output)), None)
            if t is None:
                raise TypeError(f"layer '{name}' returned no tensor")
            if in_gram and count == last:
                self._grams[name] = gram(t.transpose(0, 1) if seq_first else t)
            for k, read, calls in sampled:
                if count == calls:
                    self._samples[k] = read.samples(t)
            return None

        return hook

    def run(self, x: torch.Tensor, forward=None
            ) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
        """One forward of `x` (`forward(model, x)` where the model is not called plainly):
        the Gram of each layer of `calls`, and each sampled layer's samples in order."""
        self._seen, self._grams, self._samples = {}, {}, {}
        with torch.no_grad():
            if forward is None:
                self.model(x)
            else:
                forward(self.model, x)
        missing = [n for n in self.calls if n not in self._grams]
        if missing:
            raise RuntimeError(f"layer '{missing[0]}' did not run (or ran fewer times than "
                               f"the probe forward) in this forward")
        if len(self._samples) != len(self.sampled):
            raise RuntimeError("a layer to match did not run in this forward")
        samples = [self._samples[k] for k in range(len(self.sampled))]
        grams, self._grams, self._samples = self._grams, {}, {}
        return grams, samples
