"""The session's host sampler: this host's CPU on a slow interval of its own, on a thread.

A reading costs well under a millisecond and the scan of every process runs at most every
:data:`~specwatch.sources.host.SCAN_INTERVAL_S`; the next reading is scheduled only after the
last one finished, so readings never pile up. The server's processes are followed once the
session identifies its first server (``ServerIdentified``) on this host.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from specwatch.session import events as ev
from specwatch.sources.host import HostSampler

HOST_INTERVAL_S = 2.0
"""Seconds between two readings of the host."""


class HostSource:
    """Emits a :class:`~specwatch.session.events.HostSampled` every ``interval_s``.

    Args:
        interval_s: Seconds between readings.
        clock: The session's clock (the events' ``t``).
        sampler: The reader (tests give one over a captured ``/proc``).
    """

    def __init__(
        self,
        interval_s: float = HOST_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        sampler: HostSampler | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.sampler = sampler or HostSampler()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, event: ev.SessionEvent) -> None:
        """A session subscriber: follow the first server's processes once identified."""
        if isinstance(event, ev.ServerIdentified) and event.server == 0:
            identity = event.identity
            pids = identity.pids or ((identity.pid,) if identity.pid is not None else ())
            self.sampler.set_server(pids)

    def start(self, emit: Callable[[ev.SessionEvent], None]) -> None:
        """Start reading on a daemon thread; every span goes to ``emit``."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.is_set():
                # A host that cannot be read is left out, never a dead thread.
                with contextlib.suppress(Exception):
                    span = self.sampler.sample()
                    if span is not None:
                        emit(ev.HostSampled(self.clock(), span))
                self._stop.wait(self.interval_s)

        self._thread = threading.Thread(target=run, name="specwatch-host", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)


__all__ = ["HOST_INTERVAL_S", "HostSource"]
