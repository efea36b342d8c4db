"""The outputs a Session keeps between runs, for comparisons (core.compare.divergence).

The outputs of the last `limit` runs that asked to keep them (RunRequest.keep_outputs),
least recently used first: a run compared with counts as used. They outlive a model load
(run B may be another weights file), and are float32 CPU tensors: one kept run of resnet18
at 224 x 224, every leaf, is about 26 MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from inspector.core.compare.divergence import KEPT_RUNS, KeptOutputs, OutputRecorder
from inspector.core.models.tree import OUTPUT_MODIFIED_INPLACE, ModuleTree
from inspector.core.run.capture_spec import CaptureSpec


class KeptRuns:
    """Kept outputs by run id; safe to use from the worker and the caller's thread."""

    def __init__(self, limit: int = KEPT_RUNS) -> None:
        self.limit = limit
        self._runs: OrderedDict[int, KeptOutputs] = OrderedDict()
        self._lock = threading.Lock()

    def runs(self) -> tuple[int, ...]:
        """The runs kept, least recently used first."""
        with self._lock:
            return tuple(self._runs)

    def outputs(self, run_id: int) -> dict[str, torch.Tensor] | None:
        """A kept run's outputs (module -> tensor, forward order), or None."""
        with self._lock:
            kept = self._runs.get(run_id)
        return None if kept is None else kept.as_dict()

    def forget(self, run_id: int | None = None) -> None:
        """Drop a run's kept outputs (None: every run's)."""
        with self._lock:
            if run_id is None:
                self._runs.clear()
            else:
                self._runs.pop(run_id, None)

    def use(self, run_id: int) -> KeptOutputs | None:
        """A run's kept outputs to compare with, now the most recently used; None if gone."""
        with self._lock:
            kept = self._runs.get(run_id)
            if kept is not None:
                self._runs.move_to_end(run_id)
            return kept

    def keep(self, kept: KeptOutputs) -> None:
        """Keep a run's outputs, dropping the least recently used beyond `limit`."""
        with self._lock:
            self._runs[kept.run_id] = kept
            while len(self._runs) > max(self.limit, 0):
                self._runs.popitem(last=False)

    def recorder(self, keep: bool, compare_with: int | None, spec: CaptureSpec,
                 tree: ModuleTree | None, notes: list[str]) -> OutputRecorder | None:
        """The hooks that keep a run's outputs and/or compare them with the kept run
        `compare_with` (core.compare.divergence); None when the run asks for neither. A comparison that
        cannot be made is not an error (the run itself is fine): it adds a line to `notes`."""
        reference = None
        if compare_with is not None:
            reference = self.use(compare_with)
            if reference is None:
                notes.append(
                    f"no comparison with run {compare_with}: its outputs are not kept "
                    f"(only the last {self.limit} runs that keep outputs are)")
        if not keep and reference is None:
            return None
        modules = spec.names()
        # Outputs the model modifies in place later in the forward are copied in the hook;
        # the others are kept by reference (see core.compare.divergence). Without a tree, copy all.
        copy = modules if tree is None else {
            m for m in modules if m not in tree or OUTPUT_MODIFIED_INPLACE in tree[m].hazards}
        return OutputRecorder(modules, keep=keep, copy=copy, reference=reference)
