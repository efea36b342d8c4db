"""The window's frame: the main window and its docks, menus, status bar and messages,
saved settings and layout, dialogs of its own (About, the crash notice), and the garbage
collector's timing on the GUI thread.
"""
