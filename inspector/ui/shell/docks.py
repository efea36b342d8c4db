"""The window's panes: which docks there are, the view class in each, and their layout.

Every pane is a QDockWidget, so a user can move, tab, float or close it; View ▸ Reset
layout brings back the layout made here. The default puts what is read together side by
side: the module tree on the left; the image and its predictions in the middle; the
selected module's activations (tabbed with gradients, input statistics and the divergence
of two runs, and a vision transformer's attention explorer, the Attention dock) above the
class activation map (tabbed with its faithfulness scores, and Depth: a vision transformer's
logit lens) on the right. The Dataset dock (a channel atlas) is a tab behind the
predictions, under the image its thumbnails open.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QByteArray, QPoint, QRect, Qt, QTimer
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QTabBar, QWidget

# Dock key -> (title, the view that fills it: (module in inspector.ui.views, class), or
# None for the panes the window builds itself).
DOCKS: dict[str, tuple[str, tuple[str, str] | None]] = {
    "images": ("Image", None),
    "tree": ("Modules", None),
    "activation": ("Activations", ("activation_view", "ActivationView")),
    "gradient": ("Gradients", ("gradient_view", "GradientView")),
    "input_stats": ("Input statistics", ("input_stats_view", "InputStatsView")),
    "divergence": ("Divergence", ("divergence_view", "DivergenceView")),
    "predictions": ("Predictions", ("predictions_view", "PredictionsView")),
    "cam": ("Class activation map", ("cam_view", "CamView")),
    # A vision transformer's attention (ui.attention): the explorer, the logit lens.
    "attention": ("Attention", ("attention_view", "AttentionView")),
    "depth": ("Depth", ("lens_view", "LensView")),
    "faithfulness": ("Faithfulness", ("faithfulness_view", "FaithfulnessView")),
    "dataset": ("Dataset", None),  # a channel atlas's top images (dataset_dock.py fills it)
}
DEFAULT_SIZE = (1440, 900)


class Dock(QDockWidget):
    """A dock that takes dropped files too: a floating dock is a window of its own, so a
    drop on it would not reach the main window. `drop_target` handles the events."""

    def __init__(self, title: str, key: str, parent: QMainWindow, drop_target: QWidget) -> None:
        super().__init__(title, parent)
        self.setObjectName(f"dock_{key}")  # saveState/restoreState find docks by name
        self.setAcceptDrops(True)
        self._target = drop_target

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        self._target.dragEnterEvent(event)

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        self._target.dragMoveEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802
        self._target.dropEvent(event)


def make_docks(window: QMainWindow, widget_for: Callable[[str], QWidget]) -> dict[str, Dock]:
    docks = {}
    for key, (title, _view) in DOCKS.items():
        dock = Dock(title, key, window, window)
        dock.setWidget(widget_for(key))
        docks[key] = dock
    return docks


def default_layout(window: QMainWindow, docks: dict[str, Dock]) -> None:
    d = docks
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, d["tree"])
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, d["images"])
    window.splitDockWidget(d["images"], d["activation"], Qt.Orientation.Horizontal)
    window.splitDockWidget(d["images"], d["predictions"], Qt.Orientation.Vertical)
    window.splitDockWidget(d["activation"], d["cam"], Qt.Orientation.Vertical)
    window.tabifyDockWidget(d["activation"], d["gradient"])
    window.tabifyDockWidget(d["gradient"], d["input_stats"])
    window.tabifyDockWidget(d["input_stats"], d["divergence"])
    window.tabifyDockWidget(d["divergence"], d["attention"])
    window.tabifyDockWidget(d["predictions"], d["dataset"])
    window.tabifyDockWidget(d["cam"], d["faithfulness"])  # a map's scores, beside it
    window.tabifyDockWidget(d["faithfulness"], d["depth"])
    d["activation"].raise_()
    d["predictions"].raise_()
    d["cam"].raise_()
    default_sizes(window, docks)


def default_sizes(window: QMainWindow, docks: dict[str, Dock]) -> None:
    """Sizes only stick once the window has its own size: call again when first shown."""
    d = docks
    horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
    # One call per dock area: Qt sizes the left and right areas as a pair of docks. The tree
    # gets the width of its columns; the activation mosaic the rest.
    window.resizeDocks([d["tree"], d["images"]], [650, 790], horizontal)
    window.resizeDocks([d["images"], d["activation"]], [310, 480], horizontal)
    window.resizeDocks([d["images"], d["predictions"]], [480, 300], vertical)
    window.resizeDocks([d["activation"], d["cam"]], [500, 300], vertical)


def reset_layout(window: QMainWindow, docks: dict[str, Dock], default_state: QByteArray) -> None:
    """View ▸ Reset layout: every dock back in its default place at its default size, in a
    window of the default size (or the room its screen has, where that is less)."""
    for dock in docks.values():
        dock.setFloating(False)
    window.restoreState(default_state)
    if not (window.isMaximized() or window.isFullScreen()):
        room = screen_room(window)
        window.resize(min(DEFAULT_SIZE[0], room.width()), min(DEFAULT_SIZE[1], room.height()))
    default_sizes(window, docks)
    tidy_tab_bars_later(window)


def screen_room(window: QWidget, at: QPoint | None = None) -> QRect:
    """The room a window has on the screen at `at` (by default, its own screen): the
    screen's area less the desktop's panels."""
    screen = QApplication.screenAt(at) if at is not None else None
    return (screen or window.screen()).availableGeometry()


def hide_stray_tab_bars(window: QMainWindow) -> None:
    """Hide a copy of a tab group's bar that no group uses, after the layout has settled.

    Qt 6.11 makes three bars for our two tab groups: tabifying Predictions and Dataset after
    the Activations group leaves a second "Predictions | Dataset" bar shown where the group
    first sat, over the status bar. The bar in use lies along the edge of the dock whose tab
    is current; of bars with the same tabs, any other is hidden."""
    bars = [b for b in window.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly)
            if b.isVisible() and b.count() > 0]
    docks = {d.windowTitle(): d for d in window.findChildren(QDockWidget)}
    groups: dict[tuple[str, ...], list[QTabBar]] = {}
    for bar in bars:
        groups.setdefault(tuple(bar.tabText(i) for i in range(bar.count())), []).append(bar)
    for tabs, same in groups.items():
        if len(same) < 2:
            continue
        current = docks.get(tabs[same[0].currentIndex()])
        for bar in same:
            if current is None or not _along(bar, current):
                bar.hide()


def _along(bar: QTabBar, dock: QDockWidget) -> bool:
    """Whether the bar lies along the dock's bottom or top edge, as wide as it."""
    b, d = bar.geometry(), dock.geometry()
    if abs(b.left() - d.left()) > 2 or abs(b.width() - d.width()) > 2:
        return False
    return abs(b.top() - d.bottom()) <= 8 or abs(b.bottom() - d.top()) <= 8


def tidy_tab_bars_later(window: QMainWindow) -> None:
    """hide_stray_tab_bars once the layout that is being made now has been applied."""
    QTimer.singleShot(0, window, lambda: hide_stray_tab_bars(window))


def make_views(docks: dict[str, Dock], views: dict[str, QWidget], store, reporter) -> None:
    """Each DOCKS view not made yet, in its dock, reading `store` (a view that fails to
    start is reported, and the others still start)."""
    import importlib

    for key, (title, spec) in DOCKS.items():
        if spec is None or key in views:
            continue
        module_name, class_name = spec
        try:
            module = importlib.import_module(f"inspector.ui.views.{module_name}")
            view = getattr(module, class_name)(store=store)
        except Exception as e:  # noqa: BLE001 - one broken view must not stop the app
            reporter.report_exception(f"The {title} view failed to start", e)
            continue
        # The view subscribed to what it shows in the store. Its own zero-delay timer
        # paints after the router's tick, each view in its own turn of the event loop
        # (not every view at once in the tick): a run's last frames then cost several
        # short pauses instead of one long one that the user would feel.
        views[key] = view
        docks[key].setWidget(view)
