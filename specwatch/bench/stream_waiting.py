"""Waiting for a run's streams together, and cancelling them together."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from specwatch.core.server import StreamResult


async def wait_all(
    tasks: Sequence[asyncio.Future[StreamResult]], cancel: asyncio.Event | None
) -> bool:
    """Wait for every task; on ``cancel`` (or our own cancellation) cancel them all.

    Returns:
        True when cancelled through ``cancel``. Our own cancellation is re-raised after the
        streams were cancelled and awaited.
    """
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        if waiter is not None:
            pending.add(waiter)
        while True:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if waiter is not None and waiter in done:
                await cancel_all(tasks)
                return True
            if all(t.done() for t in tasks):
                return False
    except asyncio.CancelledError:
        await cancel_all(tasks)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()


async def cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel every task and wait until each has ended."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
