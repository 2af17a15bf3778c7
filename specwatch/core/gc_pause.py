"""Pause the cyclic garbage collector while many acyclic records are built at once.

Building a 10,000-server fleet (80,000 GPUs: a few hundred thousand dicts, tuples and frozen
records) set off 15 full collections, each walking the whole heap: 1.1 of 4.2 s of CPU.
Those records hold no reference cycles, so reference counting frees them and the collector
finds nothing; it runs again (from its own thresholds) once the last pause ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class _Pauses:
    """Nested and concurrent pauses (the event loop and a worker thread): the collector comes
    back on when the last one ends, and only if it was on when the first began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_PAUSES = _Pauses()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the ``with`` block (reference counting still frees)."""
    with _PAUSES.lock:
        if _PAUSES.depth == 0:
            _PAUSES.was_enabled = gc.isenabled()
            gc.disable()
        _PAUSES.depth += 1
    try:
        yield
    finally:
        with _PAUSES.lock:
            _PAUSES.depth -= 1
            if _PAUSES.depth == 0 and _PAUSES.was_enabled:
                gc.enable()


__all__ = ["gc_paused"]
