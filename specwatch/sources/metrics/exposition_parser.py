"""prometheus_client's text-format parser, without the rest of prometheus_client.

``import prometheus_client.parser`` runs the package's ``__init__`` first, and that imports the
whole client: the exposition server (``http.server``, ``socketserver``, ``wsgiref``), the ASGI
app, gzip, ``timeit``, the mmap-backed multiprocess values and the process and platform
collectors, about thirty modules and 2 MiB of a monitor's resident memory that only ever
parses. Here the package is entered in ``sys.modules`` without running its ``__init__``, so the
parser loads with only what it imports (``metrics_core``, ``samples``, ``utils``,
``validation``). The first name looked up on the package that its ``__init__`` defines (``from
prometheus_client import CollectorRegistry``, ``prometheus_client.REGISTRY``) runs that
``__init__`` in place, so any later user of the library gets the whole package as usual.

When prometheus_client is already imported, nothing changes.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

PACKAGE = "prometheus_client"


def _enter_bare_package() -> None:
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    loader = spec.loader if spec is not None else None
    if spec is None or loader is None or spec.submodule_search_locations is None:
        return  # not a plain package on disk: import it the ordinary way
    package = importlib.util.module_from_spec(spec)

    def complete(name: str) -> Any:
        # A name the parser's modules did not set: run the package's own __init__ here, once.
        package.__dict__.pop("__getattr__", None)
        loader.exec_module(package)
        return getattr(package, name)

    package.__dict__["__getattr__"] = complete
    sys.modules[PACKAGE] = package


_enter_bare_package()

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

__all__ = ["text_string_to_metric_families"]
