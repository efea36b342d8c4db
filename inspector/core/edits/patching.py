"""The patch edit: a module's output on this run replaced by its output on another image
(`layer3:patch=other.png`), the same model; activation patching between two inputs.

`PatchFrom` is the edit as written: it names the module and the source image. Before a run
that has one, the worker resolves it (`resolve_patches`): the source image is read and
prepared with the model's own preprocessing, the model runs on it (no gradients, eval mode,
with the run's other edits, so that the two runs differ only in the image), and the
module's output at each of its calls is kept. The edit becomes a `ReplaceOutput`, which
returns the kept output at the same call of this run. The two images must give outputs of
one shape (a classifier's centre crop always does; detection and segmentation models resize
each image): otherwise the run fails with a sentence that says so.

The kept output is a constant: no gradient flows above a patched module into it (what it
computed is not used). A patched output still carries a zero gradient to the module, so that a
backward to the model input (CAMs, gradients) has a path and says 0 there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from inspector.core.edits.hooks import EditHooks
from inspector.core.edits.interventions import Intervention
from inspector.core.hookset import HookSet, ModelState


@dataclass(frozen=True)
class PatchFrom(Intervention):
    """The module's output replaced by its output on the image at `source` (resolved by
    resolve_patches before the run)."""

    source: str = ""

    def describe(self) -> str:
        return f"patch {self.where} with its output on {os.path.basename(self.source)}"

    def edit_output(self, output, run_id):
        raise RuntimeError(f"the patch of {self.where} from {self.source} was not resolved: "
                           f"runs resolve it before the forward (core.edits.patching)")


@dataclass(frozen=True)
class ReplaceOutput(Intervention):
    """The module's output at its k-th call of a forward replaced by outputs[k]."""

    source: str = ""
    outputs: tuple[torch.Tensor, ...] = field(default=(), compare=False, repr=False)
    # Calls seen, over every forward of the run: a run's later forwards (Score-CAM) count on.
    _calls: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)

    def describe(self) -> str:
        return f"patch {self.where} with its output on {os.path.basename(self.source)}"

    def edit_output(self, output, run_id):
        k = self._calls[0] % max(1, len(self.outputs))
        self._calls[0] += 1
        stored = self.outputs[k]
        if tuple(stored.shape) != tuple(output.shape):
            raise ValueError(
                f"patch: '{self.where}' outputs {_shape(stored)} on "
                f"{os.path.basename(self.source)} but {_shape(output)} here: the two images "
                f"must give outputs of one shape (detection and segmentation models resize "
                f"each image)")
        new = stored.to(device=output.device, dtype=output.dtype, copy=True)
        if output.requires_grad:
            # A zero gradient into the module, so that the graph below stays connected.
            new = new + (output * 0).nan_to_num(0.0, 0.0, 0.0)
        return new


def _shape(t: torch.Tensor) -> str:
    return "\u00d7".join(str(s) for s in t.shape)


def has_patches(edits) -> bool:
    return any(isinstance(e, PatchFrom) for e in edits)


def resolve_patches(loaded, edits: tuple[Intervention, ...], stretch: bool = False,
                    run_id: int = 0) -> tuple[Intervention, ...]:
    """`edits` with each PatchFrom replaced by the ReplaceOutput of its source image (see the
    module docstring); ValueError, one sentence, for a source that cannot be read or a
    module that the source's run never reaches."""
    from inspector.core.inputs.images import ImageLoadError, load_image

    patches = [e for e in edits if isinstance(e, PatchFrom)]
    if not patches:
        return edits
    others = [e for e in edits if not isinstance(e, PatchFrom)]
    resolved: dict[int, ReplaceOutput] = {}
    for source in dict.fromkeys(p.source for p in patches):
        try:
            x = loaded.preprocess(load_image(source, stretch=stretch))[None].to(loaded.device)
        except ImageLoadError as e:
            raise ValueError(f"patch from {source}: {e.reason}") from None
        mine = [p for p in patches if p.source == source]
        try:
            outputs = _outputs(loaded, x, [p.module for p in mine], others, run_id)
        except ValueError:
            raise
        except Exception as e:  # a hook or the model failed on the source: said as the edit's
            raise ValueError(f"patch from {source}: the run on it failed: "
                             f"{type(e).__name__}: {e}") from e
        for p in mine:
            if not outputs[p.module]:
                raise ValueError(f"patch: '{p.where}' did not run on {source}")
            resolved[id(p)] = ReplaceOutput(p.module, source=source,
                                            outputs=tuple(outputs[p.module]))
    return tuple(resolved.get(id(e), e) for e in edits)


def _outputs(loaded, x: torch.Tensor, modules: list[str], others, run_id: int
             ) -> dict[str, list[torch.Tensor]]:
    """Each module's output at each call, on input x, with the other edits on."""
    from inspector.core import tasks

    found = dict(loaded.model.named_modules())
    unknown = [m for m in modules if m not in found]
    if unknown:
        raise ValueError(f"patch: no module named '{unknown[0]}' in {loaded.name}")
    kept: dict[str, list[torch.Tensor]] = {m: [] for m in modules}

    def keeper(name: str):
        def hook(mod, args, output):
            if not isinstance(output, torch.Tensor):
                raise ValueError(f"patch: '{name or 'the model output'}' returns "
                                 f"{type(output).__name__}, not one tensor")
            kept[name].append(output.detach().clone())

        return hook

    with ModelState(loaded.model, training=False), torch.no_grad(), \
            EditHooks(loaded.model, others, run_id), HookSet() as hooks:
        for name in modules:
            hooks.forward(found[name], keeper(name))
        tasks.forward(loaded.task, loaded.model, x)
    return kept
