"""Leaving cleanly when the terminal goes away (SIGHUP, a dead terminal) or on SIGTERM.

An orphaned TUI spinning at 100% after an SSH drop is a known plague of terminal monitors. The app
asks to exit at once; a backstop thread ends the process if a clean exit has not happened within
a few seconds (a wedged write to a dead terminal must not keep us alive). :class:`TerminalWatch`
is the one path every screen (the single-server monitor, the fleet) takes on these signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

GONE = (errno.EIO, errno.ENXIO, errno.EBADF)
"""What ``tcgetattr`` answers once the terminal is gone (``ENOTTY`` just means no terminal)."""
BACKSTOP_S = 2.5
"""Seconds after a hangup before the process is ended regardless (must stay under 5)."""
HANGUP_EXIT = 129
"""128 + SIGHUP, as a shell reports a process ended by a hangup."""
TERM_EXIT = 143
"""128 + SIGTERM: the app left because it was asked to terminate."""
WATCHED = (signal.SIGHUP, signal.SIGTERM)


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
    for signum in WATCHED:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_DFL)


def _nothing() -> None:
    pass


class TerminalWatch:
    """Exit ``app`` on SIGHUP, a terminal that stopped answering, or SIGTERM.

    Args:
        app: The running app (its timer checks the terminal each second).
        leave: Ends the app with an exit status (the app's ``exit``).
        stop_work: Asks work in progress to stop and keep what it finished (a benchmark).
        finish_work: Waits, briefly, for that work before a hung-up process ends.
    """

    def __init__(
        self,
        app: App[Any],
        leave: Callable[[int], object],
        stop_work: Callable[[], object] = _nothing,
        finish_work: Callable[[], object] = _nothing,
    ) -> None:
        self.app = app
        self.leave = leave
        self.stop_work = stop_work
        self.finish_work = finish_work
        self.stopped_by: str | None = None
        """``"SIGTERM"`` or ``"SIGHUP"`` once one of them (or a dead terminal) ended the app."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Take SIGHUP and SIGTERM on the running loop and check the terminal each second."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, self.hang_up)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self.terminate)
        self.app.set_interval(1.0, self.check)

    def stop(self) -> None:
        """Give the signals back (default dispositions) once the app has left the terminal.

        For a caller that runs more than one app on one loop: a handler left behind would act
        for an app that is gone.
        """
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            for sig in WATCHED:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)

    def check(self) -> None:
        """Leave when the controlling terminal stopped answering."""
        if not terminal_alive():
            self.hang_up()

    def hang_up(self) -> None:
        """The terminal is gone: exit now, and make sure the process ends within seconds.

        The app starts its normal exit. If the terminal turns out to be hung up, restoring it
        cannot succeed and Textual's shutdown would stall on it, so a thread waits for the
        work to save what it finished and ends the process; the backstop covers anything that
        hangs.
        """
        if self.stopped_by is not None:
            return
        self.stopped_by = "SIGHUP"
        start_backstop()
        self.stop_work()
        threading.Thread(target=self._leave_now, name="specwatch-hangup", daemon=True).start()
        self.leave(HANGUP_EXIT)

    def terminate(self) -> None:
        """SIGTERM (``timeout``, ``docker stop``, systemd): leave like ``q``, terminal restored.

        Without a handler the default disposition would end the process on the spot, leaving
        the terminal in the alternate screen with mouse tracking on and the cursor hidden. The
        terminal still answers here, so Textual's normal exit restores it; work in progress
        is asked to stop. The backstop only covers a shutdown that hangs.
        """
        if self.stopped_by is not None:
            return
        self.stopped_by = "SIGTERM"
        start_backstop(BACKSTOP_S * 2, lambda _code: os._exit(TERM_EXIT))
        self.stop_work()
        self.leave(TERM_EXIT)

    def _leave_now(self) -> None:
        # SIGHUP can arrive a moment before the kernel finishes hanging the terminal up.
        for _ in range(5):
            if not terminal_alive():
                break
            time.sleep(0.1)
        else:
            return  # the terminal answers: the normal exit restores it and ends the process
        self.finish_work()
        os._exit(HANGUP_EXIT)


__all__ = [
    "BACKSTOP_S",
    "HANGUP_EXIT",
    "TERM_EXIT",
    "TerminalWatch",
    "remove_sighup",
    "start_backstop",
    "terminal_alive",
]
