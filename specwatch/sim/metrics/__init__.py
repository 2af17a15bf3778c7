"""What each simulated server counts and how its ``/metrics`` shows it (below the world).

``telemetry`` is the base; a server with ``/metrics`` keeps its counters and metric names in its
``*_metrics`` module; ``telemetries`` says which one each dialect keeps.
"""
