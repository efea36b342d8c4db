"""The channel atlas in the window: reading an atlas folder (atlas_file), the Dataset dock
(dataset_dock), File ▸ Open atlas / New atlas… (actions, dialog) and the atlas command run
on a thread (runner).
"""
