"""The module tree's data: a QAbstractItemModel over core's ModuleTree.

Built once per loaded model (a reset); afterwards only its statistics columns change: each
run's frames update the numbers in place (dataChanged for the rows that changed, a few times
a second), so selection, expansion and scrolling never jump.

Columns: the module, its type, output shape, parameters; the last run's output mean, std and
fraction of zeros with a health badge (dead or exploding values); then one checkbox per hook
kind (input, output, output gradient, input gradient), which is what the next run captures.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QGuiApplication, QIcon, QPainter, QPen, QPixmap

from inspector.core import methods
from inspector.core.frames import (
    GRAD_INPUT,
    GRAD_OUTPUT,
    INPUT,
    KINDS,
    OUTPUT,
    RunFinished,
    TensorFrame,
    TensorStats,
)

(COL_NAME, COL_TYPE, COL_SHAPE, COL_PARAMS, COL_MEAN, COL_STD, COL_ZEROS, COL_HEALTH) = range(8)
KIND_COLUMNS = {8 + i: kind for i, kind in enumerate(KINDS)}
COLUMN_OF_KIND = {kind: col for col, kind in KIND_COLUMNS.items()}
HEADERS = ["Module", "Type", "Output", "Params", "Mean", "Std", "Zeros", "Health"] + [
    "In", "Out", "∇Out", "∇In"
]
STATS_COLUMNS = (COL_MEAN, COL_STD, COL_ZEROS, COL_HEALTH)
KIND_TIPS = {
    INPUT: "Capture the module's input (forward pre-hook): the input statistics view",
    OUTPUT: "Capture the module's output (forward hook): statistics and the activation view",
    GRAD_OUTPUT: "Capture the gradient of the score w.r.t. the output: the gradient views",
    GRAD_INPUT: "Capture the gradient w.r.t. the module's input, through this module only",
}
KIND_NAMES = {
    INPUT: "input",
    OUTPUT: "output",
    GRAD_OUTPUT: "output gradient",
    GRAD_INPUT: "input gradient",
}
DEFAULT_KINDS = frozenset(methods.DEFAULT_KINDS)

# Plain words for core.tree's hazard flags (their long text is in the tooltip).
HAZARD_LABELS = {
    "never_called": "never called",
    "inplace": "in-place",
    "output_modified_inplace": "output changed in place later",
    "reused": "called several times",
    "tuple_output": "tuple output",
}


def hazard_text(hazard: str) -> str:
    """core.tree's explanation of a hazard. Imported late: core.tree imports torch, and a
    tree only exists once torch is loaded."""
    from inspector.core.tree import HAZARD_TEXT

    return HAZARD_TEXT.get(hazard, "")

# Health thresholds: above these an activation or gradient is "exploding".
EXPLODING_ACTIVATION = 1e4
EXPLODING_GRADIENT = 1e3
BAD = QColor("#c62828")
WARN = QColor("#ef6c00")
STALE = QColor("#9e9e9e")
STALE_BRUSH = QBrush(STALE)
WHITE_BRUSH = QBrush(QColor("white"))

ModuleNameRole = int(Qt.ItemDataRole.UserRole) + 1
DISPLAY, DECORATION, TOOLTIP = 0, 1, 3  # Qt.ItemDataRole values, as data() receives them
FONT, ALIGNMENT, BACKGROUND, FOREGROUND, CHECK = 6, 7, 8, 9, 10
CHECKED, UNCHECKED = Qt.CheckState.Checked, Qt.CheckState.Unchecked
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
ALIGN = {COL_PARAMS: _RIGHT, COL_MEAN: _RIGHT, COL_STD: _RIGHT, COL_ZEROS: _RIGHT,
         COL_HEALTH: int(Qt.AlignmentFlag.AlignCenter)}
# The statistics columns repaint at most this often (s): after a complete run, and while a
# run is still arriving. A repaint of a fully expanded resnet18 tree took 80-160 ms here.
STATS_REFRESH_S = 0.4
STATS_REFRESH_PARTIAL_S = 1.0
N_COLUMNS = len(HEADERS)
_NO_INDEX = QModelIndex()
# What a statistics update changes; naming the roles lets the filter model skip re-filtering.
STATS_ROLES = [
    Qt.ItemDataRole.DisplayRole,
    Qt.ItemDataRole.ToolTipRole,
    Qt.ItemDataRole.ForegroundRole,
    Qt.ItemDataRole.BackgroundRole,
]


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
        font.setPixelSize(20)
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


class ModuleTreeModel(QAbstractItemModel):
    """Rows are modules (the model itself is the one top-level row); see the module doc."""

    captureChanged = Signal()  # a hook-kind checkbox changed

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._tree = None
        self._model_name = ""
        self._names: list[str] = []  # internal id -> module name
        self._kids: list[list[int]] = []  # internal id -> children's ids
        self._parent_id: list[int] = []  # internal id -> parent's id, -1 for the root
        self._row_of_id: list[int] = []
        self._top: list[int] = []
        self._id: dict[str, int] = {}
        self._row: dict[str, int] = {}
        self.kinds: dict[str, frozenset[str]] = {}
        self._out: dict[str, tuple[int, TensorStats]] = {}  # name -> (run id, output stats)
        self._grad: dict[str, tuple[int, TensorStats]] = {}
        self._run_id: int | None = None
        self._dirty: set[str] = set()
        self._rows: dict[str, tuple[list, list, list]] = {}  # see _cells
        self._last_flush = 0.0
        self._run_complete = True

    # -- content -------------------------------------------------------------------------
    def set_tree(self, tree, model_name: str = "") -> None:
        """A newly loaded model (core.tree.ModuleTree, or None to clear)."""
        self.beginResetModel()
        self._tree, self._model_name = tree, model_name
        self._names, self._id, self._row = [], {}, {}
        self._kids, self._parent_id, self._row_of_id, self._top = [], [], [], []
        self._out.clear()
        self._grad.clear()
        self._dirty.clear()
        self._rows.clear()
        self._run_id = None
        if tree is not None:
            for name, info in tree.modules.items():
                self._id[name] = len(self._names)
                self._names.append(name)
                for row, child in enumerate(info.children):
                    self._row[child] = row
            self._row[""] = 0
            self._kids = [[self._id[c] for c in tree.modules[n].children] for n in self._names]
            self._parent_id = [self._id.get(tree.modules[n].parent, -1) for n in self._names]
            self._row_of_id = [self._row[n] for n in self._names]
            self._top = [self._id[""]]
            self.kinds = {n: self.default_kinds(n) for n in tree.modules}
        else:
            self.kinds = {}
        self.endResetModel()

    @property
    def tree(self):
        return self._tree

    def default_kinds(self, name: str) -> frozenset[str]:
        """Inputs, outputs and output gradients of every module that runs.

        Leaves and containers both: a residual block's output (after the addition) is
        something no leaf shows, and the model's own input is the normalised image (the
        first point of the input statistics). Input gradients cost an extra autograd node
        per module, so they are asked for per module."""
        if "never_called" in self._tree.modules[name].hazards:
            return frozenset()
        return DEFAULT_KINDS

    def capture_modules(self) -> dict[str, frozenset[str]]:
        return {n: k for n, k in self.kinds.items() if k}

    def set_kind(self, names: Iterable[str], kind: str, on: bool) -> None:
        changed = False
        for name in names:
            old = self.kinds.get(name, frozenset())
            new = old | {kind} if on else old - {kind}
            if new != old:
                self.kinds[name] = new
                changed = True
                idx = self.index_of(name, COLUMN_OF_KIND[kind])
                self.dataChanged.emit(idx, idx, [Qt.ItemDataRole.CheckStateRole])
        if changed:
            self.captureChanged.emit()

    def descendants(self, name: str) -> list[str]:
        out, stack = [], [name]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(reversed(self._tree.modules[n].children))
        return out

    # -- live statistics -------------------------------------------------------------------
    def handle_frame(self, frame) -> None:
        if isinstance(frame, RunFinished):
            self._run_complete = True
            return
        if not isinstance(frame, TensorFrame) or self._tree is None:
            return
        self._run_complete = False
        name = frame.module
        if name not in self._id or frame.call != 0:
            return  # one row per module: show its first call (the tooltip says so)
        table = self._out if frame.kind == OUTPUT else self._grad if frame.kind == GRAD_OUTPUT else None
        if table is None:
            return
        if self._run_id is None or frame.run_id > self._run_id:
            self._run_id = frame.run_id
            self._dirty.update(self._out)  # older numbers turn grey
            self._dirty.update(self._grad)
            self._rows.clear()
        previous = table.get(name)
        if previous is not None and previous[0] == frame.run_id:
            return  # a second tensor of a tuple output: keep the first
        table[name] = (frame.run_id, frame.stats)
        self._dirty.add(name)
        self._rows.pop(name, None)

    def flush(self, force: bool = False) -> None:
        """Tell the view which rows changed (grouped by parent), at most a few times a second:
        numbers that change faster cannot be read, and each update repaints the tree."""
        if not self._dirty or self._tree is None:
            self._dirty.clear()
            return
        now = time.monotonic()
        wait = STATS_REFRESH_S if self._run_complete else STATS_REFRESH_PARTIAL_S
        if not force and now - self._last_flush < wait:
            return
        self._last_flush = now
        by_parent: dict[str | None, list[int]] = {}
        for name in self._dirty:
            if name in self._id:
                by_parent.setdefault(self._tree.modules[name].parent, []).append(self._row[name])
        self._dirty.clear()
        for parent, rows in by_parent.items():
            parent_index = QModelIndex() if parent is None else self.index_of(parent)
            top = self.index(min(rows), COL_MEAN, parent_index)
            bottom = self.index(max(rows), COL_HEALTH, parent_index)
            self.dataChanged.emit(top, bottom, STATS_ROLES)

    def stats_of(self, name: str) -> TensorStats | None:
        entry = self._out.get(name)
        return entry[1] if entry else None

    # -- QAbstractItemModel ----------------------------------------------------------------
    def index_of(self, name: str, column: int = 0) -> QModelIndex:
        if name not in self._id:
            return QModelIndex()
        return self.createIndex(self._row[name], column, self._id[name])

    def name_of(self, index: QModelIndex) -> str | None:
        if not index.isValid():
            return None
        return self._names[index.internalId()]

    # index/parent/rowCount run thousands of times per repaint: integer ids and lists only.
    def index(self, row: int, column: int, parent=_NO_INDEX) -> QModelIndex:
        if not 0 <= column < N_COLUMNS or self._tree is None:
            return QModelIndex()
        kids = self._kids[parent.internalId()] if parent.isValid() else self._top
        if 0 <= row < len(kids):
            return self.createIndex(row, column, kids[row])
        return QModelIndex()

    def parent(self, index=_NO_INDEX) -> QModelIndex:
        if not index.isValid():
            return QModelIndex()
        pid = self._parent_id[index.internalId()]
        return QModelIndex() if pid < 0 else self.createIndex(self._row_of_id[pid], 0, pid)

    def rowCount(self, parent=_NO_INDEX) -> int:  # noqa: N802
        if self._tree is None:
            return 0
        if not parent.isValid():
            return 1
        return len(self._kids[parent.internalId()]) if parent.column() == 0 else 0

    def columnCount(self, parent=_NO_INDEX) -> int:  # noqa: N802
        return N_COLUMNS

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            if section in KIND_COLUMNS:
                return KIND_TIPS[KIND_COLUMNS[section]]
            return {
                COL_MEAN: "Mean of the output in the last run",
                COL_STD: "Standard deviation of the output in the last run",
                COL_ZEROS: "Fraction of output values that are exactly zero",
                COL_HEALTH: "Dead (all zero) or exploding outputs and gradients",
                COL_PARAMS: "Parameters, including those of sub-modules",
                COL_SHAPE: "Output shape of one image (the batch dimension is left out)",
            }.get(section)
        return None

    def flags(self, index: QModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() in KIND_COLUMNS:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def setData(self, index, value, role=Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        if role != Qt.ItemDataRole.CheckStateRole or index.column() not in KIND_COLUMNS:
            return False
        on = Qt.CheckState(value) == Qt.CheckState.Checked
        self.set_kind([self.name_of(index)], KIND_COLUMNS[index.column()], on)
        return True

    def data(self, index: QModelIndex, role: int = DISPLAY):
        # Called from C++ for every role of every visible cell on each repaint: keep it to a
        # dictionary lookup (roles arrive as plain ints; enum attribute access is slow).
        if not index.isValid():
            return None
        name = self._names[index.internalId()]
        col = index.column()
        if col in KIND_COLUMNS:
            if role == CHECK:
                return CHECKED if KIND_COLUMNS[col] in self.kinds.get(name, ()) else UNCHECKED
            if role == TOOLTIP:
                return KIND_TIPS[KIND_COLUMNS[col]]
            return None
        if role == DISPLAY:
            return self._cells(name)[0][col]
        if role == FOREGROUND:
            return self._cells(name)[1][col]
        if role == BACKGROUND:
            return self._cells(name)[2][col]
        if role == ALIGNMENT:
            return ALIGN.get(col)
        if role == DECORATION:
            return hazard_icon(self._tree.modules[name].hazards) if col == COL_NAME else None
        if role == TOOLTIP:
            return self._tooltip(name, self._tree.modules[name], col)
        if role == FONT and col == COL_NAME and not name:
            font = QGuiApplication.font()
            font.setBold(True)
            return font
        if role == ModuleNameRole:
            return name
        return None

    def _cells(self, name: str) -> tuple[list, list, list]:
        """(display texts, foreground brushes, background brushes) of a row, cached until its
        statistics change."""
        row = self._rows.get(name)
        if row is None:
            info = self._tree.modules[name]
            texts = [self._display(name, info, col) for col in range(COL_HEALTH + 1)]
            fg: list = [None] * (COL_HEALTH + 1)
            bg: list = [None] * (COL_HEALTH + 1)
            stale = self._stale(name)
            if stale:
                for col in STATS_COLUMNS:
                    fg[col] = STALE_BRUSH
            badge = self._health(name)[1]
            if badge is not None:
                fg[COL_HEALTH] = WHITE_BRUSH
                bg[COL_HEALTH] = STALE_BRUSH if stale else QBrush(badge)
            if "never_called" in info.hazards:
                fg[COL_NAME] = STALE_BRUSH
            row = self._rows[name] = (texts, fg, bg)
        return row

    def _display(self, name: str, info, col: int):
        if col == COL_NAME:
            return (self._model_name or "model") if not name else info.short_name
        if col == COL_TYPE:
            return info.type_name
        if col == COL_SHAPE:
            shape = info.output_shape
            more = len(info.calls[0].outputs) > 1 if info.calls else False
            return format_shape(shape, batch=False) + (" …" if more else "")
        if col == COL_PARAMS:
            return format_count(info.params_total)
        stats = self.stats_of(name)
        if col == COL_HEALTH:
            return self._health(name)[0]
        if stats is None:
            return ""
        if col == COL_MEAN:
            return compact(stats.mean)
        if col == COL_STD:
            return compact(stats.std)
        if col == COL_ZEROS:
            return f"{100 * stats.zero_fraction:.0f} %"
        return None

    def _tooltip(self, name: str, info, col: int) -> str | None:
        if col == COL_NAME:
            lines = [f"<b>{name or '(the model itself)'}</b> — {info.type_name}, "
                     f"{format_count(info.params_total) or 'no'} parameters"]
            if len(info.calls) > 1:
                lines.append(f"called {len(info.calls)} times per forward; "
                             f"the columns show the first call")
            for hazard in sorted(info.hazards):
                lines.append(f"• {HAZARD_LABELS.get(hazard, hazard)}: "
                             f"{hazard_text(hazard)}")
            return "<br>".join(lines)
        if col == COL_PARAMS:
            return (f"{info.params_total:,} parameters ({info.params_own:,} in this module, "
                    f"{info.trainable:,} trainable overall)")
        if col == COL_SHAPE and info.calls:
            outs = info.calls[0].outputs
            return "<br>".join(f"{p or 'output'}: {format_shape(s)}" for p, s in outs) or None
        if col in STATS_COLUMNS:
            stats = self.stats_of(name)
            if stats is None:
                return "No statistics yet: this module's output is not captured, or no run yet"
            text = (f"mean {stats.mean:.4g}, std {stats.std:.4g}, min {stats.min:.4g}, "
                    f"max {stats.max:.4g}, zeros {100 * stats.zero_fraction:.1f} % "
                    f"of {stats.numel:,} values")
            explanation = self._health(name)[2]
            if explanation:
                text += f"<br><b>{explanation}</b>"
            if self._stale(name):
                text += "<br>(from an earlier run: not captured in the last one)"
            return text
        return None

    def _health(self, name: str):
        out = self._out.get(name)
        grad = self._grad.get(name)
        return health(out[1] if out else None, grad[1] if grad else None)

    def _stale(self, name: str) -> bool:
        entry = self._out.get(name)
        return entry is not None and entry[0] != self._run_id
