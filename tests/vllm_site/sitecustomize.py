"""Loaded by the vLLM CPU servers the tests start (``PYTHONPATH``; tests/realserver.py).

vLLM 0.32's AMX attention kernel dies with SIGILL on some hosts of this machine kind that
report AMX (the worker exits at the first request: every completion then answers 500 and the
server goes down). Its vector kernel serves the same requests and writes the same counters, so
the test servers take that one on every host.

``SPECWATCH_VLLM_EXTRA_ARGS``: more server arguments (the start script takes none), added to the
server's own command line only (``python -m``), not its workers'.
"""

import importlib
import os
import shlex
import sys

setattr(importlib.import_module("torch.cpu"), "_is_amx_tile_supported", lambda: False)  # noqa: B010

_extra = os.environ.get("SPECWATCH_VLLM_EXTRA_ARGS")
if _extra and sys.argv[:1] == ["-m"]:
    sys.argv.extend(shlex.split(_extra))
