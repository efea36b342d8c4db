"""Files out of `analyse`: per image its NPZ and PNG figures (and TensorBoard records); for
the run summary.json and compare.json.

    DIR/<name>/<name>.npz             input, logits, activation/<module>, gradient/<module>,
                                      cam/<method>, grid/<method>, attention/<module>,
                                      attr/<method> (the layout: core.export.arrays);
                                      segmentation models: mask, the class per pixel of the
                                      input image (-1 where the crop left it out)
    DIR/<name>/cam_<method>.png       the CAM over the whole original picture, with its
                                      colour bar and the class and probability explained;
                                      what the centre crop left out is hatched
    DIR/<name>/attr_<method>.png      the same for each input attribution
    DIR/<name>/activation_<module>.png  per-channel normalised mosaic, with its grey scale

Every file is written under a temporary name and moved into place: a reader (or a resumed
run) never sees half a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inspector.batch.analyse.attention import attention_summary
from inspector.batch.analyse.metrics import metrics_document
from inspector.batch.inputs import Source
from inspector.batch.names import safe_name
from inspector.core.edits.spec import format_edit
from inspector.core.explain.catalog import ATTRIBUTION_METHODS, CAM_METHODS
from inspector.core.export.arrays import npz_arrays

MAX_OVERLAY_SIDE = 2048  # overlays of huge photos are written at most this large


def write_image_files(out: Path, name: str, loaded, source: Source, image, x, arrays, cams,
                      cam_layer: str | None, outcome, step: int, tb,
                      where: dict[str, str] | None = None) -> dict[str, str]:
    """One image's files in out/<name>/ (and its TensorBoard records at `step`); returns
    what summary.json lists: key -> path relative to `out`. `where`: what each map was
    computed at, where it is not `cam_layer` (the attention maps' blocks)."""
    import torch

    from inspector.batch.figures import figure_size, map_figure, mosaic_figure
    from inspector.core.explain.attributions import display_map
    from inspector.core.export.files import (
        as_channels,
        mosaic,
        mosaic_channels,
        overlay,
        save_npz,
        save_png,
    )

    def rel(path: Path) -> str:
        return path.relative_to(out).as_posix()

    folder = out / name
    files: dict[str, str] = {}
    input_hw = tuple(x.shape[-2:])
    npz = npz_arrays(x, arrays, cams, outcome.logits)  # the layout the window saves too
    if outcome.mask is not None:
        from inspector.core.tasks.segmentation import to_original

        npz["mask"] = to_original(outcome.mask, loaded.preprocess, image.size)
    files["npz"] = rel(save_npz(folder / f"{name}.npz", npz))

    # The maps over the whole original picture (at most MAX_OVERLAY_SIDE, small ones
    # enlarged so that their legend is legible), what the centre crop left out hatched.
    pre = loaded.preprocess
    size = figure_size(image.size, MAX_OVERLAY_SIDE)
    shown = np.asarray(_picture_at(image, size))
    display = pre.to_display(x)
    seen = pre.to_original(np.ones(input_hw, np.float32), size)
    label = _class_caption(loaded, outcome)
    if not loaded.pretrained:  # as the CLI's warning says: the picture alone must say it too
        label.append("random weights: an untrained network")
    for method, cam in cams.items():
        at = (where or {}).get(method, cam_layer)
        caption = [*label, f"{CAM_METHODS[method].title} at {at}"]
        fig = map_figure(shown, pre.to_original(cam, size), seen, caption)
        files[f"cam/{method}"] = rel(save_png(folder / f"cam_{safe_name(method)}.png",
                                              fig.image))
        if tb is not None:
            tb.image(f"cam/{method}", overlay(display, cam), step)
    for (kind, method), signed in arrays.items():
        if kind != "attr":
            continue
        shown_map = display_map(method, torch.from_numpy(signed)[None])[0]
        caption = [*label, f"{ATTRIBUTION_METHODS[method].title} (input attribution)"]
        fig = map_figure(shown, pre.to_original(shown_map, size), seen, caption)
        files[f"attr/{method}"] = rel(save_png(folder / f"attr_{safe_name(method)}.png",
                                               fig.image))
    for (kind, module), array in arrays.items():
        if tb is not None:
            tb.histogram(f"{kind}/{module}", array, step)
        if kind != "activation":
            continue  # gradients: in the NPZ and TensorBoard only
        channels = as_channels(array, input_hw)
        if channels is None:
            continue
        grid = mosaic(channels)
        count, shown_count = channels.shape[0], mosaic_channels(tuple(channels.shape))
        which = (f"{count} channels" if shown_count == count
                 else f"the first {shown_count} of {count} channels")
        title = f"{module}: {which}, each from its min (black) to its max (white)"
        if not loaded.pretrained:
            title += "; random weights (an untrained network)"
        files[f"mosaic/{module}"] = rel(save_png(folder / f"activation_{safe_name(module)}.png",
                                                 mosaic_figure(grid, title).image))
        if tb is not None:
            tb.image(f"activation/{module}", grid, step)
    if tb is not None:
        tb.image("input", display, step)
        tb.text("image", f"{step}: {source}", step)
    return files


def _picture_at(image, size: tuple[int, int]):
    """The original picture at a figure's size: each pixel repeated when it is enlarged by a
    whole factor (a 64-pixel image stays sharp), resampled when it is shrunk."""
    if size == image.size:
        return image
    enlarged = size[0] % image.size[0] == 0 and size[1] % image.size[1] == 0
    return image.resize(size, Image.Resampling.NEAREST if enlarged else Image.Resampling.BICUBIC)


def _class_caption(loaded, outcome) -> list[str]:
    """["circle 93.1%"]: the class the maps explain and the model's probability for it."""
    if outcome is None or outcome.target is None or outcome.logits is None:
        return []
    if loaded.task == "detection":
        d = outcome.detections[outcome.target]
        return [f"detection {outcome.target}: {d.label} {d.score:.1%}"]
    if loaded.task == "segmentation":
        return [f"{loaded.label(outcome.target)}, summed over its predicted pixels"]
    probs = outcome.logits.detach().float().reshape(-1).softmax(0)
    return [f"{loaded.label(outcome.target)} {float(probs[outcome.target]):.1%}"]


# -- the run's documents --------------------------------------------------------------------------


def edits_of(edits) -> list[dict[str, str]]:
    return [{"spec": format_edit(e), "description": e.describe()} for e in edits]


def summary_document(analysis, loaded, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json: the run's settings and one entry per input (`analysis`: batch.Analysis)."""
    a = analysis
    return {
        "model": loaded.name,
        "weights": loaded.source or None,
        "pretrained": loaded.pretrained,
        # The seed torch's generator had when the model was built (--seed): the same
        # seed gives the same random weights. None when every weight came from files.
        "seed": a.recorded_seed(loaded),
        "device": str(loaded.device),
        "cam_layer": a.cam_layer,
        "cam_methods": a.methods,
        # What attr/<method> in each NPZ holds, and with which settings.
        "attributions": None if not a.attributions else {
            "methods": a.attributions,
            "target": "the class the CAMs explain (see 'target' per image)",
            "values": "signed, per input channel, at the model input's resolution, not "
                      "scaled; saliency is |d score / d input|",
            "ig_baseline": "zeros (the all-zero model input, after normalisation)",
            **a.attribution_options.as_dict(),
        },
        "layers": a.layers,
        # How the attention maps (rollout, gradrollout, legrad), attention/NAME and the
        # logit lens were made (batch.analyse.attention).
        "attention": attention_summary(a.methods, a.attention, a.legrad_from),
        "target": a.target_text,
        # How 16-bit, 32-bit and float images became the input: their type's range
        # (false), or their own min..max stretched to the full range (true).
        "stretch": a.stretch,
        # Applied to every image: the NPZs, maps and predictions are the edited runs'.
        "edits": edits_of(a.edits),
        "compare": "compare.json" if a.compare else None,
        # --patch-sweep: what each image's "patch_sweep" holds.
        "patch_sweep": None if a.patch_sweep is None else {
            "source": a.patch_sweep,
            "modules": "the leaves" if a.sweep_depth is None else f"depth {a.sweep_depth}",
            "values": "per module in forward order, the explained class's logit and "
                      "probability of the image's run with that module's output taken from "
                      "its run on the source (one batched forward; see patch_reference)",
        },
        **metrics_document(a, loaded, entries),  # --metrics (batch.analyse.metrics)
        "images": entries,
    }


def comparison_document(analysis, loaded, images: list[dict[str, Any]]) -> dict[str, Any]:
    """compare.json: per image and captured module, the edited run against the unedited."""
    return {
        "model": loaded.name,
        "edits": edits_of(analysis.edits),
        "reference": "each image without the edits",
        "measures": {
            "rel_l2": "||after - before|| / ||before|| over the module's whole output "
                      "(its first call); null where before is all zero and after not",
            "cosine": "cosine similarity of the two outputs; null where one is all zero",
        },
        "layers": analysis.layers,
        "images": images,
    }


def write_json(out: Path, name: str, value: Any) -> None:
    tmp = out / f"{name}.part"
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    tmp.replace(out / name)
