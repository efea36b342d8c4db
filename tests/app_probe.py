"""Launch the app as `python -m inspector` does, and record from outside when things happen.

For the e2e test and the launch benchmark: `python tests/app_probe.py --events FILE
[--exit-after-first-run] [app arguments]`. The app itself carries no test hooks: this script
makes the QApplication first, watches for the main window to be shown (an application-wide
event filter), and from then on listens to the window's public signals. Each event is one
JSON line in FILE: {"event": name, "t": time.time(), ...}.

Events: window_shown (with torch_imported: whether torch was already imported), views_ready,
engine_ready, model_loaded, torchvision_ready, first_frames, first_run_finished (with the
panes' screen regions, dock_regions below).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLL_MS = 20


class Probe:
    def __init__(self, events: Path, exit_after_first_run: bool) -> None:
        from PySide6.QtCore import QEvent, QObject, QTimer

        self.events = events
        self.exit_after_first_run = exit_after_first_run
        self.window = None
        self.seen: set[str] = set()
        probe = self

        class ShowFilter(QObject):
            def eventFilter(self, watched, event):  # noqa: N802
                if event.type() == QEvent.Type.Show and probe.window is None:
                    from inspector.ui.window.main_window import MainWindow

                    if isinstance(watched, MainWindow):
                        probe.attach(watched)
                return False

        self.filter = ShowFilter()
        self.poll = QTimer()
        self.poll.setInterval(POLL_MS)
        self.poll.timeout.connect(self.check)

    def record(self, event: str, **extra) -> None:
        if event in self.seen:
            return
        self.seen.add(event)
        with open(self.events, "a") as f:
            f.write(json.dumps({"event": event, "t": time.time(), **extra}) + "\n")

    def attach(self, window) -> None:
        self.window = window
        self.record("window_shown", torch_imported="torch" in sys.modules)
        window.control.engineReady.connect(lambda: self.record("engine_ready"))
        window.control.catalogReady.connect(lambda: self.record("torchvision_ready"))
        window.router.modelLoaded.connect(lambda _frame: self.record("model_loaded"))
        window.router.runFinished.connect(self.run_finished)
        self.poll.start()

    def check(self) -> None:
        """What no signal says: the views exist, the first frames reached them."""
        window = self.window
        if window.views:
            self.record("views_ready")
        if window.router.frames_shown:
            self.record("first_frames")
        if {"views_ready", "first_frames"} <= self.seen:
            self.poll.stop()

    def run_finished(self, frame) -> None:
        from PySide6.QtCore import QTimer

        window = self.window
        if frame.status != "ok" or frame.run_id != window.control.current_run:
            return
        if "first_run_finished" in self.seen:
            return
        store = window.router.store
        self.record("first_run_finished", regions=dock_regions(window),
                    edits=[e.intervention.describe() for e in window.edits.enabled()],
                    edited=store.edited(), reference_run=store.reference_run)
        if self.exit_after_first_run:
            self.poll.stop()
            QTimer.singleShot(0, window.close)


def dock_regions(window) -> dict[str, list[int]]:
    """Where each visible pane's content is on the screen: [x, y, width, height]: the
    tree's rows, the image, each view."""
    parts = {key: dock.widget() for key, dock in window.docks.items()}
    parts["tree"] = window.tree.view.viewport()
    parts["images"] = window.images.canvas
    regions = {}
    for key, widget in parts.items():
        if widget is not None and widget.isVisible():
            top_left = widget.mapToGlobal(widget.rect().topLeft())
            regions[key] = [top_left.x(), top_left.y(), widget.width(), widget.height()]
    return regions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", required=True, type=Path)
    parser.add_argument("--exit-after-first-run", action="store_true")
    args, app_args = parser.parse_known_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from PySide6.QtWidgets import QApplication

    from inspector import app as inspector_app

    qapp = QApplication([sys.argv[0]])
    probe = Probe(args.events, args.exit_after_first_run)
    qapp.installEventFilter(probe.filter)
    code = inspector_app.main(app_args)
    probe.poll.stop()
    return code


if __name__ == "__main__":
    raise SystemExit(main())

