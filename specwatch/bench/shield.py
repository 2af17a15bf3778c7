"""Signals while a snapshot is saved: noted, never acted on until the file is complete.

``bench`` handles SIGINT, SIGTERM and SIGHUP on its event loop while it runs. When the loop
ends, :func:`shield_signals` takes over at once (with the signals blocked in between, so none
can slip through to Python's default ``KeyboardInterrupt``): a signal arriving while the
snapshot is written is recorded and the writing goes on. A snapshot is written to a temporary
file and linked into place, so it is complete or absent whatever happens. Output goes through
:func:`print_lines`, which outlives a terminal that hung up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TextIO

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


def ignore_late_stop_signals(status: int) -> None:
    """Ignore stop signals from now on when ``status`` says one ended the command.

    The process is about to exit with that status; Python puts back the default handlers while
    it finalizes, and a second Ctrl-C landing then would kill it (status -2) after everything was
    saved. Only for a process's own command line: ignored signals are inherited by the
    processes a caller of ``main(argv)`` starts later.
    """
    if status - 128 in STOP_SIGNALS:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                signal.signal(sig, signal.SIG_IGN)


def signal_name(sig: int) -> str:
    """``"SIGTERM"`` for 15."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


@contextlib.contextmanager
def loop_signals(on_signal: Callable[[int], None], log: SignalLog) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP to ``on_signal`` on the running loop while inside;
    on leaving, hand them to ``log`` with no gap (see :mod:`specwatch.bench.shield`).

    A signal ``log`` took before (between the shield and the loop) is not replayed: the caller
    checks :attr:`SignalLog.first` once inside.
    """
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    # Blocked while the handlers change hands: a signal arriving in between stays pending and
    # reaches ``on_signal`` once unblocked, instead of tripping a handler being replaced.
    with blocked():
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, on_signal, int(sig))
                installed.append(int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # no loop signal support here: KeyboardInterrupt cancels the task instead
    try:
        yield
    finally:
        with blocked():
            for sig in installed:
                loop.remove_signal_handler(sig)
            for sig in STOP_SIGNALS:
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(sig, log)


def print_lines(stream: TextIO, lines: Sequence[str]) -> None:
    """Print, ignoring a terminal that went away (SIGHUP) or a closed pipe."""
    try:
        for line in lines:
            print(line, file=stream)
        stream.flush()
    except BrokenPipeError:
        # Point the descriptor at /dev/null: later prints, and the flush at exit, then
        # succeed silently instead of failing again (the advice of Python's signal docs).
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, stream.fileno())
            finally:
                os.close(devnull)
    except (OSError, ValueError):
        pass


__all__ = [
    "STOP_SIGNALS",
    "SignalLog",
    "blocked",
    "loop_signals",
    "print_lines",
    "shield_signals",
    "signal_name",
]
