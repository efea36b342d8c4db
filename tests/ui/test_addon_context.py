"""The window's add-ons (edits, compare, atlas, saving, video) use the window's context, not
the window: they never read an attribute of it (ui.shell.context.WindowContext.parent only
parents their Qt objects and dialogs), so what each may touch is the context's fields."""

from __future__ import annotations

import ast
import inspect

import pytest

from inspector.ui.atlas import actions as atlas_actions
from inspector.ui.attention import wiring as attention_wiring
from inspector.ui.compare import actions as compare_actions
from inspector.ui.compare import models_actions
from inspector.ui.edits import window_edits
from inspector.ui.export import save_view
from inspector.ui.shell.context import WindowContext
from inspector.ui.video import player

ADD_ONS = [window_edits, compare_actions, models_actions, atlas_actions, save_view, player,
           attention_wiring]


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


@pytest.mark.parametrize("module", ADD_ONS, ids=lambda m: m.__name__.rsplit(".", 2)[-2])
def test_an_add_on_reads_nothing_of_the_window_itself(module):
    tree = ast.parse(inspect.getsource(module))
    reads = {_dotted(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    into_window = sorted(r for r in reads if ".parent." in f".{r}."
                         and r.split(".parent.", 1)[0] in ("ctx", "self.ctx"))
    assert not into_window, into_window
    # Nor through a name of its own for it (`window = ctx.parent` parents Qt objects only).
    assert not [r for r in reads if r.startswith(("self.window", "window."))], module.__name__
    install = getattr(module, "install", None) or module.install_save_actions
    first = next(iter(inspect.signature(install).parameters.values()))
    assert first.name == "ctx"


def test_the_window_gives_each_add_on_its_context(qtbot, tmp_path):
    from inspector.ui.shell.app_settings import AppSettings
    from inspector.ui.window.main_window import MainWindow

    window = MainWindow(AppSettings.in_file(str(tmp_path / "settings.ini")))
    qtbot.addWidget(window)
    window.build_views()
    assert isinstance(window.context, WindowContext)
    for addon in (window.window_edits, window.compare, window.compare_models, window.atlas,
                  window.save_actions, window.attention):
        assert addon.ctx is window.context
    assert window.context.views is window.views  # views built later are seen by add-ons
    assert "edits" in window.docks  # the edits' dock, placed through the context
    window.shutdown()
