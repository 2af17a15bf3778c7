"""Signals while a snapshot is saved: noted, never acted on until the file is complete.

``bench`` handles SIGINT, SIGTERM and SIGHUP on its event loop while it runs. When the loop
ends, :func:`shield_signals` takes over at once (with the signals blocked in between, so none
can slip through to Python's default ``KeyboardInterrupt``): a signal arriving while the
snapshot is written is recorded and the writing goes on. A snapshot is written to a temporary
file and linked into place, so it is complete or absent whatever happens.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS: tuple[int, ...] = tuple(
    int(s) for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s
)
"""The signals that stop a benchmark (and keep its finished runs)."""


class SignalLog:
    """The stop signals received, in order (the first decides the exit status)."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def __call__(self, sig: int, frame: FrameType | None = None) -> None:
        """Record ``sig`` (usable as a ``signal.signal`` handler)."""
        self.received.append(sig)

    @property
    def first(self) -> int | None:
        """The first signal received, if any."""
        return self.received[0] if self.received else None


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """Hold the stop signals back (they stay pending) while inside."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def shield_signals(log: SignalLog) -> Iterator[SignalLog]:
    """Record the stop signals in ``log`` instead of acting on them while inside.

    Install it with the signals :func:`blocked`, so one that arrived in between is delivered
    to ``log`` when they are unblocked.
    """
    previous: dict[int, object] = {}
    try:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                previous[sig] = signal.signal(sig, log)
        yield log
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)  # type: ignore[arg-type]


def signal_name(sig: int) -> str:
    """``"SIGTERM"`` for 15."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


__all__ = ["STOP_SIGNALS", "SignalLog", "blocked", "shield_signals", "signal_name"]
