"""What the header line of a tensor view says: the module, the tensor's shape and
statistics with its problems in colour (dead channels, NaN/Inf), how the picture differs from
the tensor (core reduces previews: core.stats.previews), and the size of a difference of two
runs' previews."""

from __future__ import annotations

import numpy as np

from inspector.core.records.frames import TensorFrame
from inspector.ui.views.base import fmt


def module_label(name: str) -> str:
    return name if name else "(whole model)"


def stats_html(frame: TensorFrame) -> str:
    """One line: shape and statistics, with problems (dead channels, NaN/Inf) in colour."""
    s = frame.stats
    shape = "\u00d7".join(str(d) for d in frame.shape) or "scalar"
    parts = [
        f"shape {shape}",
        f"mean {fmt(s.mean)}",
        f"std {fmt(s.std)}",
        f"min {fmt(s.min)}",
        f"max {fmt(s.max)}",
        f"zeros {100 * s.zero_fraction:.1f}%",
    ]
    channels = len(s.channel_zero_fraction)
    if s.dead_channels and channels > 1:
        parts.append(f"<span style='color:#e0a030'>{s.dead_channels}/{channels} channels all zero</span>")
    if s.nonfinite:
        parts.append(f"<span style='color:#f05050'><b>{s.nonfinite} NaN/Inf</b></span>")
    note = preview_note(frame)
    if note:
        parts.append(f"<i>{note}</i>")
    return " \u00b7 ".join(parts)


def preview_note(frame: TensorFrame) -> str:
    """Says how the picture differs from the tensor."""
    p = frame.preview
    if p is None:
        return ""
    item = frame.item_shape
    notes = []
    if frame.channels_last and p.ndim == 3:
        notes.append("channels last (H\u00d7W\u00d7C): one tile per channel")
    if p.shape == item:
        return ", ".join(notes)
    if p.ndim == 3 and len(item) == 3:
        if p.shape[0] < item[0]:
            notes.append(f"first {p.shape[0]} of {item[0]} channels shown")
        if p.shape[1:] != item[1:]:
            notes.append(f"averaged to {p.shape[1]}\u00d7{p.shape[2]}")
        return ", ".join(notes)
    return "shown reduced to " + "\u00d7".join(str(d) for d in p.shape)


def diff_html(diff: np.ndarray) -> str:
    """One line about the difference of two previews: how large, how many channels it
    touches."""
    parts = [f"largest |difference| {fmt(float(np.abs(diff).max()) if diff.size else 0.0)}"]
    if diff.ndim == 3:
        changed = int(np.count_nonzero(np.abs(diff).reshape(diff.shape[0], -1).max(1) > 0))
        parts.append(f"{changed} of {diff.shape[0]} channels changed")
    parts.append("<i>of the previews shown</i>")
    return " \u00b7 ".join(parts)


def shape_text(frame: TensorFrame) -> str:
    """The shape of a frame's preview, as B - A's message names it."""
    if frame.preview is None:
        return "without a preview"
    return "\u00d7".join(str(d) for d in frame.preview.shape)
