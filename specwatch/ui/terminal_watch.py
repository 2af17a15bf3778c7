"""Leaving cleanly when the terminal goes away (SIGHUP, a dead terminal) or on SIGTERM.

The app-side half of :mod:`specwatch.ui.hangup`: :class:`TerminalWatch` is the one path every
screen (the single-server monitor, the fleet) takes on these signals, kept apart from what the
screens show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.driver import Driver

from specwatch.ui import hangup
from specwatch.ui.textual_compat import quiet_driver_class

if TYPE_CHECKING:
    from specwatch.session import LiveSession

WATCHED = (signal.SIGHUP, signal.SIGTERM)


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
        if not hangup.terminal_alive():
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
        hangup.start_backstop()
        self.stop_work()
        threading.Thread(target=self._leave_now, name="specwatch-hangup", daemon=True).start()
        self.leave(hangup.HANGUP_EXIT)

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
        hangup.start_backstop(hangup.BACKSTOP_S * 2, lambda _code: os._exit(hangup.TERM_EXIT))
        self.stop_work()
        self.leave(hangup.TERM_EXIT)

    def _leave_now(self) -> None:
        # SIGHUP can arrive a moment before the kernel finishes hanging the terminal up.
        for _ in range(5):
            if not hangup.terminal_alive():
                break
            time.sleep(0.1)
        else:
            return  # the terminal answers: the normal exit restores it and ends the process
        self.finish_work()
        os._exit(hangup.HANGUP_EXIT)


class TerminalWatchApp(App[int]):
    """An app that exits on SIGHUP, a terminal that stopped answering, or SIGTERM."""

    session: LiveSession | None = None
    """The live session whose benchmark is stopped (and finished runs saved) on the way out."""
    terminal_watch: TerminalWatch | None = None
    """Its watch, once started (``None`` in tests and headless)."""

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, with an input thread that does not wake ten times a second."""
        return quiet_driver_class(super().get_driver_class())

    def _watch_terminal(self) -> None:
        self.terminal_watch = TerminalWatch(self, self.exit, self._stop_work, self._finish_work)
        self.terminal_watch.start()

    def _stop_work(self) -> None:
        if self.session is not None:
            self.session.cancel_benchmark()

    def _finish_work(self) -> None:
        session = self.session
        job = session.bench if session is not None else None
        if job is not None:
            job.done.wait(hangup.BACKSTOP_S - 0.5)
        # NVML is shut down if that is quick; the rest (HTTP, an in-process demo) dies with us.
        if session is not None:
            with contextlib.suppress(Exception):
                session.gpus.stop(timeout_s=0.5)


__all__ = ["TerminalWatch", "TerminalWatchApp"]
