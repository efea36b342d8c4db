"""The README's pictures of the window, made by the app itself: `make screenshots`.

    python docs/screenshots.py [--out docs/images]

Opens the window offscreen (no display needed) at 1440 x 900 on the bundled demo model and a
sample image, waits for the run, and saves the window as the user would see it:

    window.png   the demo model on heart_with_star_01.png: the module tree with its
                 statistics, the activation mosaic of stage1, the predictions and Grad-CAM
    edits.png    the same image with two channels of stage3 zeroed (an edit): the
                 predictions' before and after, the Edits dock, the mosaic marked as edited

Settings go to a temporary file, so the pictures never depend on the last session's layout.
tests/e2e/test_screenshots.py makes them again and checks that the ones in the repository
are what the window looks like now.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE = (1440, 900)
IMAGE = "heart_with_star_01.png"
MODULE = "stage1"  # the layer whose mosaic the picture shows
EDIT = "stage3:zero=10,50"  # two channels of the layer Grad-CAM reads
NAMES = ("window.png", "edits.png")


def _wait(app, done, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not finish its run in time")
        app.processEvents()
        time.sleep(0.01)


def _settle(app, seconds: float = 0.5) -> None:
    """Let the views paint (each in its own turn of the event loop)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def _ran(window) -> bool:
    last = window.last_run
    return (last is not None and last.run_id == window.control.current_run
            and not window.control.running and last.status == "ok")


def make(out: Path) -> list[Path]:
    """Make the pictures into `out`; their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from inspector import demo
    from inspector.ui.shell.app_settings import AppSettings
    from inspector.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(AppSettings.in_file(str(Path(tmp) / "settings.ini")))
        window.resize(*SIZE)
        window.build_views()
        window.show()
        window.start([str(demo.DEMO_DIR / "samples" / IMAGE)], {"name": "demo_shapes"})
        _wait(app, lambda: _ran(window))
        window.tree.select_module(MODULE)
        _wait(app, lambda: _ran(window))
        _settle(app)
        paths = [out / NAMES[0]]
        window.grab().save(str(paths[0]))
        window.window_edits.add_startup([EDIT])  # as `--edit` would: checked, then run
        window.runs.rerun()
        _wait(app, lambda: _ran(window) and window.control.baseline_run is not None
              and not window.control.baseline_running)
        _settle(app)
        paths.append(out / NAMES[1])
        window.grab().save(str(paths[1]))
        window.close()
        app.processEvents()
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    for path in make(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
