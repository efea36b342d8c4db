"""File ▸ Save view as PNG and File ▸ Save run as NPZ: keeping what the window shows.

A view's PNG is what is on screen, without its controls: an activation or gradient view's
header (module, statistics, "edited") above its mosaic or zoomed channel with the colour
bar; the CAM view's header (method, layer, class label) above the overlay and its colour
bar; the predictions as they are drawn, every row of the table. A view on a tab behind
another is drawn at the size its tab would have in front (it was squashed to a stale size
there), and no picture is smaller than MIN_PNG_SIZE: the view is resized for the picture and
given its size back before the window next paints.

The window's frames hold previews, not whole tensors, so the NPZ comes from a run of its
own: the current run's request again, capturing the whole output (and, with gradients on,
the output gradient) of every module the tree captures, and the model input. That run's
frames go to a channel of its own (Session.submit_request), so the views never see it. The
file has the layout `network-inspector analyse` writes (core.export.arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QObject, QPoint, QSize, Signal
from PySide6.QtGui import QAction, QImage, QPainter
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QMainWindow,
    QMenu,
    QTableView,
    QWidget,
)

from inspector.core.records.frames import ActivationFrame, ErrorFrame
from inspector.core.records.kinds import GRAD_OUTPUT, INPUT, OUTPUT

# Dock keys of the views a PNG can be saved of, in menu order.
SAVABLE_VIEWS = ("activation", "gradient", "cam", "predictions", "input_stats", "divergence")
EXPORT_CHANNEL_CAPACITY = 1 << 20  # frames of the export run: none may be dropped
MIN_PNG_SIZE = QSize(320, 240)  # a view's picture is never smaller (device-independent pixels)


class NothingToSave(Exception):
    """The view shows no data yet (its message says so, in words)."""


# -- PNG ----------------------------------------------------------------------------------------


def view_parts(view: QWidget) -> list[QWidget]:
    """The widgets whose pictures, top to bottom, make a view's PNG."""
    panel = getattr(view, "panel", None)
    if panel is not None:  # an activation or gradient view (TensorView)
        if panel.data is None:
            raise NothingToSave("This view shows no tensor yet: run an image first.")
        return [view.header_bar, panel.pages.currentWidget()]
    drawn = getattr(view, "drawn", None)
    if drawn is not None:  # the CAM view: its header names the method, layer and class
        if view.composite is None or drawn[0] is None:
            raise NothingToSave("The CAM view shows no map yet: run an image with gradients.")
        return [view.header, view.view]
    return [view]


def check_savable(view: QWidget) -> None:
    """NothingToSave, saying why, when the view has no picture to save."""
    view_parts(view)
    if not view.isVisible():  # a closed pane does not paint what arrives (views/base.py)
        dock = view.parentWidget()
        if isinstance(dock, QDockWidget):
            name = dock.windowTitle()
            raise NothingToSave(f"The {name} pane is closed: open it with View \u25b8 {name} "
                                "first.")
        raise NothingToSave("This view is not shown: show it first.")


def on_screen(widget: QWidget) -> bool:
    """Shown and not on a tab behind another (Qt keeps such a dock "visible", off the window
    at a stale size)."""
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def shown_size(view: QWidget) -> QSize:
    """The view's size on screen; on a tab behind another, the size of the tab in front
    (what the view gets when its tab is brought forward)."""
    dock = view.parentWidget()
    if on_screen(view) or not isinstance(dock, QDockWidget):
        return view.size()
    main = dock.parentWidget()
    tabs = main.tabifiedDockWidgets(dock) if isinstance(main, QMainWindow) else []
    front = next((d.widget() for d in tabs if d.widget() is not None and on_screen(d.widget())),
                 None)
    return front.size() if front is not None else view.size()


def hidden_rows_height(view: QWidget) -> int:
    """How much taller a view's tables must be to show every row (the predictions' last row
    was cut in half at the default layout)."""
    tables = [t for t in view.findChildren(QTableView) if t.isVisible()]
    return max((t.verticalHeader().length() - t.viewport().height() for t in tables), default=0)


@contextmanager
def drawn_at(view: QWidget, size: QSize) -> Iterator[None]:
    """The view resized to `size` with its tables scrolled to the top, then put back as it
    was. Qt lays out a shown widget at once on a resize: no event loop runs in between, so
    the window never paints it at that size."""
    geometry = view.geometry()
    tables = [(t, t.verticalScrollBar().value()) for t in view.findChildren(QTableView)]
    view.resize(size)
    for table, _ in tables:
        table.verticalScrollBar().setValue(0)
    try:
        yield
    finally:
        view.setGeometry(geometry)
        for table, value in tables:
            table.verticalScrollBar().setValue(value)


def picture_size(view: QWidget) -> QSize:
    """The size a view is drawn at for its picture: as shown (or as its tab would be in
    front), at least MIN_PNG_SIZE."""
    return shown_size(view).expandedTo(MIN_PNG_SIZE)


def grab_view(view: QWidget) -> QImage:
    """A view's parts (view_parts) stacked into one image, at the screen's pixel density."""
    check_savable(view)
    size = picture_size(view)
    with drawn_at(view, size):
        extra = hidden_rows_height(view)
        if extra > 0:
            view.resize(size.width(), size.height() + extra)
        pixmaps = [w.grab() for w in view_parts(view) if w.isVisible()]
    pixmaps = [p for p in pixmaps if not p.isNull()]
    if not pixmaps:
        raise NothingToSave("This view is not on screen: show its pane first.")
    ratio = pixmaps[0].devicePixelRatio()
    width = max(p.width() for p in pixmaps)
    height = sum(p.height() for p in pixmaps)
    image = QImage(width, height, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(view.palette().window().color())
    painter = QPainter(image)
    y = 0
    for p in pixmaps:
        p.setDevicePixelRatio(1.0)  # paint in device pixels, one onto the other
        painter.drawPixmap(QPoint(0, y), p)
        y += p.height()
    painter.end()
    image.setDevicePixelRatio(ratio)
    return image


def save_view_png(view: QWidget, path: str | Path) -> Path:
    """Write the view's picture to `path` (PNG). OSError when the file cannot be written."""
    path = Path(path)
    image = grab_view(view)
    if not image.save(str(path), "PNG"):
        raise OSError(f"could not write {path}: check the folder exists and can be written")
    return path


# -- NPZ ----------------------------------------------------------------------------------------


def export_request(request, model=None):
    """`request` again, capturing whole tensors: every module's output (and its output
    gradient when the run goes backward), the model input; no previews or statistics, and
    nothing kept or compared between runs. `model`: to list the leaves when the request
    captures the Session's default (capture None)."""
    from inspector.core.run.capture_spec import CaptureSpec, leaf_names

    if request.capture is not None:
        captured = request.capture.modules
    else:
        captured = {name: frozenset({OUTPUT, GRAD_OUTPUT}) for name in leaf_names(model)}
    wanted = {OUTPUT, GRAD_OUTPUT} if request.gradients else {OUTPUT}
    modules = {n: frozenset(k) & wanted for n, k in captured.items()}
    modules = {n: k for n, k in modules.items() if k}
    # The model's own input, through a pre-hook on the model (module ""): what it received.
    modules[""] = modules.get("", frozenset()) | {INPUT}
    capture = CaptureSpec(modules=modules, full=frozenset(modules), stats=False)
    return request.with_(capture=capture, keep_outputs=False, compare_with=None)


def npz_from_run(frames: list, outcome) -> dict:
    """The NPZ's arrays (core.export.arrays) from the export run's frames and outcome."""
    from inspector.core.export.arrays import full_arrays, npz_arrays

    model_input = next((f.full for f in frames if isinstance(f, ActivationFrame)
                        and f.module == "" and f.kind == INPUT and f.full is not None), None)
    if model_input is None:
        raise RuntimeError("the run did not see the model's input")
    arrays = full_arrays(frames)
    arrays.update({("attr", m): a for m, a in outcome.attributions.items()})
    cams = {method: cam for (method, _layer), cam in outcome.cams.items()}
    return npz_arrays(model_input, arrays, cams, outcome.logits)


class RunSaver(QObject):
    """Saves the current run as NPZ: runs it again on the worker with whole tensors, then
    writes the file on the UI thread. `saved(path)` or `failed(message)` when done."""

    saved = Signal(str)
    failed = Signal(str)

    def __init__(self, control, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.control = control  # SessionControl: its session, router and last request
        self.busy = False

    def save(self, path: str | Path) -> bool:
        """Start; False (and `failed`) when there is nothing to save or a save is going on."""
        from inspector.core.run.channel import FrameChannel

        control = self.control
        if self.busy:
            self.failed.emit("A run is being saved already: wait for it to finish.")
            return False
        if control.session is None or control.loaded is None or control.last_request is None:
            self.failed.emit("Nothing to save yet: load a model and run an image first.")
            return False
        request = export_request(control.last_request, control.loaded.model)
        channel = FrameChannel(EXPORT_CHANNEL_CAPACITY)
        _run_id, future = control.session.submit_request(request, channel=channel)
        self.busy = True
        control.router.watch(future, lambda f: self._done(f, channel, Path(path)))
        return True

    def _done(self, future, channel, path: Path) -> None:
        from inspector.core.export.files import save_npz

        self.busy = False
        frames = channel.drain()
        try:
            outcome = future.result()
        except Exception as e:  # noqa: BLE001 - said in the window, not raised
            self.failed.emit(f"Saving the run failed: {type(e).__name__}: {e}")
            return
        if outcome.status != "ok":
            errors = [f.message for f in frames if isinstance(f, ErrorFrame)]
            reason = errors[0] if errors else outcome.error or outcome.status
            self.failed.emit(f"Saving the run failed: {reason}")
            return
        try:
            save_npz(path, npz_from_run(frames, outcome))
        except (OSError, RuntimeError, ValueError) as e:
            self.failed.emit(f"Could not save {path}: {e}")
            return
        self.saved.emit(str(path))


# -- the window's actions ---------------------------------------------------------------------


def ask_save_path(parent: QWidget, title: str, suggested: str, filter_text: str) -> str:
    """The file the user picks ("" when cancelled). Tests replace this function."""
    path, _ = QFileDialog.getSaveFileName(parent, title, suggested, filter_text)
    return path


class SaveActions(QObject):
    """The File menu's "Save view as PNG" submenu and "Save run as NPZ…" of a MainWindow."""

    def __init__(self, ctx, ask: Callable[..., str] | None = None) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
        window = ctx.parent
        # Looked up when called, so that a test can replace ask_save_path.
        self.ask = ask or (lambda *args: ask_save_path(*args))
        self.saver = RunSaver(ctx.control, self)
        self.saver.saved.connect(lambda path: ctx.reporter.info(f"Saved the run to {path}"))
        self.saver.failed.connect(ctx.reporter.report)
        self.png_menu = QMenu("Save view as &PNG", window)
        self.png_actions: dict[str, QAction] = {}
        from inspector.ui.shell.docks import DOCKS

        for key in SAVABLE_VIEWS:
            if key in ctx.views:
                action = self.png_menu.addAction(f"{DOCKS[key][0]}\u2026")
                action.triggered.connect(lambda _=False, k=key: self.save_png(k))
                self.png_actions[key] = action
        self.npz_action = QAction("Save run as &NPZ\u2026", window)
        self.npz_action.setStatusTip("The current image's run with whole tensors, as analyse "
                                     "writes it")
        self.npz_action.triggered.connect(lambda: self.save_npz())

    def save_png(self, key: str, path: str | None = None) -> Path | None:
        view = self.ctx.views[key]
        try:
            check_savable(view)  # before the dialog: with nothing to save, no dialog
        except NothingToSave as e:
            self.ctx.reporter.report(str(e))
            return None
        if path is None:
            path = self.ask(self.ctx.parent, "Save view as PNG", f"{key}.png", "PNG images (*.png)")
            if not path:
                return None
        try:
            saved = save_view_png(view, path)
        except (NothingToSave, OSError) as e:
            self.ctx.reporter.report(str(e))
            return None
        self.ctx.reporter.info(f"Saved {saved}")
        return saved

    def save_npz(self, path: str | None = None) -> bool:
        if path is None:
            request = self.ctx.control.last_request
            name = Path(str(request.label or "run")).stem if request is not None else "run"
            path = self.ask(self.ctx.parent, "Save run as NPZ", f"{name}.npz", "NumPy arrays (*.npz)")
            if not path:
                return False
        return self.saver.save(path)


def install_save_actions(ctx) -> SaveActions:
    """The save actions in the window's File menu, above Quit (once the views exist; ctx:
    ui.shell.context.WindowContext)."""
    actions = SaveActions(ctx)
    separator = QAction(ctx.parent)
    separator.setSeparator(True)
    for item in (actions.png_menu, actions.npz_action, separator):
        ctx.add_to_menu("File", item, before="&Quit")
    return actions
