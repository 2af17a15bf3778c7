"""Every use of a private Textual name, for the one Textual release it was written for.

Written for :data:`WRITTEN_FOR`, the exact pin in ``pyproject.toml``. On any other release each
helper here gives Textual's own behaviour instead, and ``tests/test_ui_textual_compat.py`` fails
until this file is checked against the new release: moving the pin is this file plus
regenerated snapshot SVGs.

What is here: Textual's Linux driver with an input thread that sleeps until there is something
to read. Textual's own thread wakes ten times a second (``select`` with a 0.1 s timeout) to see
whether it should stop and whether a lone Escape has waited long enough to count as a key. For
a monitor left open all day those wakes were about an eighth of its whole CPU (0.06-0.07 CPU-s
in a 50 s run of ``tests/tools/overhead.py``, against ~0.8 for the app; ~0.15% of a core).
Here the thread blocks until the terminal sends something, the parser's escape timeout is due,
or :meth:`QuietLinuxDriver.disable_input` wakes it through a pipe; keys, pastes, mouse and
resize reports are parsed by Textual's own parser. The private names it needs:
``textual._xterm_parser.XTermParser`` and its deadline ``_timeout_time``, ``textual._parser.
ParseError``, ``textual._time.get_time`` (the deadline's clock) and ``Driver._debug``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
from codecs import getincrementaldecoder
from pathlib import Path
from typing import TYPE_CHECKING

import textual
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

if TYPE_CHECKING:
    from textual._xterm_parser import XTermParser

WRITTEN_FOR = "8.2.8"
"""The Textual release whose private names this module uses."""

POLL_S = 0.1
"""How long to wait when the parser's escape deadline cannot be read (Textual's own wait)."""


def installed_is_written_for() -> bool:
    """Whether the Textual installed is :data:`WRITTEN_FOR`.

    Read from the ``textual-<version>.dist-info`` folder beside the package (the standard
    layout of an installed distribution): asking ``importlib.metadata`` would add ~0.1 s to the
    first frame. A Textual installed any other way counts as another release.
    """
    site = Path(textual.__file__).resolve().parent.parent
    return (site / f"textual-{WRITTEN_FOR}.dist-info").is_dir()


def parser_wait(parser: XTermParser, now: float) -> float | None:
    """Seconds until the parser's escape timeout is due (``None``: none is pending).

    ``_timeout_time`` is the parser's private deadline (on Textual's ``get_time`` clock); a
    parser without it gets Textual's own 0.1 s polling rather than a missed Escape key.
    """
    if not hasattr(parser, "_timeout_time"):
        return POLL_S
    deadline = parser._timeout_time
    if deadline is None:
        return None
    return max(0.0, deadline - now)


class QuietLinuxDriver(LinuxDriver):
    """A :class:`LinuxDriver` whose input thread wakes only for input, its escape timeout,
    or the driver stopping."""

    _wake: tuple[int, int] | None = None
    _stopping: bool = False

    def start_application_mode(self) -> None:
        """Open the wake pipe before Textual starts the input thread."""
        self._stopping = False
        if self._wake is None:
            self._wake = os.pipe()
        super().start_application_mode()  # type: ignore[no-untyped-call]

    def disable_input(self) -> None:
        """Wake the input thread so that it ends, then let Textual join it."""
        self._wake_to_stop()
        super().disable_input()

    def _wake_to_stop(self) -> None:
        self._stopping = True
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(OSError):
                os.write(wake[1], b"x")

    def close(self) -> None:
        """Close the wake pipe too."""
        super().close()
        wake, self._wake = self._wake, None
        if wake is not None:
            for fd in wake:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def run_input_thread(self) -> None:
        """Read the terminal and post what the parser makes of it, until stopped."""
        wake = self._wake
        if wake is None:  # started without start_application_mode: Textual's own loop
            super().run_input_thread()
            return
        from textual._parser import ParseError
        from textual._time import get_time
        from textual._xterm_parser import XTermParser

        fileno = self.fileno
        selector = selectors.SelectSelector()
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake[0], selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def process(ready: list[tuple[selectors.SelectorKey, int]]) -> None:
            for key, _mask in ready:
                if key.fd == wake[0]:
                    with contextlib.suppress(OSError):
                        os.read(wake[0], 64)
                    continue
                raw = os.read(fileno, 1024 * 4)
                if not raw:
                    # Stdin at its end (piped): Textual's loop would find it readable again
                    # at once, forever; wait for the wake pipe alone.
                    selector.unregister(fileno)
                    continue
                data = decode(raw)
                if data:  # empty: the first bytes of a character split across reads
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not (self._stopping or self.exit_event.is_set()):
                process(selector.select(parser_wait(parser, get_time())))
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _event in parser.feed(""):
                    pass


def quiet_driver_class(chosen: type[Driver]) -> type[Driver]:
    """:class:`QuietLinuxDriver` where Textual chose its plain :class:`LinuxDriver` and is the
    release this module was written for; any other choice (Windows, ``TEXTUAL_DRIVER``) or
    release as it is."""
    if chosen is LinuxDriver and installed_is_written_for():
        return QuietLinuxDriver
    return chosen


__all__ = [
    "POLL_S",
    "WRITTEN_FOR",
    "QuietLinuxDriver",
    "installed_is_written_for",
    "parser_wait",
    "quiet_driver_class",
]
