"""Every metric asked for, for every map of one image, a map at a time: its ROAD (the
solves dominate), its deletion and insertion, its Average Drop, then its pointing game (no
forward). A map is whole before the next begins, so that a stop (forwards.StopScoring,
"Cancel" in the Faithfulness tab) keeps every map scored so far; the cost is that maps do
not share the curves' batches, and the all-baseline inputs are scored once per map (one or
two forwards more each). The sanity check makes maps again on a randomised copy of the
model: the Session runs it after these (its own copy, without the run's hooks;
core.run.metrics_stage), on the same Forwarder's progress.

A constant map has no order to test: its scores are undefined, said in one sentence
(maps.constant_reason), never NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from inspector.core.explain.catalog import METHODS
from inspector.core.explain.metrics.confidence import confidence_change
from inspector.core.explain.metrics.curves import curve_forwards, deletion_insertion
from inspector.core.explain.metrics.forwards import Forwarder
from inspector.core.explain.metrics.maps import constant_reason, is_constant
from inspector.core.explain.metrics.names import (
    AVGDROP,
    DELETION,
    INSERTION,
    POINTING,
    ROAD,
    MetricOptions,
)
from inspector.core.explain.metrics.pointing import pointing, pointing_in_mask
from inspector.core.explain.metrics.results import MapScores
from inspector.core.explain.metrics.road import road, road_work

NO_BOXES = "no boxes were given for this image"


@dataclass(frozen=True)
class PointingBoxes:
    """The object's boxes for the pointing game, in the picture's own pixels, and how a map
    at the model input's size is laid onto the picture (Preprocess.to_original)."""

    boxes: Sequence[Sequence[float]]
    to_picture: Callable[[np.ndarray], np.ndarray]
    mask: np.ndarray | None = None  # the object's mask (picture pixels) instead of boxes
    unreadable: str | None = None  # why the mask asked for could not be read


def method_of(key: Any) -> str:
    """The method a map's key names: (method, layer) as the Session keys maps, or a name."""
    return key[0] if isinstance(key, tuple) else str(key)


def score_phases(options: MetricOptions, maps: int, x: torch.Tensor, p0_known: bool
                 ) -> dict[str, int]:
    """The progress units score_maps reports for `maps` maps of x (not the sanity check's),
    by phase (Forwarder.begin), in the order they run."""
    positions = x.shape[-2] * x.shape[-1]
    needs_p0 = options.asks(DELETION) or options.asks(INSERTION) or options.asks(AVGDROP)
    phases = {}
    if options.asks(ROAD):
        phases[ROAD] = maps * road_work(options.road_percentiles)
    curves = 1 if needs_p0 and not p0_known and maps else 0
    if options.asks(DELETION) or options.asks(INSERTION):
        same = options.deletion_baseline == options.insertion_baseline
        curves += maps * curve_forwards(1, positions, options.steps, same)
    if options.asks(AVGDROP):
        curves += maps
    if curves:
        phases[DELETION] = curves
    return phases


def map_title(key: Any) -> str:
    method = method_of(key)
    return METHODS[method].title if method in METHODS else method


def score_maps(forwarder: Forwarder, x: torch.Tensor, maps: Mapping[Any, np.ndarray],
               options: MetricOptions, *, p0: float | None = None,
               boxes: PointingBoxes | None = None) -> dict[Any, MapScores]:
    """MapScores per key of `maps` ((H, W) maps in [0, 1] at x's size), the sanity check's
    fields left empty. x is the (1, C, H, W) model input; p0 its score, when the run has it."""
    return dict(iter_scores(forwarder, x, maps, options, p0=p0, boxes=boxes))


def iter_scores(forwarder: Forwarder, x: torch.Tensor, maps: Mapping[Any, np.ndarray],
                options: MetricOptions, *, p0: float | None = None,
                boxes: PointingBoxes | None = None) -> Iterator[tuple[Any, MapScores]]:
    """(key, MapScores) of each map in turn, as score_maps; a StopScoring raised by the
    forwarder's progress ends it with the maps yielded so far whole."""
    curves = options.asks(DELETION) or options.asks(INSERTION)
    needs_p0 = curves or options.asks(AVGDROP)
    defined = [key for key, m in maps.items() if not is_constant(m)]
    for key, m in maps.items():
        scores = MapScores()
        if key not in defined:
            scores.undefined = constant_reason(method_of(key))
            yield key, scores
            continue
        m = np.asarray(m, dtype=np.float32)
        of = f"{map_title(key)} ({defined.index(key) + 1} of {len(defined)})"
        # ROAD first: its solves are the slow part, and the time left is best judged at its
        # pace (forwards.Forwarder).
        if options.asks(ROAD):
            forwarder.begin(ROAD, f"scoring {of}")
            scores.road_morf, scores.road_lerf = road(
                forwarder, x, m, percentiles=options.road_percentiles,
                noise=options.road_noise, seed=options.seed)
        forwarder.begin(DELETION, f"deletion and insertion of {of}")
        if p0 is None and needs_p0:
            with torch.inference_mode():
                p0 = float(forwarder.score(x[:1])[0])
        one = torch.from_numpy(m)[None]
        if curves:
            (deletion, insertion), = deletion_insertion(
                forwarder, x, one, steps=options.steps,
                deletion_baseline=options.deletion_baseline,
                insertion_baseline=options.insertion_baseline, p0=p0)
            scores.deletion = deletion if options.asks(DELETION) else None
            scores.insertion = insertion if options.asks(INSERTION) else None
        if options.asks(AVGDROP):
            (scores.avg_drop, scores.increase), = confidence_change(forwarder, x, one, p0)
        if options.asks(POINTING):
            _point(scores, m, boxes, options.pointing_tolerance)
        yield key, scores


def _point(scores: MapScores, m: np.ndarray, boxes: PointingBoxes | None,
           tolerance: int) -> None:
    if boxes is None or (not boxes.boxes and boxes.mask is None):
        scores.notes[POINTING] = boxes.unreadable if boxes and boxes.unreadable else NO_BOXES
        return
    if boxes.mask is None:
        found = pointing(boxes.to_picture(m), boxes.boxes, tolerance)
    else:
        try:
            found = pointing_in_mask(boxes.to_picture(m), boxes.mask, tolerance)
        except ValueError as e:  # the mask's size is not the picture's
            scores.notes[POINTING] = str(e)
            return
    scores.pointing, scores.energy_pointing = found.hit, found.energy
    reason = found.undefined or found.note
    if reason:
        scores.notes[POINTING] = reason
