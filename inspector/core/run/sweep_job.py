"""A patch sweep (core.compare.patch_sweep) run by a Session, on its worker thread: the one that
owns the model. `analyse --patch-sweep` and the window's "Patch sweep from A" call it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from inspector.core.compare.patch_sweep import PatchSweep, patch_sweep, sweep_modules
from inspector.core.edits.patching import PatchFrom, ReplaceOutput

TAG = "patch-sweep"  # the worker's tag for these jobs: Session.worker.cancel(TAG) stops one


def submit_patch_sweep(session, image_a: Any, image_b: Any, depth: int | None = None,
                       target: int | None = None, edits=(), stretch: bool = False) -> Future:
    """Queue a sweep of the loaded model's leaves (or its modules at `depth`), patching from
    image A into the run on image B (each a path, a picture, a PreparedImage or a model-input
    tensor, as a run takes them); the future's result is a PatchSweep, its exception a
    ValueError in one sentence for a sweep that cannot be made."""
    edits = tuple(edits)
    if any(isinstance(e, (PatchFrom, ReplaceOutput)) for e in edits):
        raise ValueError("a patch sweep cannot be combined with a patch edit: remove the "
                         "patch edit, or the sweep")

    def job(cancel: threading.Event) -> PatchSweep:
        loaded, tree = session.loaded, session.tree
        if loaded is None or tree is None:
            raise ValueError("no model is loaded yet")
        if loaded.task != "classification":
            raise ValueError(f"a patch sweep records a class's logit: {loaded.name} is a "
                             f"{loaded.task} model")
        modules, notes = sweep_modules(tree, depth)
        a = model_input(loaded, image_a, stretch)
        b = model_input(loaded, image_b, stretch)
        return patch_sweep(loaded.model, a, b, modules, target=target, edits=edits,
                           cancel=cancel, notes=notes)

    return session.worker.submit(job, tag=TAG)


def model_input(loaded, image: Any, stretch: bool = False):
    """(1, 3, H, W) on the model's device, prepared as a run prepares its image
    (core.run.stages.prepare_input)."""
    from inspector.core.run import stages
    from inspector.core.run.request import RunRequest

    run = stages.InFlight(0, RunRequest(image=image, stretch=stretch), loaded,
                          put=lambda frame: None, cancel=threading.Event(), outcome=None)
    stages.prepare_input(run)
    return run.x.to(loaded.device)
