"""SIGTERM (``timeout``, ``docker stop``, systemd) to the TUI in a real pty: it leaves promptly and
writes the sequences that give the shell its terminal back."""

from __future__ import annotations

import os
import signal
import time

from tests.test_ui_hangup import read_until, spawn_in_pty


def test_sigterm_restores_the_terminal_and_exits_promptly() -> None:
    pid, fd = spawn_in_pty(["--demo", "--interval", "0.5"])
    status: int | None = None
    try:
        seen = read_until(fd, b"sglang", 20)  # the status line names the dialect
        assert b"sglang" in seen, seen[-400:]
        assert b"\x1b[?1049h" in seen  # it did take over the screen
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        rest = b""
        while time.monotonic() - started < 5.0:
            chunk = read_until(fd, b"\x00never", 0.3)
            rest += chunk
            done, status_now = os.waitpid(pid, os.WNOHANG)
            if done:
                status = status_now
                rest += read_until(fd, b"\x00never", 0.3)
                break
        elapsed = time.monotonic() - started
        assert status is not None, "still running 5 s after SIGTERM"
        assert os.waitstatus_to_exitcode(status) == 143
        assert elapsed < 3.0
        assert b"\x1b[?1049l" in rest, rest[-400:]  # alternate screen off
        assert b"\x1b[?25h" in rest  # cursor shown
        assert b"\x1b[?1000l" in rest  # mouse tracking off
    finally:
        os.close(fd)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
