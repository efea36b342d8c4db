"""The module tree's data: a QAbstractItemModel over core's ModuleTree.

Built once per loaded model (a reset); afterwards only its statistics columns change: the
model subscribes, in the run store, to the outputs and output gradients of the modules it
shows, and reads their newest statistics from there; it updates the numbers in place
(dataChanged for the rows that changed, a few times a second), so selection, expansion and
scrolling never jump.

Columns (module_tree_cells): the module, its type, output shape, parameters; the last run's
output mean, std and fraction of zeros with a health badge (dead or exploding values); then
one checkbox per hook kind (input, output, output gradient, input gradient), which is what
the next run captures. Statistics of an earlier run than the newest (a module the last
runs did not capture: while a video plays, each frame is a live run of the selected module
alone, and the run store keeps the last full run for the others) are grey and italic, and
their tooltip names that run's image or video frame. A module that the next runs edit (the
window's Edits) has a pencil badge after its name, and its tooltip lists the edits
(`set_edits`). The layers of an opened channel atlas (the Dataset dock) carry their count
of dead channels in the atlas as a badge in the Health column, explained in its tooltip
(`set_atlas`).
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QGuiApplication

from inspector.core.run.frames import RunFinished, TensorFrame, TensorStats
from inspector.core.run.kinds import DEFAULT_KINDS as KINDS_BY_DEFAULT
from inspector.core.run.kinds import GRAD_OUTPUT, OUTPUT
from inspector.core.run.store import RunStore
from inspector.ui.module_tree.cells import (
    ALIGN,
    COL_HEALTH,
    COL_MEAN,
    COL_NAME,
    COL_PARAMS,
    COL_SHAPE,
    COL_STD,
    COL_TYPE,
    COL_ZEROS,
    COLUMN_OF_KIND,
    EDIT_GLYPH,
    HAZARD_LABELS,
    HEADER_TIPS,
    HEADERS,
    KIND_COLUMNS,
    KIND_TIPS,
    N_COLUMNS,
    STALE_BRUSH,
    STATS_COLUMNS,
    WHITE_BRUSH,
    atlas_icon,
    atlas_text,
    compact,
    edit_badge,
    format_count,
    format_shape,
    hazard_icon,
    hazard_text,
    health,
)

DEFAULT_KINDS = frozenset(KINDS_BY_DEFAULT)
STATS_KINDS = (OUTPUT, GRAD_OUTPUT)  # what the statistics columns and the badge show

ModuleNameRole = int(Qt.ItemDataRole.UserRole) + 1
DISPLAY, DECORATION, TOOLTIP = 0, 1, 3  # Qt.ItemDataRole values, as data() receives them
FONT, ALIGNMENT, BACKGROUND, FOREGROUND, CHECK = 6, 7, 8, 9, 10
CHECKED, UNCHECKED = Qt.CheckState.Checked, Qt.CheckState.Unchecked
# The statistics columns repaint at most this often (s): after a complete run, and while a
# run is still arriving. A repaint of a fully expanded resnet18 tree took 80-160 ms here.
STATS_REFRESH_S = 0.4
STATS_REFRESH_PARTIAL_S = 1.0
_NO_INDEX = QModelIndex()
# What a statistics update changes; naming the roles lets the filter model skip re-filtering.
STATS_ROLES = [
    Qt.ItemDataRole.DisplayRole,
    Qt.ItemDataRole.ToolTipRole,
    Qt.ItemDataRole.ForegroundRole,
    Qt.ItemDataRole.BackgroundRole,
]


class ModuleTreeModel(QAbstractItemModel):
    """Rows are modules (the model itself is the one top-level row); see the module doc."""

    captureChanged = Signal()  # a hook-kind checkbox changed

    def __init__(self, parent=None, store: RunStore | None = None) -> None:
        super().__init__(parent)
        # The window's run store, or one of the model's own.
        self.store = store if store is not None else RunStore()
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
        self.edits: dict[str, tuple[str, ...]] = {}  # module -> descriptions of its edits on
        self.atlas_dead: dict[str, tuple[int, int]] = {}  # layer -> (dead, channels) in the atlas
        self._atlas_about = ""
        self._dirty: set[str] = set()
        self._rows: dict[str, tuple[list, list, list, list]] = {}  # see _cells
        self._rows_run: int | None = None  # the statistics run the cached rows were made for
        self._last_flush = 0.0
        self._run_complete = True
        self._edited_stats = False  # whether the statistics shown are of an edited run
        self.subscription = self.store.subscribe(
            self._stats_stored, STATS_KINDS, modules=(), on_run=self._run_changed,
            on_clear=self._store_cleared)

    # -- content -------------------------------------------------------------------------
    def set_tree(self, tree, model_name: str = "") -> None:
        """A newly loaded model (core.models.tree.ModuleTree, or None to clear)."""
        self.beginResetModel()
        self._tree, self._model_name = tree, model_name
        self._names, self._id, self._row = [], {}, {}
        self._kids, self._parent_id, self._row_of_id, self._top = [], [], [], []
        self._dirty.clear()
        self._rows.clear()
        self.subscription.modules = set(tree.modules) if tree is not None else set()
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

    def set_edits(self, edits: dict[str, tuple[str, ...]]) -> None:
        """The edits the next runs apply, as descriptions per module: the badge and the
        tooltip of each module whose edits changed are redrawn."""
        edits = {name: tuple(d) for name, d in edits.items() if d}
        changed = {n for n in set(edits) | set(self.edits) if edits.get(n) != self.edits.get(n)}
        self.edits = edits
        for name in changed:
            self._rows.pop(name, None)
            index = self.index_of(name, COL_NAME)
            if index.isValid():
                self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole,
                                                     Qt.ItemDataRole.ToolTipRole])

    def set_atlas(self, dead: dict[str, tuple[int, int]], about: str = "") -> None:
        """Per layer of the channel atlas opened: (dead channels, channels); `about` says which
        atlas (its image count and folder) in the tooltips. {} takes the badges away."""
        changed = set(dead) | set(self.atlas_dead)
        self.atlas_dead, self._atlas_about = dict(dead), about
        for name in changed:
            index = self.index_of(name, COL_HEALTH)
            if index.isValid():
                self.dataChanged.emit(index, index, [Qt.ItemDataRole.DecorationRole,
                                                     Qt.ItemDataRole.ToolTipRole])

    # -- live statistics -------------------------------------------------------------------
    def _stats_stored(self, frame: TensorFrame) -> None:
        if frame.call != 0:
            return  # one row per module: show its first call (the tooltip says so)
        self._run_complete = False
        run = self.store.latest_run(STATS_KINDS)
        if run != self._rows_run:  # a new run's first numbers: the others turn grey
            self._rows_run = run
            self._rows.clear()
            self._dirty.update(self._names)
        self._dirty.add(frame.module)
        self._rows.pop(frame.module, None)

    def _run_changed(self, frame) -> None:
        if isinstance(frame, RunFinished):
            self._run_complete = True
        elif frame.run_id != self.store.baseline_run:  # the unedited run is never shown here
            edited = bool(frame.edits)
            if edited != self._edited_stats:
                self._edited_stats = edited
                self.headerDataChanged.emit(Qt.Orientation.Horizontal, STATS_COLUMNS[0],
                                            STATS_COLUMNS[-1])

    def _store_cleared(self) -> None:
        self._rows.clear()
        self._rows_run = None
        self._dirty.update(self._names)

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
        """The newest output statistics of `name` in the store (maybe of an earlier run)."""
        frame = self.store.latest_tensor(name, OUTPUT)
        return frame.stats if frame is not None else None

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
        edited = self._edited_stats and section in STATS_COLUMNS
        if role == Qt.ItemDataRole.DisplayRole:
            # The statistics are the edited run's: what the modules after an edit saw.
            return f"{HEADERS[section]} {EDIT_GLYPH}" if edited else HEADERS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            if section in KIND_COLUMNS:
                return KIND_TIPS[KIND_COLUMNS[section]]
            tip = HEADER_TIPS.get(section)
            return f"{tip} ({EDIT_GLYPH}: of the edited run)" if edited and tip else tip
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
            if col == COL_NAME:
                return hazard_icon(self._tree.modules[name].hazards)
            if col == COL_HEALTH and name in self.atlas_dead:
                return atlas_icon(self.atlas_dead[name][0])
            return None
        if role == TOOLTIP:
            tip = self._tooltip(name, self._tree.modules[name], col)
            if col == COL_HEALTH and name in self.atlas_dead:
                tip += "<br>" + html.escape(atlas_text(*self.atlas_dead[name], self._atlas_about))
            return tip
        if role == FONT:
            if col == COL_NAME and not name:
                font = QGuiApplication.font()
                font.setBold(True)
                return font
            return self._cells(name)[3][col]
        if role == ModuleNameRole:
            return name
        return None

    def _cells(self, name: str) -> tuple[list, list, list, list]:
        """(display texts, foreground brushes, background brushes, fonts) of a row, cached
        until its statistics change."""
        row = self._rows.get(name)
        if row is None:
            info = self._tree.modules[name]
            texts = [self._display(name, info, col) for col in range(COL_HEALTH + 1)]
            fg: list = [None] * (COL_HEALTH + 1)
            bg: list = [None] * (COL_HEALTH + 1)
            fonts: list = [None] * (COL_HEALTH + 1)
            stale = self._stale(name)
            if stale:
                italic = QGuiApplication.font()
                italic.setItalic(True)
                for col in STATS_COLUMNS:
                    fg[col] = STALE_BRUSH
                    fonts[col] = italic
            badge = self._health(name)[1]
            if badge is not None:
                fg[COL_HEALTH] = WHITE_BRUSH
                bg[COL_HEALTH] = STALE_BRUSH if stale else QBrush(badge)
            if "never_called" in info.hazards:
                fg[COL_NAME] = STALE_BRUSH
            row = self._rows[name] = (texts, fg, bg, fonts)
        return row

    def _display(self, name: str, info, col: int):
        if col == COL_NAME:
            text = (self._model_name or "model") if not name else info.short_name
            return edit_badge(len(self.edits.get(name, ()))) + text
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
            # core.models.tree's sentence says it all ("modifies its input in place"): a label
            # before it would say it twice.
            lines.extend(f"• {hazard_text(hazard) or HAZARD_LABELS.get(hazard, hazard)}"
                         for hazard in sorted(info.hazards))
            edits = self.edits.get(name, ())
            if edits:
                lines.append("<b>Edited in the next runs:</b>")
                lines.extend(f"✎ {html.escape(d)}" for d in edits)
            return "<br>".join(lines)
        if col == COL_TYPE:  # the whole type where the column is too narrow for it
            return info.type_name
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
                text += "<br><i>" + html.escape(self._stale_text(name)) + "</i>"
            return text
        return None

    def _health(self, name: str):
        grad = self.store.latest_tensor(name, GRAD_OUTPUT)
        return health(self.stats_of(name), grad.stats if grad is not None else None)

    def _stale_text(self, name: str) -> str:
        """Which earlier run the statistics shown are of, and why (see _stale)."""
        run_id = self.store.latest_tensor(name, OUTPUT).run_id
        started = self.store.started(run_id)
        what = f"run {run_id}" + (f", {started.label}" if started and started.label else "")
        return (f"from an earlier run, the last that captured this module ({what}); the "
                f"newer runs did not capture it (while a video plays, only the selected "
                f"module is)")

    def _stale(self, name: str) -> bool:
        """The output statistics shown are not of the newest run with statistics."""
        frame = self.store.latest_tensor(name, OUTPUT)
        return frame is not None and frame.run_id != self.store.latest_run(STATS_KINDS)
