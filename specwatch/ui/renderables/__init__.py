"""Pure renderables: each draws one thing from plain data and Rich styles.

Nothing here knows about widgets or the app: a pane hands in data and styles (taken from its
component classes, so only theme variables decide colours) and gets back lines of segments.
Tests print these to a plain ``rich.console.Console``.
"""
