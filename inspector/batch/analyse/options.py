"""analyse's options that need the model, checked once it is loaded and before any image is
read (the target, the CAM layer, the layers, the edits: an option that cannot work is one
line and exit status 2), and the run written as a script (--emit-script).
"""

from __future__ import annotations

from typing import Any

from inspector.batch.analyse.metrics import check_metric_model
from inspector.batch.names import unknown_modules
from inspector.core.edits.interventions import Intervention


def check_options(a, session, loaded
                  ) -> tuple[Any, str | None, list[str], tuple[Intervention, ...]]:
    """(target, CAM layer, layers captured, edits completed) of `a` (a batch.analyse.Analysis)
    for the model `session` loaded; ValueError, one line, for an option that cannot work."""
    from inspector.core.explain.cam.targets import resolve_target

    task_target = str(a.target_text or "").lower().startswith(("det:", "seg:"))
    if loaded.task == "classification" and not task_target:
        target = resolve_target(a.target_text, loaded.categories)
    else:  # det:K, seg:CLASS (core.tasks)
        from inspector.core.explain.cam.targets import parse_target

        target = parse_target(str(a.target_text), loaded.task, loaded.categories, loaded.model)
    from inspector.core.explain.catalog import ATTENTION_CAMS

    cam_layer = a.cam_layer
    # The attention maps read no layer (--cam-layer is LeGrad's first block).
    layer_cams = [m for m in a.methods if m not in ATTENTION_CAMS]
    if layer_cams:
        cam_layer = cam_layer or session.default_cam_layer()
        if cam_layer is None:
            raise ValueError(f"{loaded.name} has no layer a CAM can be computed from: "
                             f"name one with --cam-layer, or --cam none")
    layers = a.layers or ([cam_layer] if cam_layer and layer_cams else [])
    tree = session.tree
    unknown = [n for n in [*layers, cam_layer] if n and n not in tree.modules]
    if unknown:
        raise ValueError(unknown_modules(unknown, tree))
    if a.metrics is not None:
        check_metric_model(loaded, tree)
    edits = session.check_edits(a.edits)
    if a.patch_sweep is not None:
        from inspector.batch.analyse.sweep import check_sweep

        check_sweep(a, loaded, tree, edits)
    return target, cam_layer, layers, edits


def write_script(a, loaded) -> bool:
    """--emit-script: the standalone script of `a`'s runs (core.script.export) at
    a.emit_script, before any image is read; False (said through a.warn) when it cannot be
    written."""
    from inspector.core.models.script_code import ScriptExportError
    from inspector.core.run.request import RunRequest
    from inspector.core.script.export import script_for

    request = RunRequest(image=None, capture=a.capture, target=a.target,
                         interventions=a.edits, stretch=a.stretch)
    try:
        text = script_for(loaded, request)
        a.emit_script.write_text(text, encoding="utf-8")
    except ScriptExportError as e:
        a.warn(f"cannot write the run as a script: {e}")
        return False
    except OSError as e:
        a.warn(f"cannot write {a.emit_script}: {e.strerror or e}")
        return False
    return True
