"""The frozen app's entry point: PyInstaller runs this file as ``__main__``.

It is the `network-inspector` command: with no sub-command (a double-click, or files from
"Open with") the desktop app opens; `analyse`, `models`, `tree` and the desktop-entry flags
work from the same executable.
"""

import multiprocessing
import os
import sys


def main() -> int:
    # A frozen program that starts worker processes (a DataLoader with workers, in
    # train-demo) must let them through here, or each would start another app.
    multiprocessing.freeze_support()
    # A windowed build (Windows' network-inspector-gui.exe, the macOS .app) has no console:
    # sys.stdout and sys.stderr are None there, and a print would raise.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the app
    from inspector.cli import main as cli_main

    return int(cli_main() or 0)


if __name__ == "__main__":
    raise SystemExit(main())
