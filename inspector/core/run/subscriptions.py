"""How the run store (core.run.store) tells its views what changed.

A Subscription is one view's: which keys it wants, its listeners (held weakly where they are
bound methods) and the notifications waiting for it. Subscribers keeps them and delivers:
notifications wait in each subscription until `notify` delivers them, at once or, when
`deferred`, when the frame router hands them out (one subscriber per display tick). A
subscriber that raises is reported through `on_error` (when set), and the others are
still told.

No Qt and no torch.
"""

from __future__ import annotations

import inspect
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

Key = tuple  # what a stored frame is about: see core.run.store.key_of
Listener = Callable[[Any], None]


def what_of(key: Key) -> str:
    """What a key holds, as subscriptions name it: a tensor kind, "cam" or "predictions"."""
    return key[2] if key[0] == "tensor" else key[0]


def _held(callback: Callable | None) -> Callable[[], Callable | None] | None:
    """A reference to `callback`; to a bound method, a weak one: a subscription must not
    keep its view alive (a view and the store it subscribes to would form a cycle, which
    Python frees at a time of its own choosing, in the middle of another widget's paint)."""
    if callback is None:
        return None
    if inspect.ismethod(callback):
        return weakref.WeakMethod(callback)
    return lambda: callback


class Subscription:
    """What one view shows and how it is told. `on_frame(frame)` for each stored frame whose
    key it `wants`; `on_run(frame)` for each RunStarted and RunFinished; `on_clear()` when
    the store is emptied (a new model). `modules` narrows tensor frames to those modules
    (None: every module) and can be changed at any time. Bound methods are held weakly:
    once their object is gone, the subscription ends."""

    def __init__(self, on_frame: Listener, kinds: frozenset[str] | None = None,
                 modules: set[str] | None = None, on_run: Listener | None = None,
                 on_clear: Callable[[], None] | None = None) -> None:
        self.kinds = kinds  # tensor kinds, "cam", "predictions"; None: all
        self.modules = modules
        self._listeners = {"frame": _held(on_frame), "run": _held(on_run),
                           "clear": _held(on_clear)}
        self.active = True
        self.pending: deque[tuple[str, tuple]] = deque()  # (what, args) not delivered yet

    def wants(self, key: Key) -> bool:
        if self.kinds is not None and what_of(key) not in self.kinds:
            return False
        return key[0] != "tensor" or self.modules is None or key[1] in self.modules

    def listens(self, what: str) -> bool:
        """Has a listener for "frame", "run" or "clear" notifications."""
        return self._listeners[what] is not None

    def listener(self, what: str) -> Callable | None:
        """The listener for `what`; None when its object is gone (or there is none)."""
        ref = self._listeners[what]
        return ref() if ref is not None else None

    def cancel(self) -> None:
        self.active = False
        self.pending.clear()


class Subscribers:
    """The subscriptions of a store, and the notifications on their way to them."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        # True: the store only queues notifications, and notify() delivers them.
        self.deferred = False
        # Called as on_error(callback, exception) when a subscriber raises (inside the
        # except block, so the traceback is at hand); None: the exception propagates.
        self.on_error: Callable[[Callable, Exception], None] | None = None

    # -- subscribing (the views) ----------------------------------------------------------------
    def subscribe(self, on_frame: Listener, kinds: Iterable[str] | None = None,
                  modules: Iterable[str] | None = None, on_run: Listener | None = None,
                  on_clear: Callable[[], None] | None = None) -> Subscription:
        sub = Subscription(on_frame, None if kinds is None else frozenset(kinds),
                           None if modules is None else set(modules), on_run, on_clear)
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.cancel()
        self._subs = [s for s in self._subs if s is not sub]

    @property
    def subscriptions(self) -> list[Subscription]:
        return list(self._subs)

    def notify(self, subscriptions: Iterable[Subscription] | None = None) -> None:
        """Deliver what is pending, in order: to `subscriptions`, or to every subscriber."""
        for sub in list(self._subs if subscriptions is None else subscriptions):
            while sub.active and sub.pending:
                what, args = sub.pending.popleft()
                callback = sub.listener(what)
                if callback is None:  # the view is gone
                    self.unsubscribe(sub)
                    break
                try:
                    callback(*args)
                except Exception as e:
                    if self.on_error is None:
                        raise
                    self.on_error(callback, e)

    def _queue(self, wanted: Callable[[Subscription], bool], what: str, args: tuple) -> None:
        """Queue the notification `what` (args) for every active subscription `wanted`."""
        for sub in self._subs:
            if sub.active and wanted(sub):
                sub.pending.append((what, args))
