"""An asyncio service on its own daemon thread and event loop: the simulated servers' lifecycle.

The simulated inference server and the simulated dcgm-exporter both serve from a private loop
so that tests and the demo can drive them from synchronous code; this holds the start, stop and
context-manager plumbing they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TypeVar

_T = TypeVar("_T", bound="LoopThread")


class LoopThread:
    """Runs :meth:`_serve` on a private event loop in a daemon thread.

    A subclass implements :meth:`_serve`: it sets up, calls :meth:`_serving` once it answers, and
    returns after ``self._stopping`` is set (tearing down on the way out).
    """

    thread_name = "specwatch-sim"
    what = "simulated server"
    """Named in the error when it cannot start."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stopping: asyncio.Event | None = None

    def _start_thread(self) -> None:
        """Start the thread (once) and wait until it serves or fails.

        Raises:
            RuntimeError: It could not start (the cause named).
        """
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=self.thread_name, daemon=True)
            self._thread.start()
            self._ready.wait()
        if self._error is not None:
            raise RuntimeError(f"{self.what} failed to start: {self._error}")

    def _serving(self) -> None:
        """Tell :meth:`_start_thread` that the service answers."""
        self._ready.set()

    def stop(self) -> None:
        """Stop serving and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._stopping.set)
        thread.join(timeout=10)
        self._thread = None

    def start(self) -> str:
        """Start serving; returns the service's URL."""
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        raise NotImplementedError

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start() or lost with the daemon thread
            self._error = exc
            self._ready.set()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


__all__ = ["LoopThread"]
