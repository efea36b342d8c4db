"""The parts of the window that its features use: the context a feature is given
(WindowContext: docks, actions, the run's store), the docks and their layout names, the
status panel, the application's settings, the data folder, the arrow keys a focused widget
keeps. The window's frame (ui.window) builds the window from the features; a feature never
imports the frame, only these."""
