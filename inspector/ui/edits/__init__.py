"""Edits in the window: their list (edit_list) and undo stack (commands), the Edits dock
(dock), where they are made (actions: the context menus, a box on the image) and their
wiring into the window (window_edits).
"""
