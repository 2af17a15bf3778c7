"""Server dialects, one module each, and the registry that finds them.

A module here that binds a :class:`~specwatch.sources.dialects.base.ServerDialect` to the name
``DIALECT`` is a dialect; the registry imports every module of this package and keeps those.
Adding a server is one module here (plus its member of :class:`specwatch.core.server.Dialect`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from specwatch.core.server import Dialect
from specwatch.sources.dialects.base import ServerDialect


@functools.cache
def all_dialects() -> tuple[ServerDialect, ...]:
    """Every dialect, in the order they are asked to recognise a server."""
    found: list[ServerDialect] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        dialect = getattr(module, "DIALECT", None)
        if isinstance(dialect, ServerDialect):
            found.append(dialect)
    return tuple(sorted(found, key=lambda d: (d.fingerprint_order, d.dialect.value)))


def dialect_for(dialect: Dialect) -> ServerDialect:
    """The module that speaks ``dialect``.

    Raises:
        KeyError: No module speaks it.
    """
    for candidate in all_dialects():
        if candidate.dialect is dialect:
            return candidate
    raise KeyError(f"no module in specwatch.sources.dialects speaks {dialect.value}")


def dialect_owning(owner: str) -> ServerDialect | None:
    """The dialect a ``/v1/models`` ``owned_by`` value names, if any."""
    owner = owner.lower()
    for candidate in all_dialects():
        if owner in candidate.owned_by:
            return candidate
    return None


__all__ = ["ServerDialect", "all_dialects", "dialect_for", "dialect_owning"]
