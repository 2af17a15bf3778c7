"""Reading a server through its dialect: the ``/metrics`` watcher and the streaming client.

Above ``dialects`` (which read the parsed metrics and stream chunks of one server family), so
the parsers below never import back up.
"""
