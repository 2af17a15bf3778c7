"""Leaving cleanly when the terminal goes away (SIGHUP, a dead terminal) or on SIGTERM.

The app-side half of :mod:`specwatch.ui.hangup`: the handlers the live app installs, kept apart
from what the app shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from textual.app import App
from textual.driver import Driver

from specwatch.ui import hangup
from specwatch.ui.textual_compat import quiet_driver_class

if TYPE_CHECKING:
    from specwatch.session import LiveSession


class TerminalWatchApp(App[int]):
    """An app that exits on SIGHUP, a terminal that stopped answering, or SIGTERM."""

    session: LiveSession | None = None
    """The live session whose benchmark is stopped (and finished runs saved) on the way out."""
    _hung_up: bool = False

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, with an input thread that does not wake ten times a second."""
        return quiet_driver_class(super().get_driver_class())

    def _watch_terminal(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, self.hang_up)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self.terminate)
        self.set_interval(1.0, self._check_terminal)

    def _check_terminal(self) -> None:
        if not hangup.terminal_alive():
            self.hang_up()

    def hang_up(self) -> None:
        """The terminal is gone: exit now, and make sure the process ends within seconds.

        The app starts its normal exit. If the terminal turns out to be hung up, restoring it
        cannot succeed and Textual's shutdown would stall on it, so a thread waits for the
        benchmark to save its finished runs, stops the sampler and ends the process; the
        backstop covers anything that hangs.
        """
        if self._hung_up:
            return
        self._hung_up = True
        hangup.start_backstop()
        if self.session is not None:
            self.session.cancel_benchmark()
        threading.Thread(target=self._leave_now, name="specwatch-hangup", daemon=True).start()
        self.exit(hangup.HANGUP_EXIT)

    def terminate(self) -> None:
        """SIGTERM (``timeout``, ``docker stop``, systemd): leave like ``q``, terminal restored.

        Without a handler the default disposition would end the process on the spot, leaving
        the terminal in the alternate screen with mouse tracking on and the cursor hidden. The
        terminal still answers here, so Textual's normal exit restores it; a running benchmark
        is asked to stop. The backstop only covers a shutdown that hangs.
        """
        if self._hung_up:
            return
        self._hung_up = True
        hangup.start_backstop(hangup.BACKSTOP_S * 2, lambda _code: os._exit(hangup.TERM_EXIT))
        if self.session is not None:
            self.session.cancel_benchmark()
        self.exit(hangup.TERM_EXIT)

    def _leave_now(self) -> None:
        # SIGHUP can arrive a moment before the kernel finishes hanging the terminal up.
        for _ in range(5):
            if not hangup.terminal_alive():
                break
            time.sleep(0.1)
        else:
            return  # the terminal answers: the normal exit restores it and ends the process
        session = self.session
        job = session.bench if session is not None else None
        if job is not None:
            job.done.wait(hangup.BACKSTOP_S - 0.5)
        # NVML is shut down if that is quick; the rest (HTTP, an in-process demo) dies with us.
        if session is not None:
            with contextlib.suppress(Exception):
                session.gpus.stop(timeout_s=0.5)
        os._exit(hangup.HANGUP_EXIT)


__all__ = ["TerminalWatchApp"]
