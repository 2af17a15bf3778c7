"""Over SSH: the app exits promptly when its terminal goes away, and starts cleanly in a pty."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from specwatch.ui.hangup import HANGUP_EXIT, start_backstop, terminal_alive

ROOT = Path(__file__).resolve().parent.parent


def spawn_in_pty(args: list[str], cwd: Path = ROOT) -> tuple[int, int]:
    """Start ``python -m specwatch ARGS`` as session leader of a new pty; (pid, master fd)."""
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24", PYTHONPATH=str(ROOT))
    pid, fd = pty.fork()
    if pid == 0:  # the child: become the app
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "specwatch", *args], env)
    return pid, fd


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    out = b""
    end = time.monotonic() + timeout
    while needle not in out and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def read_to_exit(pid: int, fd: int, timeout: float) -> tuple[int | None, bytes]:
    """Read the child's output until it exits (its wait status) or ``timeout`` passes (None)."""
    out = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out += read_until(fd, b"\x00never", 0.3)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, out + read_until(fd, b"\x00never", 0.3)
    return None, out


def wait_exit(pid: int, timeout: float, fd: int = -1) -> int | None:
    """Wait for the child, reading its output meanwhile (as a live terminal would)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if fd >= 0 and select.select([fd], [], [], 0.05)[0]:
            try:
                os.read(fd, 65536)
            except OSError:
                fd = -1
        else:
            time.sleep(0.02)
    return None


@pytest.mark.parametrize("how", ["close", "sighup"])
def test_exits_within_5s_when_the_terminal_goes_away(how: str) -> None:
    pid, fd = spawn_in_pty(["--demo", "--interval", "0.5"])
    status: int | None = None
    try:
        seen = read_until(fd, b"GPUs", 20)
        assert b"GPUs" in seen, seen[-400:]
        started = time.monotonic()
        if how == "close":
            os.close(fd)  # the SSH connection drops: the kernel hangs up the pty
            fd = -1
        else:
            os.kill(pid, signal.SIGHUP)
        status = wait_exit(pid, 5.0, fd)
        elapsed = time.monotonic() - started
        assert status is not None, "still running 5 s after the hangup"
        assert os.waitstatus_to_exitcode(status) == 129
        # Both leave well before the 2.5 s backstop: a dropped connection by the fast path, a
        # plain SIGHUP by Textual's normal exit (which restores the terminal).
        assert elapsed < 2.0
    finally:
        if fd >= 0:
            os.close(fd)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_a_usage_error_is_one_clear_line() -> None:
    import subprocess

    # Without a URL specwatch watches http://localhost:8000 (tests/test_cli_settings.py).
    r = subprocess.run(
        [sys.executable, "-m", "specwatch", "--url", "localhost:1", "--demo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=30,
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--url" in r.stderr and "--demo" in r.stderr
    assert "exclusive" in r.stderr


def test_terminal_alive_sees_a_hung_up_pty(tmp_path: Path) -> None:
    with open(tmp_path / "f", "w") as f:
        assert terminal_alive(f.fileno()) is True  # not a terminal: nothing to lose
    master, slave = pty.openpty()
    try:
        assert terminal_alive(slave) is True
        os.close(master)
        master = -1
        assert terminal_alive(slave) is False
    finally:
        if master >= 0:
            os.close(master)
        os.close(slave)


def test_backstop_ends_the_process_after_the_delay() -> None:
    codes: list[int] = []
    thread = start_backstop(0.05, codes.append)
    thread.join(2.0)
    assert codes == [HANGUP_EXIT]
