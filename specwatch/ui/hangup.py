"""Leaving when the terminal goes away: SIGHUP, or a controlling terminal that stopped answering.

An orphaned TUI spinning at 100% after an SSH drop is a known plague of terminal monitors. The app
asks to exit at once; a backstop thread ends the process if a clean exit has not happened within
a few seconds (a wedged write to a dead terminal must not keep us alive).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import termios
import threading
from collections.abc import Callable

GONE = (errno.EIO, errno.ENXIO, errno.EBADF)
"""What ``tcgetattr`` answers once the terminal is gone (``ENOTTY`` just means no terminal)."""
BACKSTOP_S = 2.5
"""Seconds after a hangup before the process is ended regardless (must stay under 5)."""
HANGUP_EXIT = 129
"""128 + SIGHUP, as a shell reports a process ended by a hangup."""
TERM_EXIT = 143
"""128 + SIGTERM: the app left because it was asked to terminate."""


def terminal_alive(fd: int | None = None) -> bool:
    """Whether the controlling terminal still answers (``tcgetattr`` fails with EIO once hung up).

    With no terminal at all (output redirected) there is nothing to lose, so it reports alive.
    """
    if fd is None:
        stream = sys.__stdin__
        if stream is None:
            return True
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            return True
    # Not os.isatty(): it answers False for a hung-up terminal, indistinguishable from "no tty".
    try:
        termios.tcgetattr(fd)
    except termios.error as e:
        return bool(e.args) and e.args[0] not in GONE
    except OSError as e:
        return e.errno not in GONE
    return True


def start_backstop(
    delay_s: float = BACKSTOP_S,
    exit_fn: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """End the process with :data:`HANGUP_EXIT` after ``delay_s`` unless it ended by itself.

    The thread is a daemon: a clean exit before the delay simply lets it die with the process.
    """

    def backstop() -> None:
        threading.Event().wait(delay_s)
        exit_fn(HANGUP_EXIT)

    thread = threading.Thread(target=backstop, name="specwatch-hangup-backstop", daemon=True)
    thread.start()
    return thread


def remove_sighup() -> None:
    """Restore the default SIGHUP and SIGTERM dispositions (after the app has exited)."""
    for signum in (signal.SIGHUP, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_DFL)
