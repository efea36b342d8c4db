"""What every data view shares: paint only when visible, and follow runs without flicker.

Frames arrive for every view whether it is shown or not (a tabbed dock, a collapsed pane).
A hidden view only stores what it will need and marks itself dirty; it paints once in
showEvent. A view keeps the previous run's picture until the new run's first relevant frame
arrives, so the screen does not blank between runs. When a run fails before any of its data
reached a view, the view forgets the earlier run's data and says that the run failed: the
earlier run is often another image, and its results must not look like this one's.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from inspector.core.run_store import RunStore

HINT_STYLE = "color: #8a8a8a; padding: 12px;"


class FrameView(QWidget):
    """Base class: subclasses implement `handle_frame`, `_paint` and `_reset_run`."""

    def __init__(self, parent: QWidget | None = None, store: RunStore | None = None) -> None:
        super().__init__(parent)
        # The window's run store (the frame router fills it); a view on its own keeps one
        # that `keep` fills from the frames it is handed.
        self.store = store if store is not None else RunStore()
        self._own_store = store is None
        self._dirty = False
        self._run_id: int | None = None  # the run whose data is on screen
        self.failed_run: int | None = None  # the last run that failed
        self.paint_count = 0  # how often _paint ran: lets tests (and profiling) see laziness
        # Coalesces many frames of one drain into one paint (see schedule_paint).
        self._paint_timer = QTimer(self)
        self._paint_timer.setSingleShot(True)
        self._paint_timer.setInterval(0)
        self._paint_timer.timeout.connect(self.request_paint)

    def keep(self, frame) -> None:
        """Store `frame` when this view has a store of its own (else the router did)."""
        if self._own_store:
            self.store.put(frame)

    # -- painting ---------------------------------------------------------------------------
    def request_paint(self) -> None:
        """Paint now if the view can be seen; otherwise paint when it is next shown."""
        if self.isVisible():
            self._dirty = False
            self.paint_count += 1
            self._paint()
        else:
            self._dirty = True

    def schedule_paint(self) -> None:
        """Paint once after the frames now being routed: for views that many frames of a run
        feed (a plot over all layers), so a burst costs one redraw, not one per frame."""
        if not self.isVisible():
            self._dirty = True  # showEvent paints
        elif not self._paint_timer.isActive():
            self._paint_timer.start()

    def flush(self) -> None:
        """Do a scheduled paint now (the frame router may call this after each tick)."""
        if self._paint_timer.isActive():
            self._paint_timer.stop()
            self.request_paint()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._dirty:
            self._dirty = False
            self.paint_count += 1
            self._paint()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 (Qt's name)
        super().hideEvent(event)
        if self._paint_timer.isActive():  # no painting while hidden: do it when shown
            self._paint_timer.stop()
            self._dirty = True

    def _paint(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """No paint after this (the window is closing)."""
        self._paint_timer.stop()

    # -- runs -------------------------------------------------------------------------------
    def accept_run(self, run_id: int) -> bool:
        """Called with each relevant data frame's run id. False for a frame of an older run
        (late, from a cancelled run); on the first frame of a newer run, the previous run's
        state is dropped (`_reset_run`) just before the new data goes in."""
        if self._run_id is not None and run_id < self._run_id:
            return False
        if run_id != self._run_id:
            self._run_id = run_id
            self._reset_run()
        return True

    def run_failed(self, run_id: int) -> bool:
        """Called with the run id of a RunFinished whose status is "error". True when the
        view held only earlier runs' data and dropped it (`_reset_run`); False when it has
        data of the failed run itself (the run failed later on: that data is this image's)."""
        self.failed_run = run_id
        if self._run_id is not None and self._run_id >= run_id:
            return False
        self._run_id = run_id
        self._reset_run()
        return True

    @property
    def failed(self) -> bool:
        """The run this view follows failed."""
        return self.failed_run is not None and self.failed_run == self._run_id

    def _reset_run(self) -> None:
        """Forget per-run state (the new run's data follows immediately)."""

    def clear(self) -> None:
        """Forget everything (a new model was loaded)."""
        self._paint_timer.stop()
        self._run_id = None
        self.failed_run = None
        self._reset_run()
        self.request_paint()


def hint_label(text: str = "") -> QLabel:
    """A centred, wrapped, muted label for empty states ("Select a module in the tree")."""
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setStyleSheet(HINT_STYLE)
    label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
    return label


def layer_ticks(n: int, most: int = 16) -> list[list[tuple[int, str]]]:
    """Integer ticks 0..n-1 for a layer-index axis, at most about `most` of them, for
    AxisItem.setTicks (the default ticks fall between layers and get SI prefixes)."""
    step = max(1, -(-n // most))
    for nice in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if nice >= step:
            step = nice
            break
    return [[(i, str(i)) for i in range(0, n, step)]]


def fmt(value: float) -> str:
    """A number in 4 significant digits, compact for very small or large magnitudes."""
    return f"{value:.4g}"
