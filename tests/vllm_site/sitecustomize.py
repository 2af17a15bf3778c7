"""Loaded by the vLLM CPU servers the tests start (``PYTHONPATH``; tests/realserver.py).

vLLM 0.32's AMX attention kernel dies with SIGILL on some hosts of this machine kind that
report AMX (the worker exits at the first request: every completion then answers 500 and the
server goes down). Its vector kernel serves the same requests and writes the same counters, so
the test servers take that one on every host.
"""

import importlib

setattr(importlib.import_module("torch.cpu"), "_is_amx_tile_supported", lambda: False)  # noqa: B010
