"""Forward hooks that turn each chosen layer's output into its Gram matrix at once
(core.compare.cka.gram), so that no activation outlives the module that made it: memory is the
forward's own plus n x n numbers per layer, however wide the layers are.

A module that runs several times per forward is read at its last call (as the atlas reads
it); (N, B, D) token outputs are read batch first. One layer may also give its channels as
samples (core.compare.channels.ChannelRead) for matched channels, in the same forward.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from inspector.core.compare.cka import gram
from inspector.core.compare.channels import ChannelRead
from inspector.core.hookset import HookSet, ModelState, tensor_leaves


class GramRecorder:
    """`with GramRecorder(model, calls) as rec: grams, samples = rec.run(x)`.

    calls: layer -> its calls per forward, in the order the Grams are returned; seq_first:
    the layers whose output is (N, B, D); samples: (layer, read, its calls per forward) of
    the layer whose channels to return as samples too (at its last call), or None. The hooks are removed on exit, also after a failure.
    """

    def __init__(self, model: nn.Module, calls: Mapping[str, int],
                 seq_first: frozenset[str] = frozenset(),
                 samples: tuple[str, ChannelRead, int] | None = None) -> None:
        self.model = model
        self.calls = dict(calls)
        self.seq_first = seq_first
        self.sample_layer, self.sample_read, self.sample_calls = (
            samples if samples is not None else (None, None, 0))
        self._seen: dict[str, int] = {}
        self._grams: dict[str, torch.Tensor] = {}
        self._samples: torch.Tensor | None = None
        self._hooks = HookSet()
        self._state = ModelState(model, training=False)

    def __enter__(self) -> GramRecorder:
        modules = dict(self.model.named_modules())
        wanted = set(self.calls) | ({self.sample_layer} - {None})
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
        sampled = name == self.sample_layer
        last_sample = self.sample_calls

        def hook(module, args, output):
            count = self._seen[name] = self._seen.get(name, 0) + 1
            t = output if isinstance(output, torch.Tensor) else next(
                (v for _, v in tensor_leaves(output)), None)
            if t is None:
                raise TypeError(f"layer '{name}' returned no tensor")
            if in_gram and count == last:
                self._grams[name] = gram(t.transpose(0, 1) if seq_first else t)
            if sampled and count == last_sample:
                self._samples = self.sample_read.samples(t)
            return None

        return hook

    def run(self, x: torch.Tensor, forward=None) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """One forward of `x` (`forward(model, x)` where the model is not called plainly):
        the Gram of each layer in `calls`' order, and the samples (or None)."""
        self._seen, self._grams, self._samples = {}, {}, None
        with torch.no_grad():
            if forward is None:
                self.model(x)
            else:
                forward(self.model, x)
        missing = [n for n in self.calls if n not in self._grams]
        if missing:
            raise RuntimeError(f"layer '{missing[0]}' did not run (or ran fewer times than "
                               f"the probe forward) in this forward")
        samples, self._samples = self._samples, None
        grams = [self._grams.pop(n) for n in self.calls]
        return grams, samples
