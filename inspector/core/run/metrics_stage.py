"""A run's faithfulness metrics (RunRequest.metrics), the last part of its explain stage.

Every map the run made is scored: each CAM as its CamFrame shows it, each attribution as
the sum over input channels of its absolute value (core.explain.metrics.maps). The
perturbed forwards run inside explain's EditHooks, so the numbers describe the model the
run showed (its edits on); the sanity check then randomises a deep copy of the model made
after the capture's and the edits' hooks are gone, with the run's edits put on the copy.
One progress step, "Faithfulness", counts every forward, solve and remade map; a cancel
stops it between two of them. A stop of the scoring alone (Session.stop_scoring: the
Faithfulness tab's Cancel) ends it there too, but the run goes on to finish well: the maps
scored whole so far keep their scores (a map's sanity check not reached says so in its
note), the others get none, and the run's RunFinished says how many of how many. A model
whose output the metrics cannot read (not class scores) leaves every map's scores undefined
with that sentence: the run and its maps stay.
Each map's scores go to the outcome and, as a MetricsFrame, to the channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from inspector.core import tasks
from inspector.core.edits.hooks import EditHooks
from inspector.core.explain.catalog import ATTENTION_CAMS, ATTRIBUTION_LAYER, cam_method
from inspector.core.explain.metrics.forwards import Forwarder, StopScoring
from inspector.core.explain.metrics.maps import attribution_saliency, is_constant
from inspector.core.explain.metrics.names import SANITY
from inspector.core.explain.metrics.pointing import load_mask
from inspector.core.explain.metrics.results import MapScores
from inspector.core.explain.metrics.sanity import (
    CannotCopy,
    flagged,
    randomisation_units,
    sanity_check,
)
from inspector.core.explain.metrics.sanity_maps import (
    attention_maps_of,
    attribution_maps,
    cam_maps,
)
from inspector.core.explain.metrics.score_maps import (
    PointingBoxes,
    iter_scores,
    map_title,
    score_phases,
)
from inspector.core.explain.metrics.scores import (
    class_probability,
    detection_score,
    score_text,
    segmentation_probability,
)
from inspector.core.hookset import RunCancelled
from inspector.core.records.frames import MetricsFrame

STEP = "Faithfulness"
CLASSIFIERS_ONLY = "the sanity check remakes maps of classifiers only"
SANITY_STOPPED = "the scoring was cancelled before this map's sanity check"


@dataclass
class Scored:
    """What the perturbation metrics left for the sanity check and the frames."""

    maps: dict[tuple[str, str], np.ndarray]  # what was to be scored, by (method, layer)
    scores: dict[tuple[str, str], MapScores]  # the maps scored (all of them unless stopped)
    forwarder: Forwarder | None
    units: list | None  # the sanity check's, when asked
    stopped: bool = False  # the scoring was stopped (StopScoring) before its end


def run_maps(run) -> dict[tuple[str, str], np.ndarray]:
    """The maps the metrics score, by (method, layer) as the run's CamFrames are keyed."""
    maps = dict(run.outcome.cams)
    for name, signed in run.outcome.attributions.items():
        maps[(name, ATTRIBUTION_LAYER)] = attribution_saliency(signed)
    return maps


def _scorer(run):
    """(the Scorer of the run's target, the input's own score when the run has it)."""
    loaded, outcome, target = run.loaded, run.outcome, run.target
    if loaded.task == tasks.DETECTION:
        found = outcome.detections[target]
        return detection_score(loaded.model, found.box, found.class_index), found.score
    if loaded.task == tasks.SEGMENTATION:
        return segmentation_probability(loaded.model, target, outcome.mask == target), None
    scorer = class_probability(loaded.model, int(target))
    logits = outcome.logits
    # Only read as a probability once the output is known to be class scores (the scorer
    # says otherwise in its own words).
    p0 = (float(logits.float().softmax(-1)[0, target])
          if logits is not None and logits.ndim == 2 and logits.shape[1] >= 2 else None)
    return scorer, p0


def perturbation_scores(run, progress) -> Scored:
    """Deletion, insertion, Average Drop, ROAD and the pointing game of every map of the
    run (inside explain's EditHooks); `progress` is the run's reporter for STEP."""
    options = run.request.metrics
    maps = run_maps(run)
    x = run.x.detach()
    units = None
    if options.asks(SANITY) and run.loaded.task == tasks.CLASSIFICATION:
        units = randomisation_units(run.loaded.model, run.tree)
    try:
        scorer, p0 = _scorer(run)
    except ValueError as e:
        return Scored(maps, {k: MapScores(undefined=str(e)) for k in maps}, None, None)
    scored = sum(not is_constant(m) for m in maps.values())  # constant maps: undefined
    phases = score_phases(options, scored, x, p0 is not None)
    if units:
        phases[SANITY] = len(units) * scored
    forwarder = Forwarder(scorer, x, options.batch_size, progress, sum(phases.values()),
                          phases)
    scores, stopped = {}, False
    try:
        for key, found in iter_scores(forwarder, x, maps, options, p0=p0,
                                      boxes=_pointing_boxes(run)):
            scores[key] = found
    except StopScoring:
        stopped = True
    except ValueError as e:  # the output is not what the score reads
        scores = {k: MapScores(undefined=str(e)) for k in maps}
        units = None
    return Scored(maps, scores, forwarder, units, stopped)


def _pointing_boxes(run) -> PointingBoxes | None:
    """The request's boxes or mask for the pointing game, and how a map reaches the picture."""
    request = run.request
    if not request.metric_boxes and not request.metric_mask:
        return None
    size = run.size
    to_picture = ((lambda m: run.loaded.preprocess.to_original(m, size))
                  if size is not None else (lambda m: np.asarray(m, np.float32)))
    if not request.metric_mask:
        return PointingBoxes(request.metric_boxes, to_picture)
    try:
        return PointingBoxes((), to_picture, mask=load_mask(request.metric_mask))
    except ValueError as e:
        return PointingBoxes((), to_picture, unreadable=str(e))


def finish(run, scored: Scored) -> None:
    """The sanity check (when asked; after the run's hooks are gone), then the outcome and
    the MetricsFrames."""
    options = run.request.metrics
    if options.asks(SANITY):
        if not scored.stopped:
            _sanity(run, scored)
        if scored.stopped:
            for s in scored.scores.values():
                if s.undefined is None and not s.sanity:
                    s.notes.setdefault(SANITY, SANITY_STOPPED)
    if scored.stopped:
        done, of = len(scored.scores), len(scored.maps)
        run.scoring_stopped = (done, of)
        run.outcome.notes.append(f"the scoring was cancelled: {done} of {of} maps scored")
    for key, scores in scored.scores.items():
        run.outcome.metrics[key] = scores
        method, layer = key
        run.put(MetricsFrame(run.run_id, method, layer, run.target, scores, options,
                             score_text(run.loaded.task), _shown(run, key)))


def _shown(run, key) -> np.ndarray | None:
    """The map the window shows for `key` (its CamFrame's)."""
    method, layer = key
    if layer != ATTRIBUTION_LAYER:
        return run.outcome.cams.get(key)
    from inspector.core.explain.attributions import display_map

    signed = run.outcome.attributions[method]
    return display_map(method, torch.from_numpy(signed)[None])[0]


def _sanity(run, scored: Scored) -> None:
    """The sanity check of every defined map: the gradient and activation CAMs of a layer
    together (replaying the forward below the randomised units), Score-CAM, the attention
    maps and the attributions (which need the whole forward) apart. A group whose maps
    cannot be remade says why in its maps' sanity note; the other metrics stay."""
    options, loaded = run.request.metrics, run.loaded
    defined = {k: scored.maps[k] for k, s in scored.scores.items() if s.undefined is None}
    if loaded.task != tasks.CLASSIFICATION or scored.forwarder is None:
        for key in defined:
            scored.scores[key].notes.setdefault(SANITY, CLASSIFIERS_ONLY
                                                if loaded.task != tasks.CLASSIFICATION
                                                else "the sanity check was not run")
        return
    x, target, tree = run.x.detach(), int(run.target), run.tree
    groups: dict[Any, dict] = {}
    for method, layer in defined:
        if layer == ATTRIBUTION_LAYER:
            group = ("attributions", None)
        elif cam_method(method) in ATTENTION_CAMS:
            group = ("attention", layer)  # layer: None, or where LeGrad starts
        elif cam_method(method) == "scorecam":
            group = ("scorecam", layer)
        else:
            group = ("cams", layer)
        groups.setdefault(group, {})[(method, layer)] = defined[(method, layer)]
    req = run.request

    def wrap(model):
        return EditHooks(model, req.interventions, run.run_id, run.cancel)

    for g, ((kind, layer), originals) in enumerate(groups.items()):
        methods = [m for m, _ in originals]
        titles = ", ".join(map_title(key) for key in originals)
        scored.forwarder.begin(SANITY, f"sanity check of {titles} ({g + 1} of {len(groups)})")
        if kind == "attributions":
            explain = attribution_maps(x, methods, target, req.attribution_options)
        elif kind == "attention":
            explain = attention_maps_of(x, methods, target, req.attention, legrad_from=layer)
        else:
            explain = cam_maps(x, methods, layer, target, tree)
        try:
            steps = sanity_check(loaded.model, x,
                                 lambda m, e=explain, at=layer, k=kind: _keyed(e(m), at, k),
                                 originals, tree=tree, seed=options.seed,
                                 replay_before=layer if kind == "cams" else None, wrap=wrap,
                                 advance=scored.forwarder.advance, units=scored.units)
        except CannotCopy as e:
            for key in originals:
                scored.scores[key].notes[SANITY] = str(e)
            continue
        except StopScoring:
            scored.stopped = True  # this group and those after it keep no sanity check
            return
        except RunCancelled:
            raise
        except Exception as e:  # noqa: BLE001 - one metric failing keeps the others' results
            for key in originals:
                scored.scores[key].notes[SANITY] = (f"the map could not be made again on the "
                                                    f"randomised model ({type(e).__name__}: "
                                                    f"{e})")
            continue
        for key, found in steps.items():
            scored.scores[key].sanity = found
            scored.scores[key].sanity_flag = flagged(found, options.sanity_flag)


def _keyed(maps: dict[str, np.ndarray], layer: str | None, kind: str
           ) -> dict[tuple[str, str | None], np.ndarray]:
    """The remade maps keyed as the run's: attributions at ATTRIBUTION_LAYER, the others at
    their own layer (None for the attention maps that read none)."""
    at = ATTRIBUTION_LAYER if kind == "attributions" else layer
    return {(m, at): v for m, v in maps.items()}
