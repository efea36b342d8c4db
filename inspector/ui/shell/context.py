"""What a feature add-on of the main window may use: a WindowContext, given to each add-on
(edits, compare, atlas, saving, video) instead of the window itself.

An add-on's room is then plain: it reads and writes the run settings, asks the session for
runs, observes the run store, says things in the status bar, and places its own actions,
menus, docks, toolbars and status widgets through the methods here. It does not reach into
the window's attributes: what it makes for others (the edits' undo stack, say) it returns,
and the window keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QToolBar, QWidget


@dataclass(frozen=True)
class WindowContext:
    """The window's parts an add-on may use (see the module docstring).

    parent: owns the add-on's Qt objects and parents its dialogs; an add-on reads nothing
        from it (placing things goes through the methods below).
    store: what the runs produced (core.run.store.RunStore), which the views observe.
    settings: the next runs' settings (ui.run.settings.RunSettingsModel).
    control: the session (ui.run.session_control.SessionControl): runs, the loaded model.
    runs: when to run (ui.run.builder.RunBuilder): `rerun()`, `request()`.
    reporter: the status bar's messages (ui.window.errors.ErrorReporter).
    status: the status bar's permanent fields (ui.shell.status_panel.StatusPanel).
    app_settings: what is remembered between sessions (ui.shell.app_settings.AppSettings).
    tree: the module tree (ui.module_tree.widget.ModuleTreeWidget).
    images: the image pane (ui.image.pane.ImagePane).
    views: the data views by dock key (empty until the window has built them).
    docks: the window's docks by key (ui.shell.docks.DOCKS, and those add-ons add).
    closed: emitted when the window closes: stop what the add-on started.
    model_name: the loaded model's name, "" before one is loaded.
    """

    parent: QMainWindow
    store: object
    settings: object
    control: object
    runs: object
    reporter: object
    status: object
    app_settings: object
    tree: object
    images: object
    views: Mapping[str, QWidget]
    docks: Mapping[str, QDockWidget]
    closed: SignalInstance
    model_name: Callable[[], str]

    # -- placing things ----------------------------------------------------------------------
    def menu(self, title: str) -> QMenu | None:
        """The menu bar's menu of that title ("File", "Edit", ...), or None."""
        for action in self.parent.menuBar().actions():
            menu = action.menu()
            if menu is not None and action.text().replace("&", "") == title:
                return menu
        return None

    def add_menu(self, menu: QMenu, before: str = "Help") -> None:
        """A menu of the add-on's own in the menu bar, before `before` (or last)."""
        bar = self.parent.menuBar()
        anchor = next((a for a in bar.actions() if a.text().replace("&", "") == before), None)
        if anchor is not None:
            bar.insertMenu(anchor, menu)
        else:
            bar.addMenu(menu)

    def add_to_menu(self, title: str, item: QAction | QMenu, after: str | None = None,
                    before: str | None = None) -> None:
        """An action (or a submenu) in the menu `title`: after the item whose text is
        `after`, or before the one whose text is `before`, else at the end."""
        menu = self.menu(title)
        if menu is None:
            return
        actions = menu.actions()
        texts = [a.text() for a in actions]
        anchor = None
        if after is not None and after in texts and texts.index(after) + 1 < len(actions):
            anchor = actions[texts.index(after) + 1]
        elif before is not None and before in texts:
            anchor = actions[texts.index(before)]
        if isinstance(item, QMenu):
            if anchor is None:
                menu.addMenu(item)
            else:
                menu.insertMenu(anchor, item)
        elif anchor is None:
            menu.addAction(item)
        else:
            menu.insertAction(anchor, item)

    def add_dock(self, key: str, dock: QDockWidget, under: str | None = None,
                 beside: str | None = None) -> None:
        """A dock of the add-on's own, on the left under the dock `under` (or on the left),
        or on a tab beside the dock `beside`."""
        self.parent.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        if under is not None and under in self.docks:
            self.parent.splitDockWidget(self.docks[under], dock, Qt.Orientation.Vertical)
        if beside is not None and beside in self.docks:
            self.parent.tabifyDockWidget(self.docks[beside], dock)
        self.docks[key] = dock  # the window's own mapping: View ▸ and layouts see it

    def resize_docks(self, keys: list[str], sizes: list[int], orientation) -> None:
        self.parent.resizeDocks([self.docks[k] for k in keys], sizes, orientation)

    def tabified(self, dock: QDockWidget) -> list[QDockWidget]:
        """The docks on tabs beside `dock`."""
        return self.parent.tabifiedDockWidgets(dock)

    def add_toolbar(self, toolbar: QToolBar) -> None:
        self.parent.addToolBar(toolbar)

    def add_status_widget(self, widget: QWidget) -> None:
        """A permanent widget at the right of the status bar."""
        self.parent.statusBar().addPermanentWidget(widget)
