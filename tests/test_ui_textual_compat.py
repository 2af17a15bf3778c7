"""The Textual compatibility module: written for the Textual installed (this file fails loudly
when the pin moves), Textual's own driver on any other release, and its quiet input thread,
which blocks until input, parses keys as Textual does, delivers a lone Escape when the parser's
timeout is due, stops when woken, and does not spin on a closed stdin."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import queue
import selectors
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import tomllib
from textual import events
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from specwatch.ui import textual_compat
from specwatch.ui.textual_compat import (
    POLL_S,
    WRITTEN_FOR,
    QuietLinuxDriver,
    installed_is_written_for,
    parser_wait,
    quiet_driver_class,
)
from tests.test_ui_hangup import read_until, spawn_in_pty, wait_exit

ROOT = Path(__file__).resolve().parents[1]

WAIT_S = 10.0
"""The longest any step may take before the test fails (a deadline, not a pause)."""


def test_the_installed_textual_is_the_one_the_compat_module_was_written_for() -> None:
    """Moving the Textual pin: check ``specwatch/ui/textual_compat.py``'s private names against
    the new release, set its ``WRITTEN_FOR``, and regenerate the snapshot SVGs
    (``pytest --snapshot-update``). Until then the app runs on Textual's own driver."""
    installed = importlib.metadata.version("textual")
    assert installed == WRITTEN_FOR, (
        f"textual {installed} is installed; specwatch/ui/textual_compat.py was written for "
        f"{WRITTEN_FOR}: check its private names against {installed}, then set WRITTEN_FOR"
    )
    assert installed_is_written_for()


def test_the_pin_is_the_release_the_compat_module_was_written_for() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert f"textual=={WRITTEN_FOR}" in project["project"]["dependencies"]


def test_another_textual_gets_textuals_own_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textual_compat, "WRITTEN_FOR", "0.0.0")
    assert not installed_is_written_for()
    assert quiet_driver_class(LinuxDriver) is LinuxDriver


@dataclass
class Selects:
    """Every ``select`` the input thread made: its timeout and the fds it waited on."""

    calls: queue.Queue[tuple[float | None, frozenset[int]]] = field(default_factory=queue.Queue)

    def next_blocking(self) -> frozenset[int]:
        """Wait for the next select made with no timeout; the fds it waits on."""
        while True:
            timeout, fds = self.calls.get(timeout=WAIT_S)
            if timeout is None:
                return fds


class Driver(QuietLinuxDriver):
    """The driver's input thread over a pipe, its messages collected (no app, no terminal)."""

    def __init__(self) -> None:  # Textual's __init__ takes over the process's terminal
        self.messages: queue.Queue[Message] = queue.Queue()
        self._debug = False
        self._stopping = False
        self.exit_event = threading.Event()
        self.fileno, self._keys = os.pipe()
        self.wake_r, self.wake_w = self._wake = os.pipe()

    def process_message(self, message: Message) -> None:
        self.messages.put(message)

    def key(self) -> events.Key:
        while True:
            message = self.messages.get(timeout=WAIT_S)
            if isinstance(message, events.Key):
                return message


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Driver, Selects]]:
    seen = Selects()

    class Recording(selectors.SelectSelector):
        def select(self, timeout: float | None = None) -> Any:
            seen.calls.put((timeout, frozenset(k.fd for k in self.get_map().values())))
            return super().select(timeout)

    monkeypatch.setattr(selectors, "SelectSelector", Recording)
    d = Driver()
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    thread.start()
    yield d, seen
    d._wake_to_stop()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the input thread did not stop when woken"
    for fd in (d.fileno, d._keys, d.wake_r, d.wake_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_idle_it_blocks_without_a_timeout(driver: tuple[Driver, Selects]) -> None:
    d, seen = driver
    assert seen.next_blocking() == {d.fileno, d.wake_r}


def test_keys_arrive_as_textual_parses_them(driver: tuple[Driver, Selects]) -> None:
    d, seen = driver
    seen.next_blocking()
    os.write(d._keys, b"q")
    assert d.key().key == "q"
    seen.next_blocking()
    os.write(d._keys, "é".encode()[:1])  # a character split across two reads
    seen.next_blocking()
    os.write(d._keys, "é".encode()[1:])
    assert d.key().character == "é"
    seen.next_blocking()
    os.write(d._keys, b"\x1b[A")
    assert d.key().key == "up"


def test_a_lone_escape_arrives_when_its_timeout_is_due(driver: tuple[Driver, Selects]) -> None:
    d, seen = driver
    seen.next_blocking()
    os.write(d._keys, b"\x1b")
    timeouts = []
    while True:  # the thread waits for the parser's deadline, not forever and not 0.1 s
        timeout, _ = seen.calls.get(timeout=WAIT_S)
        if timeout is not None:
            timeouts.append(timeout)
            break
    assert 0.0 <= timeouts[0] <= 0.2
    assert d.key().key == "escape"
    assert seen.next_blocking() == {d.fileno, d.wake_r}


def test_stdin_at_its_end_is_not_read_again(driver: tuple[Driver, Selects]) -> None:
    d, seen = driver
    seen.next_blocking()
    os.close(d._keys)
    assert seen.next_blocking() == {d.wake_r}


def test_parser_wait() -> None:
    parser = XTermParser()
    assert parser_wait(parser, 0.0) is None
    list(parser.feed("\x1b"))
    deadline = parser._timeout_time
    assert deadline is not None
    assert parser_wait(parser, deadline - 0.05) == pytest.approx(0.05)
    assert parser_wait(parser, deadline + 1.0) == 0.0

    class Other:  # a Textual whose parser keeps its deadline elsewhere
        pass

    assert parser_wait(Other(), 0.0) == POLL_S  # type: ignore[arg-type]


def test_only_textuals_own_linux_driver_is_replaced() -> None:
    assert quiet_driver_class(LinuxDriver) is QuietLinuxDriver

    class Custom(LinuxDriver):
        pass

    assert quiet_driver_class(Custom) is Custom


def test_keys_reach_the_app_in_a_real_terminal() -> None:
    """Help opens on ``?``, a lone Escape closes it, ``q`` then quits: each key went through
    the quiet thread, and the Escape only through the parser's timeout."""
    pid, fd = spawn_in_pty(["--demo"])
    status: int | None = None
    try:
        assert b"GPUs" in read_until(fd, b"GPUs", 20)
        os.write(fd, b"?")
        assert b"pause / resume" in read_until(fd, b"pause / resume", WAIT_S)
        os.write(fd, b"\x1b")
        assert b"GPUs" in read_until(fd, b"GPUs", WAIT_S)  # the main screen again
        os.write(fd, b"q")
        status = wait_exit(pid, WAIT_S, fd)
        assert status is not None, "q did not quit"
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
