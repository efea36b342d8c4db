"""`analyse --patch-sweep PATH [--sweep-depth N]`: the option checked before the model loads,
and each image's sweep (core.compare.patch_sweep, on the Session's worker) as its summary.json
entry's "patch_sweep" (per module in forward order: the explained class's logit and
probability with that module's output from PATH's run) and "patch_reference".
"""

from __future__ import annotations

from typing import Any


def check_sweep_source(path: str | None, depth: int | None) -> tuple[str | None, int | None]:
    """--patch-sweep PATH and --sweep-depth N, checked before the model loads: ValueError
    (exit status 2) for a source that cannot be read, or a depth without a sweep."""
    if path is None:
        if depth is not None:
            raise ValueError("--sweep-depth sets the modules of --patch-sweep: give "
                             "--patch-sweep PATH")
        return None, None
    from inspector.core.inputs.images import ImageLoadError, load_image

    try:
        load_image(path)
    except ImageLoadError as e:
        raise ValueError(f"--patch-sweep {path}: {e.reason}") from None
    if depth is not None and depth < 1:
        raise ValueError(f"--sweep-depth counts from 1 (the model's children), not {depth}")
    return str(path), depth


def sweep_entries(session, job, x, target) -> dict[str, Any]:
    """The image's "patch_sweep" and "patch_reference" (job: image.ImageJob; x: the
    image's model input; target: the class its run explained); a ValueError from the sweep
    is the image's error (analyse_image)."""
    from inspector.core.run.sweep_job import submit_patch_sweep

    sweep = submit_patch_sweep(session, job.patch_sweep, x, depth=job.sweep_depth,
                               target=target, edits=job.edits, stretch=job.stretch).result()
    return {"patch_sweep": sweep.entries(), "patch_reference": sweep.reference(job.patch_sweep)}


def check_sweep(a, loaded, tree, edits) -> None:
    """--patch-sweep with this model: a classifier, modules to patch, no patch edit."""
    from inspector.core.compare.patch_sweep import sweep_modules
    from inspector.core.edits.patching import has_patches

    if loaded.task != "classification":
        raise ValueError(f"--patch-sweep records a class's logit: {loaded.name} is a "
                         f"{loaded.task} model")
    if has_patches(edits):
        raise ValueError("--patch-sweep cannot be combined with a patch edit "
                         "(--edit MODULE:patch=...): give one or the other")
    sweep_modules(tree, a.sweep_depth)  # ValueError: nothing at that depth
