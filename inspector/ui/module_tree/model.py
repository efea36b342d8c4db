"""The module tree's data: a QAbstractItemModel over core's ModuleTree.

Built once per loaded model (a reset); afterwards only its statistics columns change: the
model subscribes, in the run store, to the outputs and output gradients of the modules it
shows, and reads their newest statistics from there; it updates the numbers in place
(dataChanged for the rows that changed, a few times a second), so selection, expansion and
scrolling never jump.

Columns (cells.py): the module, its type, output shape, parameters; the last run's output
mean, std and fraction of zeros with a health badge (dead or exploding values), which
rows.RowCells makes; then one checkbox per hook kind (input, output, output gradient, input
gradient), which is what the next run captures. Statistics of an earlier run than the newest
(a module the last runs did not capture: while a video plays, each frame is a live run of
the selected module alone, and the run store keeps the last full run for the others) are
grey and italic, and their tooltip names that run's image or video frame. A module that the
next runs edit (the window's Edits) has a pencil badge after its name, and its tooltip lists
the edits (`set_edits`). The layers of an opened channel atlas (the Dataset dock) carry
their count of dead channels in the atlas as a badge in the Health column, explained in its
tooltip (`set_atlas`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QGuiApplication

from inspector.core.records.frames import RunFinished, TensorFrame
from inspector.core.records.kinds import DEFAULT_KINDS as KINDS_BY_DEFAULT
from inspector.core.run.store import RunStore
from inspector.ui.module_tree.cells import (
    ALIGN,
    COL_HEALTH,
    COL_MEAN,
    COL_NAME,
    COLUMN_OF_KIND,
    EDITED_COLOR,
    HEADER_TIPS,
    HEADERS,
    KIND_COLUMNS,
    KIND_TIPS,
    N_COLUMNS,
    STATS_COLUMNS,
)
from inspector.ui.module_tree.rows import STATS_KINDS, RowCells

DEFAULT_KINDS = frozenset(KINDS_BY_DEFAULT)

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
        self.cells = RowCells(self.store)  # what the rows show, but for the checkboxes
        self._dirty: set[str] = set()
        self._rows_run: int | None = None  # the statistics run the cached rows were made for
        self._last_flush = 0.0
        self._run_complete = True
        self._edited_stats = False  # whether the statistics shown are of an edited run
        # The current run was cancelled: the rows show the last complete run's statistics,
        # the statistics headers in italics and their tooltips say which run.
        self._showing_cancel = False
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
        self.cells.reset(tree, model_name)
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
        old = self.cells.edits
        changed = {n for n in set(edits) | set(old) if edits.get(n) != old.get(n)}
        self.cells.edits = edits
        for name in changed:
            self.cells.forget(name)
            index = self.index_of(name, COL_NAME)
            if index.isValid():
                self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole,
                                                     Qt.ItemDataRole.ToolTipRole])

    def set_atlas(self, dead: dict[str, tuple[int, int]], about: str = "") -> None:
        """Per layer of the channel atlas opened: (dead channels, channels); `about` says which
        atlas (its image count and folder) in the tooltips. {} takes the badges away."""
        changed = set(dead) | set(self.cells.atlas_dead)
        self.cells.atlas_dead, self.cells.atlas_about = dict(dead), about
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
            self.cells.forget()
            self._dirty.update(self._names)
        self._dirty.add(frame.module)
        self.cells.forget(frame.module)

    def _run_changed(self, frame) -> None:
        if isinstance(frame, RunFinished):
            self._run_complete = True
            if frame.status == "cancelled" or self._showing_cancel:
                # A cancel puts the rows back on the last complete run (the store's shown
                # run), and a later run takes them off it: every row is read again.
                self._showing_cancel = self.store.cancelled
                self.cells.forget()
                self._rows_run = self.store.latest_run(STATS_KINDS)
                self._dirty.update(self._names)
                self.headerDataChanged.emit(Qt.Orientation.Horizontal, STATS_COLUMNS[0],
                                            STATS_COLUMNS[-1])
        elif frame.run_id != self.store.baseline_run:  # the unedited run is never shown here
            edited = bool(frame.edits)
            if edited != self._edited_stats:
                self._edited_stats = edited
                self.headerDataChanged.emit(Qt.Orientation.Horizontal, STATS_COLUMNS[0],
                                            STATS_COLUMNS[-1])

    def _store_cleared(self) -> None:
        self.cells.forget()
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
            return HEADERS[section]
        if role == Qt.ItemDataRole.ForegroundRole and edited:
            # The statistics are the edited run's: what the modules after an edit saw. In
            # colour, not a glyph: "Zeros ✎" and "Health ✎" do not fit their columns.
            return QBrush(QColor(EDITED_COLOR))
        if role == Qt.ItemDataRole.FontRole and self._showing_cancel and section in STATS_COLUMNS:
            font = QGuiApplication.font()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            if section in KIND_COLUMNS:
                return KIND_TIPS[KIND_COLUMNS[section]]
            tip = HEADER_TIPS.get(section)
            if edited and tip:
                tip = (f"{tip}; of the edited run (the header in orange): what the modules "
                       f"after an edit saw")
            shown = self.store.shown if self._showing_cancel else None
            if tip and section in STATS_COLUMNS and shown is not None:
                tip += (f"; of run {shown}, the last complete run (run "
                        f"{self.store.current_run} was cancelled)")
            return tip
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
            return self.cells.row(name)[0][col]
        if role == FOREGROUND:
            return self.cells.row(name)[1][col]
        if role == BACKGROUND:
            return self.cells.row(name)[2][col]
        if role == ALIGNMENT:
            return ALIGN.get(col)
        if role == DECORATION:
            return self.cells.decoration(name, col)
        if role == TOOLTIP:
            return self.cells.tooltip(name, col)
        if role == FONT:
            if col == COL_NAME and not name:
                font = QGuiApplication.font()
                font.setBold(True)
                return font
            return self.cells.row(name)[3][col]
        if role == ModuleNameRole:
            return name
        return None
