"""The panes of the main screen; each is a thin widget over a pure renderable."""
