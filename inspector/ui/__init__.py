"""The desktop app's widgets (PySide6 + pyqtgraph). Imports core; holds no model logic.

    window/       the main window, its docks, menus, status bar and settings
    run/          the next runs' settings, the request built from them, the Session's side
    module_tree/  the module tree
    image/        the image pane and its filmstrip
    views/        the data views over the run store (mosaics, CAMs, plots, predictions)
    edits/        edits, their undo stack and the Edits dock
    compare/      A/B compare
    atlas/        the channel atlas and the Dataset dock
    video/        videos and the camera
    open_model/   File ▸ Open model
    export/       Save view as PNG, Save run as NPZ

Nothing heavy is imported here, so that `import inspector.ui.window.main_window` stays light: the
window must show before torch (and pyqtgraph, for the views) are imported.
"""

import sys


def _disable_pyside_feature_scan() -> None:
    """Stop PySide6 reading the source of every module imported after it.

    PySide6 replaces `builtins.__import__` and, to support `from __feature__ import ...`,
    checks each newly imported module, on any thread, with `inspect.getsource` (file reads,
    for each of torch's ~2,000 modules). With torch and torchvision imported on worker
    threads while the UI thread runs, that check crashed the app here with "Fatal Python
    error: none_dealloc" (seen with PySide6 6.12 on Python 3.11, in the worker's
    `_mod_uses_pyside` call). This app uses no `__feature__`, so the answer is always no.
    """
    try:
        import shiboken6  # noqa: F401 - installs the import hook and loads its module
    except ImportError:
        return
    feature = sys.modules.get("shibokensupport.feature")
    if feature is not None and hasattr(feature, "_mod_uses_pyside"):
        feature._mod_uses_pyside = lambda module: False


_disable_pyside_feature_scan()
