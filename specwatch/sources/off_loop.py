"""Work that must not hold an event loop a screen is drawn on: run on a daemon thread.

Unlike ``asyncio.to_thread`` (the loop's executor, whose threads the interpreter waits for at
exit), a daemon thread does not keep a process alive after ``q``: a parse of a huge answer in
flight is abandoned with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


async def off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a daemon thread, awaited; its exception is raised here."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # cancelled meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            value, error = fn(*args), None
        except BaseException as exc:  # handed to the awaiting task, raised there
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="specwatch-off-loop", daemon=True).start()
    return await done


__all__ = ["off_loop"]
