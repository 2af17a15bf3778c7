"""SIGTERM and SIGHUP to the fleet screen (``specwatch --prometheus URL``) in a real pty: it
leaves promptly and writes the sequences that give the shell its terminal back, as the
single-server screen does (issue 28 item 4)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from specwatch.ui.hangup import HANGUP_EXIT, TERM_EXIT
from tests.hostile import hostile_server
from tests.test_ui_hangup import read_to_exit, read_until, spawn_in_pty


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGTERM, TERM_EXIT), (signal.SIGHUP, HANGUP_EXIT)],
    ids=["term", "hup"],
)
def test_a_stop_signal_gives_the_terminal_back(sig: int, code: int) -> None:
    # The simulator's Prometheus answer: one good vLLM server (and hostile labels beside it).
    with hostile_server("prom-labels") as prometheus:
        pid, fd = spawn_in_pty(["--prometheus", prometheus.url])
        status: int | None = None
        try:
            seen = read_until(fd, b"good-node", 30)  # the fleet's row: the screen is up
            assert b"good-node" in seen, seen[-400:]
            assert b"\x1b[?1049h" in seen  # it did take over the screen
            started = time.monotonic()
            os.kill(pid, sig)
            status, rest = read_to_exit(pid, fd, 8.0)
            elapsed = time.monotonic() - started
        finally:
            os.close(fd)
            if status is None:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    assert status is not None, "still running 8 s after the signal"
    assert os.waitstatus_to_exitcode(status) == code, rest[-400:]
    assert elapsed < 4.0
    assert b"\x1b[?1049l" in rest, rest[-400:]  # alternate screen off
    assert b"\x1b[?25h" in rest  # cursor shown
    assert b"\x1b[?1000l" in rest  # mouse tracking off
