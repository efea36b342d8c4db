"""What every data view shares: paint only when visible, and read what it shows from the
run store.

A view subscribes to the keys it shows (`subscribe`); the store tells it when one of them
changed, when a run starts or finishes, and when a new model emptied it. Which run is shown
(the previous run's picture stays until the new run's first frame of the view's kinds; a
failed run shows nothing of an earlier image's) is the store's answer (`shown_run`), not the
view's own. A hidden view is told too, but only marks itself dirty; it paints once in
showEvent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from inspector.core.run.store import RunStore
from inspector.core.run.subscriptions import Subscription

HINT_STYLE = "color: #8a8a8a; padding: 12px;"


class FrameView(QWidget):
    """Base class: subclasses set `kinds`, subscribe to what they show and implement `_paint`."""

    kinds: tuple[str, ...] = ()  # what the view shows: tensor kinds, "cam", "predictions"

    def __init__(self, parent: QWidget | None = None, store: RunStore | None = None) -> None:
        super().__init__(parent)
        # The window's run store (the frame router fills it), or one of the view's own.
        self.store = store if store is not None else RunStore()
        self.subscriptions: list[Subscription] = []
        self._dirty = False
        # How many times _paint ran. Nothing in the window reads it: it is how a test or a
        # benchmark sees that a hidden view does not paint and that a burst costs one paint.
        self.paint_count = 0
        # Coalesces many frames of one drain into one paint (see schedule_paint).
        self._paint_timer = QTimer(self)
        self._paint_timer.setSingleShot(True)
        self._paint_timer.setInterval(0)
        self._paint_timer.timeout.connect(self.request_paint)

    def subscribe(self, on_frame: Callable, kinds: Iterable[str],
                  modules: Iterable[str] | None = None, runs: bool = True) -> Subscription:
        """Be told of stored frames of `kinds` (of `modules`; None: all); with `runs`, also
        of runs starting and finishing (`run_changed`) and of the store emptied (`cleared`)."""
        sub = self.store.subscribe(on_frame, kinds, modules,
                                   on_run=self.run_changed if runs else None,
                                   on_clear=self.cleared if runs else None)
        self.subscriptions.append(sub)
        return sub

    # -- what the store says ------------------------------------------------------------------
    @property
    def shown_run(self) -> int | None:
        """The run whose data this view shows (see RunStore.shown_run)."""
        return self.store.shown_run(self.kinds)

    @property
    def failed(self) -> bool:
        """The run this view shows failed."""
        return self.store.failed(self.kinds)

    def run_changed(self, frame) -> None:
        """A RunStarted or RunFinished: hints ("waiting", "failed") may change."""
        self.request_paint()

    def cleared(self) -> None:
        """A new model emptied the store."""
        self._paint_timer.stop()
        self.request_paint()

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
        """No paint and no notification after this (the window is closing)."""
        self._paint_timer.stop()
        for sub in self.subscriptions:
            self.store.unsubscribe(sub)
        self.subscriptions.clear()


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
