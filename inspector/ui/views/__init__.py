"""The data views: each subscribes, in the run store, to the frames it shows, reads them from
there, and paints only when visible. The window loads each from its module (ui.shell.docks)."""
