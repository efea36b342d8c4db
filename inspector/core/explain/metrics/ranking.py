"""Which method each metric ranks best, and whether the metrics agree.

Each column is one number per method (a MapScores, or a mean over images) with the
direction that is better. Metrics of faithfulness often disagree on which method is best
(Hedström et al. 2023, MetaQuantus): `disagreement` says so in words, naming each metric's
best, rather than crowning one method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inspector.core.explain.metrics.names import (
    AVGDROP,
    DELETION,
    INSERTION,
    POINTING,
    ROAD,
    SANITY,
)
from inspector.core.explain.metrics.results import MapScores

LOWER, HIGHER = "lower", "higher"


def _auc(curve) -> float | None:
    return None if curve is None else curve.auc


def _mean(curve) -> float | None:
    return None if curve is None else curve.mean


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Column:
    key: str  # the metrics_summary key, and the table's
    title: str
    metric: str  # the metric (names.METRICS) it comes from
    better: str  # LOWER or HIGHER
    value: Callable[[MapScores], float | None]
    # The columns that choose "the best method" for the disagreement flag (one each for
    # deletion, insertion, Average Drop and ROAD; the others refine rather than rank).
    decisive: bool = False


COLUMNS = (
    Column("deletion", "Deletion AUC", DELETION, LOWER, lambda s: _auc(s.deletion), True),
    Column("insertion", "Insertion AUC", INSERTION, HIGHER, lambda s: _auc(s.insertion), True),
    Column("avg_drop", "Average Drop", AVGDROP, LOWER, lambda s: s.avg_drop, True),
    Column("increase", "Increase", AVGDROP, HIGHER, lambda s: _flag(s.increase)),
    Column("road_morf", "ROAD MoRF", ROAD, LOWER, lambda s: _mean(s.road_morf)),
    Column("road_lerf", "ROAD LeRF", ROAD, HIGHER, lambda s: _mean(s.road_lerf)),
    Column("road", "ROAD", ROAD, HIGHER, lambda s: s.road, True),
    Column("sanity", "Sanity r", SANITY, LOWER, lambda s: s.sanity_similarity),
    Column("pointing", "Pointing", POINTING, HIGHER, lambda s: _flag(s.pointing)),
    Column("energy_pointing", "Energy", POINTING, HIGHER, lambda s: s.energy_pointing),
)


def columns_for(metrics) -> list[Column]:
    """The columns of the metrics asked for, in the table's order."""
    return [c for c in COLUMNS if c.metric in set(metrics)]


def best_first(column: Column, values: Mapping[Any, float | None]) -> list[Any]:
    """The keys with a value, best first (ties: in the order given), then those without."""
    known = [k for k, v in values.items() if v is not None]
    sign = 1 if column.better == LOWER else -1
    ranked = sorted(known, key=lambda k: sign * values[k])
    return ranked + [k for k in values if values[k] is None]


def best_per_column(scores: Mapping[Any, MapScores], metrics) -> dict[str, Any]:
    """Column key -> the key (method) it ranks best, for the columns with two or more
    methods scored."""
    out = {}
    for column in columns_for(metrics):
        values = {k: column.value(s) for k, s in scores.items()}
        if sum(v is not None for v in values.values()) >= 2:
            out[column.key] = best_first(column, values)[0]
    return out


def disagreement(scores: Mapping[Any, MapScores], metrics,
                 title: Callable[[Any], str] = str) -> str | None:
    """A sentence naming each decisive metric's best method when they do not all pick the
    same one; None when they agree (or fewer than two metrics rank two methods)."""
    best = best_per_column(scores, metrics)
    decisive = [c for c in columns_for(metrics) if c.decisive and c.key in best]
    if len(decisive) < 2 or len({best[c.key] for c in decisive}) < 2:
        return None
    parts = ", ".join(f"{c.title.removesuffix(' AUC').lower()} \u2192 {title(best[c.key])}"
                      for c in decisive)
    return f"The metrics disagree on the best method: {parts}."
