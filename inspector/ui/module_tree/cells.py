"""What the module tree's rows show: the columns, their headers, numbers in a few
characters, hazard badges and the health verdict of a module's statistics."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPen, QPixmap

from inspector.core.records.frames import TensorStats
from inspector.core.records.kinds import KIND_INFO, KINDS

(COL_NAME, COL_TYPE, COL_SHAPE, COL_PARAMS, COL_MEAN, COL_STD, COL_ZEROS, COL_HEALTH) = range(8)
KIND_COLUMNS = {8 + i: kind for i, kind in enumerate(KINDS)}
COLUMN_OF_KIND = {kind: col for col, kind in KIND_COLUMNS.items()}
HEADERS = ["Module", "Type", "Output", "Params", "Mean", "Std", "Zeros", "Health"] + [
    KIND_INFO[kind].column for kind in KINDS
]
STATS_COLUMNS = (COL_MEAN, COL_STD, COL_ZEROS, COL_HEALTH)
HEADER_TIPS = {
    COL_MEAN: "Mean of the output in the last run",
    COL_STD: "Standard deviation of the output in the last run",
    COL_ZEROS: "Fraction of output values that are exactly zero",
    COL_HEALTH: "Dead (all zero) or exploding outputs and gradients",
    COL_PARAMS: "Parameters, including those of sub-modules",
    COL_SHAPE: "Output shape of one image (the batch dimension is left out)",
}
KIND_TIPS = {kind: KIND_INFO[kind].tip for kind in KINDS}
KIND_NAMES = {kind: KIND_INFO[kind].words for kind in KINDS}
# Plain words for core.models.tree's hazard flags (their long text is in the tooltip).
HAZARD_LABELS = {
    "never_called": "never called",
    "inplace": "in-place",
    "output_modified_inplace": "output changed in place later",
    "reused": "called several times",
    "tuple_output": "tuple output",
}


def hazard_text(hazard: str) -> str:
    """core.models.tree's explanation of a hazard. Imported late: core.models.tree imports torch, and a
    tree only exists once torch is loaded."""
    from inspector.core.models.tree import HAZARD_TEXT

    return HAZARD_TEXT.get(hazard, "")

# Health thresholds: above these an activation or gradient is "exploding".
EXPLODING_ACTIVATION = 1e4
EXPLODING_GRADIENT = 1e3
BAD = QColor("#c62828")
WARN = QColor("#ef6c00")
STALE = QColor("#9e9e9e")
STALE_BRUSH = QBrush(STALE)
WHITE_BRUSH = QBrush(QColor("white"))

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
ALIGN = {COL_PARAMS: _RIGHT, COL_MEAN: _RIGHT, COL_STD: _RIGHT, COL_ZEROS: _RIGHT,
         COL_HEALTH: int(Qt.AlignmentFlag.AlignCenter)}
N_COLUMNS = len(HEADERS)


def _badge_icon(color: str, text: str, *, ring: bool = False) -> QIcon:
    """A small round badge with a symbol, drawn here so that no icon files are needed."""
    size = 32  # drawn large, shown at the view's icon size
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    if ring:
        p.setPen(QPen(QColor(color), 4))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawEllipse(4, 4, size - 8, size - 8)
        p.drawLine(9, size - 9, size - 9, 9)
    else:
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(color))
        p.drawEllipse(2, 2, size - 4, size - 4)
        font = p.font()
        font.setBold(True)
        font.setPixelSize({0: 20, 1: 20, 2: 16}.get(len(text), 12))  # counts: "12", "99+"
        p.setFont(font)
        p.setPen(QColor("white"))
        p.drawText(pix.rect(), Qt.AlignmentFlag.AlignCenter, text)
    p.end()
    return QIcon(pix)


_ICONS: dict[str, QIcon] = {}


def hazard_icon(hazards: frozenset[str]) -> QIcon | None:
    """One icon for the most important hazard; the tooltip lists all of them."""
    if not hazards:
        return None
    if not _ICONS:
        _ICONS["never_called"] = _badge_icon("#757575", "", ring=True)
        _ICONS["inplace"] = _badge_icon("#ef6c00", "!")
        _ICONS["reused"] = _badge_icon("#1565c0", "2")
        _ICONS["tuple_output"] = _badge_icon("#6a1b9a", "T")
    for key in ("never_called", "inplace", "output_modified_inplace", "reused", "tuple_output"):
        if key in hazards:
            return _ICONS["inplace" if key == "output_modified_inplace" else key]
    return None


_ATLAS_ICONS: dict[int, QIcon] = {}


def atlas_icon(dead: int) -> QIcon:
    """The Health column's badge for a layer of the opened channel atlas: its count of dead
    channels (grey when none is dead; "99+" past 99)."""
    icon = _ATLAS_ICONS.get(dead)
    if icon is None:
        text = str(dead) if dead < 100 else "99+"
        icon = _ATLAS_ICONS[dead] = _badge_icon("#6d4c41" if dead else "#9e9e9e", text)
    return icon


def atlas_text(dead: int, channels: int, about: str) -> str:
    """The Health tooltip's line for an atlas layer; `about`: which atlas (images, folder)."""
    return (f"Dead in the atlas: {dead}/{channels} channels (maximum ≤ 0 on every image; "
            f"{about})")


EDIT_GLYPH = "\u270e"  # a pencil: the module's output (or gradient) is edited in the runs
EDITED_COLOR = "#e0a030"  # the statistics headers of an edited run (the panes' "edited" badge)


def edit_badge(n: int) -> str:
    """What the name cell starts with for a module with `n` edits on: "✎ " or "✎3 " (before
    the name: a narrow column elides the end of the text, and the badge must stay)."""
    if n <= 0:
        return ""
    return f"{EDIT_GLYPH} " if n == 1 else f"{EDIT_GLYPH}{n} "


def format_count(n: int) -> str:
    if n <= 0:
        return ""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)


def compact(value: float) -> str:
    """A number in at most 7 characters (the tooltip has more digits): 0.00702, 1.2e+03."""
    for text in (f"{value:.3g}", f"{value:.2g}", f"{value:.0e}"):
        if len(text) <= 7:
            return text
    return text


def format_shape(shape: tuple[int, ...] | None, *, batch: bool = True) -> str:
    """"64×56×56"; with batch=False a leading batch dimension of 1 is left out."""
    if not shape:
        return "—"
    if not batch and len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return "×".join(str(s) for s in shape)


def health(out: TensorStats | None, grad: TensorStats | None) -> tuple[str, QColor | None, str]:
    """(badge text, colour, explanation) for a module's last output and output gradient."""
    if out is not None:
        if out.nonfinite:
            return "NaN/Inf", BAD, f"{out.nonfinite} NaN or infinite values in the output"
        if out.abs_max > EXPLODING_ACTIVATION:
            return "exploding", BAD, f"output values up to {out.abs_max:.3g}"
        if out.numel and out.zero_fraction >= 1.0:
            return "dead", BAD, "every output value is zero"
    if grad is not None:
        if grad.nonfinite:
            return "∇ NaN/Inf", BAD, f"{grad.nonfinite} NaN or infinite gradient values"
        if grad.abs_max > EXPLODING_GRADIENT:
            return "∇ exploding", BAD, f"output gradient up to {grad.abs_max:.3g}"
    if out is not None and out.channel_zero_fraction.size > 1 and out.dead_channels:
        n, c = out.dead_channels, out.channel_zero_fraction.size
        return f"{n} dead", WARN, f"{n} of {c} channels are zero everywhere (dead units)"
    return "", None, ""


