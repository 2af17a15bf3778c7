"""specwatch in a real pty, its output read by a terminal emulator (pyte): the screen a user sees.

A test drives keys, reads the emulated screen, and can force a full repaint (a resize there and
back) to compare what incremental updates left on screen with what a fresh frame draws.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parent.parent


class PtyScreen:
    """``python -m specwatch ARGS`` in a pty of ``cols``×``rows``, emulated by pyte."""

    def __init__(self, args: list[str], cols: int = 80, rows: int = 24) -> None:
        self.cols, self.rows = cols, rows
        # The size comes from the pty alone: COLUMNS and LINES would win over it, resizes too.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the app
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "specwatch", *args], env)
        self.pid, self.fd = pid, fd
        self._set_size(cols, rows)
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)

    def _set_size(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def lines(self) -> list[str]:
        """The emulated screen, one string per row."""
        return list(self.screen.display)

    def text(self) -> str:
        return "\n".join(self.lines())

    def pump(self, seconds: float) -> None:
        """Read the app's output into the emulator for ``seconds``."""
        self.wait_for(lambda _: False, seconds)

    def wait_for(self, done: Callable[[list[str]], bool], timeout: float) -> bool:
        """Read output until ``done(lines)`` holds (True) or ``timeout`` passes (False)."""
        end = time.monotonic() + timeout
        while True:
            if done(self.lines()):
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            if select.select([self.fd], [], [], min(left, 0.1))[0]:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    return done(self.lines())
                if not chunk:
                    return done(self.lines())
                self.stream.feed(chunk)

    def press(self, key: str) -> None:
        os.write(self.fd, key.encode())

    def resize(self, cols: int, rows: int) -> None:
        """Resize the terminal (the app gets SIGWINCH) and the emulator with it."""
        self.screen.resize(rows, cols)
        self._set_size(cols, rows)
        os.kill(self.pid, signal.SIGWINCH)

    def close(self) -> None:
        """Stop the app (SIGKILL after 5 s) and close the pty."""
        os.kill(self.pid, signal.SIGTERM)
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            self.pump(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)
