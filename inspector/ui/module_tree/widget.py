"""The module tree pane: a filter box over a tree view of ModuleTreeModel, with a context
menu for the hook kinds of a module and its sub-modules, and a header menu for columns.

Selecting a module shows it in the views (`moduleSelected`). Other parts of the window add
their entries to a module's context menu through `menu_extensions` (the edits do).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QByteArray, QEvent, QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QFontMetrics, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLineEdit,
    QMenu,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from inspector.core.records.kinds import KINDS
from inspector.ui.module_tree.cells import (
    COL_HEALTH,
    COL_MEAN,
    COL_NAME,
    COL_PARAMS,
    COL_SHAPE,
    COL_STD,
    COL_TYPE,
    COL_ZEROS,
    HEADERS,
    KIND_COLUMNS,
    KIND_NAMES,
    KIND_TIPS,
)
from inspector.ui.module_tree.model import ModuleTreeModel
from inspector.ui.shell.arrow_keys import claims_arrow_keys

# What the Module and Type columns fit at first: resnet18's deepest long name (layer2.0's
# "downsample", four levels in, counting the model's own row) and the common layer types;
# no wider, so that the statistics stay in view beside them. Longer ones are elided, the
# cell's tooltip has the whole text, and a column's width is the user's once changed (the
# header's state is saved).
FIT_NAME, FIT_DEPTH = "downsample", 4
FIT_TYPES = ("BatchNorm2d", "AdaptiveAvgPool2d", "MaxPool2d", "BasicBlock", "Sequential")
CELL_PADDING = 14  # the style's margins around a cell's text, with a little to spare


def fitting_widths(metrics: QFontMetrics, indentation: int) -> tuple[tuple[int, int], ...]:
    """(column, width) of the Module and Type columns for FIT_NAME and FIT_TYPES."""
    name = FIT_DEPTH * indentation + metrics.horizontalAdvance(FIT_NAME) + CELL_PADDING
    kind = max(metrics.horizontalAdvance(t) for t in FIT_TYPES) + CELL_PADDING
    return (COL_NAME, name), (COL_TYPE, kind)


def model_widths(tree, model_name: str, metrics: QFontMetrics, bold: QFontMetrics,
                 indentation: int, header: QHeaderView) -> tuple[tuple[int, int], ...]:
    """(column, width) of the Module and Type columns for this model's rows, every depth
    counted, never wider than fitting_widths: a small model leaves the statistics and the
    hook columns in view, a large one is elided there (the tooltips hold the whole text)."""
    rows = list(tree.modules.values())
    # the root row shows the model's name, in bold; a row's name is its last dotted part
    name = max(
        (info.depth + 1) * indentation + CELL_PADDING
        + (bold.horizontalAdvance(model_name) if info.name == ""
           else metrics.horizontalAdvance(info.name.rsplit(".", 1)[-1]))
        for info in rows)
    kind = max(metrics.horizontalAdvance(info.type_name) for info in rows) + CELL_PADDING
    caps = dict(fitting_widths(metrics, indentation))
    return tuple((col, min(caps[col], max(width, header.sectionSizeHint(col))))
                 for col, width in ((COL_NAME, name), (COL_TYPE, kind)))


KIND_COLUMN_WIDTH = 35  # the capture checkboxes' columns, at least


class _TreeView(QTreeView):
    def event(self, e: QEvent) -> bool:
        return claims_arrow_keys(e) or super().event(e)


class ModuleTreeWidget(QWidget):
    """The filter box and the tree view. Emits the selected module's qualified name."""

    moduleSelected = Signal(str)
    camLayerRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None, store=None) -> None:
        super().__init__(parent)
        self.model = ModuleTreeModel(self, store)
        # Called as extension(menu, name, info) at the end of a module's context menu.
        self.menu_extensions: list[Callable] = []
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter modules by name or type…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._set_filter)
        self.view = _TreeView()
        self.view.setModel(self.model)
        self.view.setUniformRowHeights(True)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.selectionModel().currentRowChanged.connect(self._current_changed)
        header = self.view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for col, width in ((COL_SHAPE, 78), (COL_PARAMS, 54), (COL_MEAN, 56), (COL_STD, 56),
                           (COL_ZEROS, 44), (COL_HEALTH, 52),
                           *fitting_widths(self.view.fontMetrics(), self.view.indentation())):
            header.resizeSection(col, width)
        header.setMinimumSectionSize(24)
        for col in KIND_COLUMNS:
            # As wide as its header ("∇Out" and its margins), never narrower than a checkbox.
            header.resizeSection(col, max(KIND_COLUMN_WIDTH, header.sectionSizeHint(col)))
        # The parameter count is in the module's tooltip; its column is one right-click away
        # (the header's menu) and the tree stays narrow enough to dock beside the views.
        header.setSectionHidden(COL_PARAMS, True)
        self._user_widths = False  # Module and Type fit each model until the user sizes them
        self._fitting = False
        header.sectionResized.connect(self._section_resized)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addWidget(self.filter)
        layout.addWidget(self.view, 1)

    # -- API -------------------------------------------------------------------------------
    def set_tree(self, tree, model_name: str = "") -> None:
        self.model.set_tree(tree, model_name)
        if tree is not None:
            self.view.expandToDepth(0)
            self._set_filter(self.filter.text())
            if not self._user_widths:
                self._fit_columns(tree, model_name)

    def flush(self) -> None:
        self.model.flush()

    def current_module(self) -> str | None:
        return self.model.name_of(self.view.currentIndex())

    def select_module(self, name: str) -> bool:
        index = self.model.index_of(name)
        if not index.isValid():
            return False
        if self.is_filtered_out(name):
            self.filter.clear()
        self.view.setCurrentIndex(index)
        self.view.scrollTo(index)
        return True

    def reveal(self, name: str) -> None:
        """Expand the rows above `name` and scroll to it, leaving the selection alone: a new
        edit's badge is seen even when its module sat in a collapsed branch."""
        index = self.model.index_of(name)
        if index.isValid() and not self.is_filtered_out(name):
            self.view.scrollTo(index)  # QTreeView expands the collapsed rows above it

    def is_filtered_out(self, name: str) -> bool:
        index = self.model.index_of(name)
        while index.isValid():
            if self.view.isRowHidden(index.row(), index.parent()):
                return True
            index = index.parent()
        return False

    def header_state(self) -> QByteArray:
        """Column widths and which columns are hidden, for the settings."""
        return self.view.header().saveState()

    @property
    def widths_set_by_user(self) -> bool:
        """Whether the user sized the Module or Type column (then no model refits them)."""
        return self._user_widths

    def restore_header_state(self, state, widths_set_by_user: bool = False) -> None:
        if isinstance(state, QByteArray) and not state.isEmpty():
            self._fitting = True
            restored = self.view.header().restoreState(state)
            self._fitting = False
            self._user_widths = restored and widths_set_by_user

    def _fit_columns(self, tree, model_name: str) -> None:
        bold = self.view.font()
        bold.setBold(True)
        header = self.view.header()
        self._fitting = True
        for col, width in model_widths(tree, model_name, self.view.fontMetrics(),
                                       QFontMetrics(bold), self.view.indentation(), header):
            header.resizeSection(col, width)
        self._fitting = False

    def _section_resized(self, col: int, _old: int, _new: int) -> None:
        if not self._fitting and col in (COL_NAME, COL_TYPE):
            self._user_widths = True  # dragged by the user: theirs from now on

    # -- internals ---------------------------------------------------------------------------
    def _header_menu(self, pos: QPoint) -> None:
        """Show or hide columns (the tree is often docked narrow)."""
        header = self.view.header()
        menu = QMenu(self)
        for col, title in enumerate(HEADERS):
            if col == COL_NAME:
                continue
            action = menu.addAction(title)
            action.setCheckable(True)
            action.setChecked(not header.isSectionHidden(col))
            action.toggled.connect(lambda on, c=col: header.setSectionHidden(c, not on))
        menu.exec(header.mapToGlobal(pos))

    def _set_filter(self, text: str) -> None:
        """Hide the rows that do not match (name or type) unless a descendant does.

        Rows are hidden in the view rather than filtered by a proxy model: a proxy doubled the
        Python calls of every repaint, and the tree repaints whenever the statistics change."""
        tree = self.model.tree
        if tree is None:
            return
        needle = text.strip().lower()
        shown: set[str] = set()
        if needle:
            for name, info in tree.modules.items():
                if needle in name.lower() or needle in info.type_name.lower():
                    while name is not None and name not in shown:
                        shown.add(name)
                        name = tree.modules[name].parent
        for name in tree.modules:
            if name:
                index = self.model.index_of(name)
                self.view.setRowHidden(index.row(), index.parent(), bool(needle) and
                                       name not in shown)
        if needle:
            self.view.expandAll()

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        name = self.model.name_of(current)
        if name is not None:
            self.moduleSelected.emit(name)

    def _context_menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        name = self.model.name_of(index)
        if name is None:
            return
        menu = self._build_menu(name)
        menu.exec(self.view.viewport().mapToGlobal(pos))

    def _build_menu(self, name: str) -> QMenu:
        info = self.model.tree.modules[name]
        menu = QMenu(self)
        title = menu.addAction(f"{name or self.model._model_name or 'model'} ({info.type_name})")
        title.setEnabled(False)
        show = menu.addAction("Show in the views")
        show.triggered.connect(lambda: self.select_module(name))
        menu.addSection("Capture in the next run")
        kinds = self.model.kinds.get(name, frozenset())
        for kind in KINDS:
            action = menu.addAction(KIND_NAMES[kind].capitalize())
            action.setCheckable(True)
            action.setChecked(kind in kinds)
            action.setToolTip(KIND_TIPS[kind])
            action.toggled.connect(lambda on, k=kind: self.model.set_kind([name], k, on))
        if info.children:
            below = menu.addMenu("For this module and everything below")
            for kind in KINDS:
                for on, verb in ((True, "Capture"), (False, "Do not capture")):
                    action = below.addAction(f"{verb} {KIND_NAMES[kind]}")
                    action.triggered.connect(
                        lambda _=False, k=kind, v=on: self.model.set_kind(
                            self.model.descendants(name), k, v)
                    )
        menu.addSeparator()
        shape = info.output_shape
        cam = menu.addAction("Use as the CAM layer")
        cam.setEnabled(bool(name) and shape is not None and len(shape) in (3, 4))
        cam.triggered.connect(lambda: self.camLayerRequested.emit(name))
        copy = menu.addAction("Copy name")
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(name))
        if info.children:
            expand = menu.addAction("Expand all below")
            expand.triggered.connect(
                lambda: self.view.expandRecursively(
                    self.model.index_of(name))
            )
        for extend in self.menu_extensions:
            extend(menu, name, info)
        return menu

