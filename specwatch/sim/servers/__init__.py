"""The simulated servers, one module per imitated server.

``sglang``, ``vllm``, ``llamacpp`` and ``openai`` each define a :class:`~specwatch.sim.servers.
base.SimDialect` subclass (routes and payloads per version); a server with ``/metrics`` keeps
its counters and metric names in its ``specwatch.sim.metrics`` module.
:mod:`specwatch.sim.presets` finds them by :class:`~specwatch.core.server.Dialect`.
"""
