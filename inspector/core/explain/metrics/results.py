"""One map's faithfulness scores on one image (MapScores), and how analyse's summary.json
writes them: only the keys of the metrics asked for, no NaN (a value that is undefined is
null, with the reason beside it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inspector.core.explain.metrics.curves import Curve
from inspector.core.explain.metrics.names import (
    AVGDROP,
    DELETION,
    INSERTION,
    POINTING,
    ROAD,
    SANITY,
)
from inspector.core.explain.metrics.sanity import SanityStep

DIGITS = 6


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), DIGITS)


@dataclass
class MapScores:
    """What each metric found for one map; None where it was not asked or is undefined."""

    deletion: Curve | None = None
    insertion: Curve | None = None
    avg_drop: float | None = None
    increase: bool | None = None
    road_morf: Curve | None = None
    road_lerf: Curve | None = None
    sanity: list[SanityStep] | None = None
    sanity_flag: bool | None = None
    pointing: bool | None = None
    energy_pointing: float | None = None
    undefined: str | None = None  # why no metric is defined for this map (a constant map)
    notes: dict[str, str] = field(default_factory=dict)  # metric -> why it has no value

    @property
    def road(self) -> float | None:
        """ROAD combined: (mean LeRF - mean MoRF) / 2, higher is better."""
        if self.road_morf is None or self.road_lerf is None:
            return None
        return (self.road_lerf.mean - self.road_morf.mean) / 2

    @property
    def sanity_similarity(self) -> float | None:
        """Spearman's correlation with the original map at the last step, every unit random
        (a constant map counts 0: nothing of the original order is left); lower is better."""
        if not self.sanity:
            return None
        last = self.sanity[-1].spearman
        return 0.0 if last is None else last

    def as_json(self, asked: Iterable[str]) -> dict[str, Any]:
        """The summary.json entry of this map: the keys of the metrics `asked`."""
        asked = set(asked)
        out: dict[str, Any] = {}
        if DELETION in asked:
            out["deletion"] = None if self.deletion is None else _round(self.deletion.auc)
            out["deletion_curve"] = None if self.deletion is None else self.deletion.points()
        if INSERTION in asked:
            out["insertion"] = None if self.insertion is None else _round(self.insertion.auc)
            out["insertion_curve"] = None if self.insertion is None else self.insertion.points()
        if AVGDROP in asked:
            out["avg_drop"] = _round(self.avg_drop)
            out["increase"] = self.increase
        if ROAD in asked:
            out["road_morf"] = None if self.road_morf is None else self.road_morf.points()
            out["road_lerf"] = None if self.road_lerf is None else self.road_lerf.points()
        if SANITY in asked:
            out["sanity"] = None if self.sanity is None else [
                {"layer": s.layer, "spearman": _round(s.spearman), "ssim": _round(s.ssim)}
                for s in self.sanity]
            out["sanity_flag"] = self.sanity_flag
        if POINTING in asked:
            out["pointing"] = self.pointing
            out["energy_pointing"] = _round(self.energy_pointing)
        if self.undefined:
            out["undefined"] = self.undefined
        notes = {k: v for k, v in self.notes.items() if k in asked}
        if notes:
            out["notes"] = notes
        return out


def _curve(points, auc: float | None, baseline: str = "") -> Curve | None:
    if points is None:
        return None
    array = np.asarray(points, dtype=np.float32).reshape(-1, 2)
    fractions, scores = array[:, 0], array[:, 1]
    if auc is None:
        auc = float(np.sum(np.diff(fractions) * (scores[1:] + scores[:-1]) / 2))
    return Curve(fractions, scores, float(auc), baseline)


def scores_from_json(entry: dict[str, Any]) -> MapScores:
    """A map's MapScores read back from its summary.json entry (as_json), curves rounded as
    written there: what a resumed run's summary is made from."""
    sanity = entry.get("sanity")
    return MapScores(
        deletion=_curve(entry.get("deletion_curve"), entry.get("deletion")),
        insertion=_curve(entry.get("insertion_curve"), entry.get("insertion")),
        avg_drop=entry.get("avg_drop"),
        increase=entry.get("increase"),
        road_morf=_curve(entry.get("road_morf"), None),
        road_lerf=_curve(entry.get("road_lerf"), None),
        sanity=None if sanity is None else [
            SanityStep(s["layer"], s["spearman"], s["ssim"]) for s in sanity],
        sanity_flag=entry.get("sanity_flag"),
        pointing=entry.get("pointing"),
        energy_pointing=entry.get("energy_pointing"),
        undefined=entry.get("undefined"),
        notes=dict(entry.get("notes", {})),
    )
