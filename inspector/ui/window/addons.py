"""The add-ons that need the data views, installed once the views exist (they import
pyqtgraph, after the window is on screen): File ▸ Save view as PNG / Save run as NPZ, File ▸
Open atlas and the Dataset dock, Visualise channel / page and Concepts, the Faithfulness tab's
scoring runs. Each gets the window's WindowContext; the window keeps each by its name, as
it keeps those it installs while it is built (edits, compare, video, attention)."""

from __future__ import annotations

from inspector.ui.export import save_view


def install_view_addons(window) -> None:
    # Imported here: they import pyqtgraph, which the window's first paint must not wait for.
    from inspector.ui.atlas import actions as atlas_actions
    from inspector.ui.faithfulness import actions as faithfulness_actions
    from inspector.ui.featurevis import actions as featurevis_actions

    ctx = window.context
    window.save_actions = save_view.install_save_actions(ctx)
    window.atlas = atlas_actions.install(ctx)
    # Visualise channel / page and Concepts, in the menus, the zoom and the atlas.
    window.featurevis = featurevis_actions.install(ctx, window.edit_actions, window.atlas.view)
    # The Faithfulness tab's scoring runs, and the CAM captions' scores.
    window.faithfulness = faithfulness_actions.install(ctx)
