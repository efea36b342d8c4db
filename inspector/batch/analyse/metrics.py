"""`analyse --metrics`: the faithfulness metrics of every map, in summary.json and
DIR/metrics.csv.

Per image, its entry gains "metrics": {METHOD: {the keys of the metrics asked for}} (METHOD
as --cam and --attr name it; core.explain.metrics.results.MapScores.as_json). The run gains
"metrics_protocol" (how every number was computed) and "metrics_summary": {METHOD: {METRIC:
the mean over the images where it is defined}} (increase and pointing as rates, ROAD's
curves as their mean over the percentiles, sanity as the last step's Spearman, a
constant map counted 0), with
"images": how many images each method's metrics were defined on. DIR/metrics.csv has one
row per image and method. Everything is made from the images' entries, so a resumed run
(whose finished shards are read back) and a Ray run write the same as a plain one.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from inspector.core.explain.metrics.names import AVGDROP, POINTING, SANITY
from inspector.core.explain.metrics.ranking import columns_for
from inspector.core.explain.metrics.results import scores_from_json
from inspector.core.explain.metrics.scores import score_text

NEEDS_MAPS = "the metrics score maps: ask for a --cam or an --attr"
NEEDS_BOXES = "the pointing game needs the objects' boxes: give --boxes FILE.json"
BOXES_UNUSED = ("warning: --boxes is read by the pointing game only (--metrics ...,pointing): "
                "it is not used")


def check_metric_model(loaded, tree) -> None:
    """ValueError, one sentence, when the metrics cannot read the model's output: a
    classifier whose output is not (1, K) class scores."""
    if loaded.task != "classification":
        return
    root = tree.root if tree is not None else None
    outputs = dict(root.calls[0].outputs) if root is not None and root.calls else {}
    if not outputs:
        return
    shape = next((outputs[k] for k in ("logits", "out") if k in outputs),
                 next(iter(outputs.values())))
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(f"the model's output is {tuple(shape)}, not class scores: the "
                         f"metrics need a class probability")


def metrics_entry(outcome, asked) -> dict[str, dict[str, Any]]:
    """An image's "metrics": METHOD -> its keys."""
    return {method: scores.as_json(asked) for (method, _layer), scores in outcome.metrics.items()}


def metrics_document(a, loaded, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's run-level keys for the metrics (none when they were not asked)."""
    if a.metrics is None:
        return {}
    return {"metrics": list(a.metrics.metrics),
            "metrics_protocol": a.metrics.protocol(score_text(loaded.task)),
            "metrics_summary": metrics_summary(entries, a.metrics.metrics)}


def metrics_summary(entries: list[dict[str, Any]], asked) -> dict[str, dict[str, Any]]:
    """METHOD -> {column: mean over the images where it is defined, "images": n}."""
    columns = columns_for(asked)
    values: dict[str, dict[str, list[float]]] = {}
    images: dict[str, int] = {}
    for entry in entries:
        for method, found in (entry.get("metrics") or {}).items():
            values.setdefault(method, {c.key: [] for c in columns})
            images[method] = images.get(method, 0) + (not found.get("undefined"))
            scores = scores_from_json(found)
            for column in columns:
                v = column.value(scores)
                if v is not None:
                    values[method][column.key].append(float(v))
            if SANITY in asked and scores.sanity_flag is not None:
                values[method].setdefault("sanity_flag", []).append(float(scores.sanity_flag))
    return {method: {**{k: (round(sum(v) / len(v), 6) if v else None) for k, v in cols.items()},
                     "images": images[method]}
            for method, cols in values.items()}


def _last(scores, field: str):
    steps = scores.sanity or []
    return getattr(steps[-1], field) if steps else None


def _csv_columns(asked) -> list[str]:
    names = ["path", "frame", "method"]
    names += [{"road_morf": "road_morf_mean", "road_lerf": "road_lerf_mean",
               "sanity": "sanity_spearman"}.get(c.key, c.key) for c in columns_for(asked)]
    if SANITY in asked:
        names += ["sanity_ssim", "sanity_flag"]
    return [*names, "undefined"]


def metrics_csv(entries: list[dict[str, Any]], asked) -> str:
    """DIR/metrics.csv: one row per image and method (an image that failed has none)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_csv_columns(asked))
    columns = columns_for(asked)
    for entry in entries:
        for method, found in (entry.get("metrics") or {}).items():
            scores = scores_from_json(found)
            row: list[Any] = [entry["path"], entry.get("frame", ""), method]
            for column in columns:
                v = _last(scores, "spearman") if column.key == "sanity" else column.value(scores)
                if column.metric in (AVGDROP, POINTING) and column.key in ("increase",
                                                                         "pointing"):
                    v = None if v is None else bool(v)
                row.append("" if v is None else v)
            if SANITY in asked:
                ssim, flag = _last(scores, "ssim"), scores.sanity_flag
                row += ["" if ssim is None else ssim, "" if flag is None else flag]
            row.append(found.get("undefined") or "")
            writer.writerow(row)
    return out.getvalue()


def write_metrics_csv(out: Path, entries: list[dict[str, Any]], asked) -> None:
    """DIR/metrics.csv, under a temporary name and then moved into place."""
    tmp = out / "metrics.csv.part"
    tmp.write_text(metrics_csv(entries, asked), encoding="utf-8")
    tmp.replace(out / "metrics.csv")


def check_metric_options(a) -> None:
    """--metrics and --boxes of `a` (a batch.analyse.Analysis) that cannot work together with
    its other options: ValueError."""
    if a.metrics is None:
        if a.boxes:
            a.warn(BOXES_UNUSED)
        return
    if not a.methods and not a.attributions:
        raise ValueError(NEEDS_MAPS)
    if a.metrics.asks(POINTING) and not a.boxes:
        raise ValueError(NEEDS_BOXES)
    if a.boxes and not a.metrics.asks(POINTING):
        a.warn(BOXES_UNUSED)
