"""Where two runs part ways: the outputs of one run kept, and another run measured against them.

A run that asks for it (RunRequest.keep_outputs) keeps the output of the first call of each
captured module; a later run (RunRequest.compare_with) measures, per module in its own
forward order, the relative L2 distance ||B - A|| / ||A|| and the cosine similarity between
that kept output A and its own output B, over the whole tensor. Modules that are not in
both runs, or whose outputs differ in shape, are left out.

Cheap on purpose, since the window compares every edited run with its unedited twin:
- A run keeps references, not copies, to outputs nothing modifies afterwards: the module
  tree's probe says which outputs the model modifies in place (ReLU(inplace) after a
  BatchNorm, `out += identity`), and only those are copied in the hook (and small views of
  big tensors, which would keep the whole storage alive). Each reference's
  version counter is read when it is kept and again whenever it is used: an output that
  was modified in place after all is dropped (left out of comparisons), never shown wrong.
- A compared run measures in its hooks, against the kept output, so it keeps nothing of
  its own unless it also asks to; the four sums stay on the device until the run ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import nn

from inspector.core.hookset import HookSet

# Runs whose outputs a Session keeps at once (the least recently used goes): the window needs
# run A and the unedited run of the edits, and one more lets a run be pinned again (or saved)
# without pushing either out.
KEPT_RUNS = 3


_EQUAL = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)  # what _from_sums reads as 0, 1


def _sums(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(|a|^2, |b|^2, a.b, |b - a|^2) as a float64 tensor on b's device (no sync)."""
    a = a.detach().to(device=b.device, dtype=torch.float32).reshape(-1)
    b = b.detach().to(dtype=torch.float32).reshape(-1)
    # Outputs before an edit are usually bit-for-bit those of the kept run: one read of
    # each, instead of the five passes below. On the CPU only: elsewhere it would wait for
    # the device at every module.
    if b.device.type == "cpu" and torch.equal(a, b):
        return _EQUAL
    d = b - a
    parts = (torch.dot(a, a), torch.dot(b, b), torch.dot(a, b), torch.dot(d, d))
    return torch.stack(parts).to(torch.float64)


def _from_sums(aa: float, bb: float, ab: float, dd: float) -> tuple[float, float]:
    """rel_l2 and cosine from the sums. Two all-zero outputs are identical (0, 1); a zero
    reference against a non-zero output has no relative distance (inf) and no angle (nan)."""
    if dd == 0.0:
        return 0.0, 1.0  # bitwise equal (or both zero): exact, whatever the rounding of ab
    rel = math.sqrt(dd / aa) if aa > 0 else math.inf
    cos = ab / math.sqrt(aa * bb) if aa > 0 and bb > 0 else math.nan
    return rel, max(-1.0, min(1.0, cos)) if math.isfinite(cos) else cos


class KeptOutputs:
    """The outputs one run kept: module -> a float32 CPU tensor (a copy, or the run's own
    tensor where nothing modified it), in forward order."""

    def __init__(self, run_id: int, tensors: Mapping[str, tuple[torch.Tensor, int]]) -> None:
        self.run_id = run_id
        self._tensors = dict(tensors)  # module -> (tensor, its version counter when kept)

    def __len__(self) -> int:
        return len(self._tensors)

    def modules(self) -> list[str]:
        return list(self._tensors)

    def get(self, module: str) -> torch.Tensor | None:
        """The kept output; None when there is none, or it was modified in place since."""
        entry = self._tensors.get(module)
        if entry is None:
            return None
        tensor, version = entry
        if tensor._version != version:
            self._tensors.pop(module, None)  # never trusted again (pop: read from two threads)
            return None
        return tensor

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {m: t for m in self.modules() if (t := self.get(m)) is not None}


class OutputRecorder:
    """One run's forward hooks on its captured modules: keeps their first outputs (`keep`)
    and/or measures them against a kept run (`reference`). Install after hooks.Capture has
    entered, so that these hooks run after its interventions and see the output that flows
    on; the HookSet given removes them."""

    def __init__(
        self,
        modules: Iterable[str],
        keep: bool = False,
        copy: Iterable[str] = (),
        reference: KeptOutputs | None = None,
    ) -> None:
        self.modules = list(dict.fromkeys(modules))
        self.keep = keep
        self.copy = frozenset(copy)  # outputs the model modifies in place: copied in the hook
        self.reference = reference
        self._kept: dict[str, tuple[torch.Tensor, int]] = {}
        self._sums: dict[str, torch.Tensor] = {}  # module -> _sums(), in forward order
        self._seen: set[str] = set()

    def install(self, model: nn.Module, hooks: HookSet) -> None:
        found = dict(model.named_modules())
        for name in self.modules:
            if name in found:
                hooks.forward(found[name], self._hook(name))

    def _hook(self, name: str):
        copy = name in self.copy

        def hook(mod, args, output):
            if name in self._seen or not isinstance(output, torch.Tensor):
                return None  # first calls only; tuple outputs are not compared
            self._seen.add(name)
            if self.reference is not None:
                a = self.reference.get(name)
                if a is not None and a.shape == output.shape:
                    self._sums[name] = _sums(a, output)
            if self.keep:
                t = output.detach()
                # A small view of a big tensor (a class token, one chunk) would keep the
                # whole storage alive: copied too, so a kept run holds at most twice its size.
                if copy or t.untyped_storage().nbytes() > 2 * t.numel() * t.element_size():
                    t = t.clone()
                self._kept[name] = (t, t._version)
            return None

        return hook

    def kept(self, run_id: int) -> KeptOutputs:
        """What this run kept, as float32 CPU tensors; outputs modified in place after all
        (the probe did not see it) are dropped."""
        out = {}
        for name, (t, version) in self._kept.items():
            if t._version != version:
                continue
            cpu = t.to(device="cpu", dtype=torch.float32)
            out[name] = (cpu, cpu._version)
        self._kept.clear()
        return KeptOutputs(run_id, out)

    def divergence(self) -> tuple[tuple[str, ...], list[float], list[float]]:
        """(modules, rel_l2, cosine) of the comparison, in this run's forward order."""
        if not self._sums:
            return (), [], []
        rows = torch.stack(list(self._sums.values())).cpu().tolist()  # one sync
        pairs = [_from_sums(*row) for row in rows]
        return tuple(self._sums), [p[0] for p in pairs], [p[1] for p in pairs]
