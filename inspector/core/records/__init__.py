"""The engine's records, at the bottom of core: what a run sends to its readers (frames) and
the kinds of tensor it captures. They import nothing of the project, so every package of
core (and the window, batch and scripts) can read them without importing the engine."""
