"""The GUI entry point: `network-inspector-gui`, `python -m inspector`, and the CLI's
`network-inspector [images...] [--model NAME]` with no sub-command.

The window must appear before torch is imported (importing torch and torchvision takes
seconds): this module imports only Qt and the UI shell at the top. Once the window has
painted, the engine is imported on a background thread (the window's SessionControl) while
the data views (pyqtgraph) are built on this one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from inspector import crashlog
from inspector.cli_model_options import DEVICE_HELP, MODEL_HELP, WEIGHTS_HELP

# Set before torch is first imported, wherever that happens (see inspector/core/__init__.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SETTINGS_ENV = "INSPECTOR_SETTINGS_FILE"  # an INI file instead of the user's settings
EXIT_WAIT_S = 15.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="network-inspector",
        description="Look inside a PyTorch model while it runs: open the desktop app.",
    )
    parser.add_argument("images", nargs="*", help="image files or folders to open")
    parser.add_argument("--model", help=MODEL_HELP)
    parser.add_argument("--weights", help=WEIGHTS_HELP)
    parser.add_argument("--device", help=DEVICE_HELP)
    parser.add_argument("--seed", type=int, help="seed for the model's random weights: the "
                        "same seed, the same weights (default: a new one each load)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="hf:PATH whose folder holds its own model code: run it (only for "
                        "folders you trust)")
    parser.add_argument(
        "--edit", action="append", default=[], metavar="MODULE:OP[=ARGS]",
        help="start with this edit in the Edits dock (repeatable; the same specs as "
        "`network-inspector analyse --edit`, e.g. layer4:zero=3,17)",
    )
    parser.add_argument(
        "--reset-settings", action="store_true",
        help="forget the saved window layout, recent files and choices, and start with the "
        "defaults (Help > Reset settings does the same from the window)",
    )
    return parser.parse_args(argv)


def open_settings(args: argparse.Namespace):
    """The app's settings (an INI file when INSPECTOR_SETTINGS_FILE says so), emptied first
    with --reset-settings. Needs Qt: call after the QApplication exists."""
    from inspector.ui.shell.app_settings import AppSettings

    settings_file = os.environ.get(SETTINGS_ENV)
    settings = AppSettings.in_file(settings_file) if settings_file else AppSettings()
    if args.reset_settings:
        settings.reset()
    return settings


def model_fields(args: argparse.Namespace) -> dict:
    """ModelSpec fields for the command line's model options."""
    fields: dict = {}
    model = args.model
    if model and ".py:" in model:
        fields.update(name=None, factory=model)
    elif model:
        fields["name"] = model
    if args.weights:
        fields["checkpoint"] = args.weights
    if args.device:
        fields["device"] = args.device
    if args.seed is not None:
        fields["seed"] = args.seed
    if args.trust_remote_code:
        fields["trust_remote_code"] = True
    return fields


def startup_images(args: argparse.Namespace) -> list[str]:
    """The images named, or the demo's samples when the app opens on the demo model."""
    if args.images:
        return list(args.images)
    if args.model or args.weights:
        return []
    try:
        from inspector.demo import sample_images

        return [str(p) for p in sample_images()]
    except Exception:  # noqa: BLE001 - the app opens without samples rather than not at all
        return []


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # First: a crash anywhere from here on leaves its report for the next start.
    crash_log, crashes = crashlog.start("gui")
    try:
        code = _run(args, crashes, crash_log)
    except Exception as e:  # the app ends on it: the next start says so, as for a crash
        if crash_log is not None:
            crash_log.record(e)
        raise
    finally:
        if crash_log is not None:
            crash_log.close()  # a no-op after record()
    return code


def _run(args: argparse.Namespace, crashes: list[crashlog.CrashReport],
         crash_log: crashlog.CrashLog | None) -> int:
    from PySide6.QtCore import QMetaObject, Qt
    from PySide6.QtWidgets import QApplication

    from inspector.ui.window.about_dialog import app_icon
    from inspector.ui.window.errors import install_excepthooks
    from inspector.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setOrganizationName("network-inspector")
    app.setApplicationName("network-inspector")
    app.setApplicationDisplayName("Network Inspector")
    app.setDesktopFileName("network-inspector")
    app.setWindowIcon(app_icon())

    window = MainWindow(open_settings(args))
    window.show()
    app.processEvents()  # paint the window now, before anything slow
    window.show_crash_notice(crashes)
    # The engine (torch) starts importing on its own thread now, while this thread builds
    # the views (pyqtgraph); frames reach the views only once the event loop runs.
    window.start(startup_images(args), model_fields(args), edits=args.edit)
    window.build_views()
    app.processEvents()

    old_hooks = (sys.excepthook, threading.excepthook)
    install_excepthooks(window.reporter)

    def quit_on_signal(_signum, _frame) -> None:
        # Runs between Python bytecodes on the UI thread; close from the event loop instead
        # of in the middle of whatever Python code was interrupted.
        QMetaObject.invokeMethod(window, "close", Qt.ConnectionType.QueuedConnection)

    old_signals = {s: signal.signal(s, quit_on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = app.exec()
    finally:
        sys.excepthook, threading.excepthook = old_hooks
        for s, handler in old_signals.items():
            signal.signal(s, handler)
        window.shutdown()  # idempotent: closeEvent did it unless the app was quit otherwise
    # A model still loading, or torch still importing, cannot be interrupted. Give them time
    # to finish; if they do not, leave without running Python's shutdown: finalizing while a
    # thread is inside torch's C++ code aborts the process ("terminate called without an
    # active exception"), seen here when the app was closed during its first seconds.
    if not window.control.close(wait=EXIT_WAIT_S):
        sys.stdout.flush()
        sys.stderr.flush()
        if crash_log is not None:
            crash_log.close()  # a normal exit, though without Python's shutdown
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
