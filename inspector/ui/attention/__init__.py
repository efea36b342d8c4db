"""A vision transformer's attention in the window: which runs read it (wiring.py); the views
are ui.views.attention_view (the explorer) and ui.views.lens_view (the Depth tab)."""
