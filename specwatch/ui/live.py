"""The adapter between the live session and the app: session events in, Textual messages out.

The session (``specwatch.session``) owns every poller, thread and task; this module only turns
its events into messages and posts them (``App.post_message`` is thread-safe), so the app never
touches a source.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.notifications import Notification, Notify

from specwatch.session import events as ev
from specwatch.ui.messages import (
    BenchFinished,
    BenchProgress,
    GpuInventoryChanged,
    GpuTicked,
    MetricsScraped,
    ServerIdentified,
    ServerLost,
    ServerReady,
    ServerWaiting,
)


def bench_finished_message(event: ev.BenchFinished) -> BenchFinished:
    """The result window's title and text for a finished benchmark."""
    from specwatch.ui.bench_glue import result_text

    if event.result is None:
        return BenchFinished("benchmark failed", event.failure or "", None, None)
    path = str(event.snapshot_path) if event.snapshot_path is not None else None
    return BenchFinished(
        f"benchmark {event.outcome}", result_text(event.result), path, event.snapshot_error
    )


def message_for(event: ev.SessionEvent) -> Message | None:
    """The app message for one session event (``None``: nothing the app shows)."""
    if isinstance(event, ev.GpuTicked):
        return GpuTicked(event.tick)
    if isinstance(event, ev.MetricsScraped):
        return MetricsScraped(event.window)
    if isinstance(event, ev.GpuInventoryChanged):
        return GpuInventoryChanged(event.inventory)
    if isinstance(event, ev.ServerWaiting):
        return ServerWaiting(event.t, event.state, event.attempt, event.elapsed_s, event.detail)
    if isinstance(event, ev.ServerReady):
        return ServerReady(event.t, event.info)
    if isinstance(event, ev.ServerIdentified):
        return ServerIdentified(event.identity)
    if isinstance(event, ev.ServerLost):
        return ServerLost(event.t, event.reason)
    if isinstance(event, ev.BenchProgress):
        e = event
        return BenchProgress(e.t, e.kind, e.index, e.total, e.message, e.tok_s)
    if isinstance(event, ev.BenchFinished):
        return bench_finished_message(event)
    if isinstance(event, ev.RecordingStopped):
        return Notify(Notification(event.reason, "recording", "error", timeout=3600))
    return None


class SessionRelay:
    """A session subscriber that posts each event to the app as a message.

    The app shows one server; events of other endpoints are left to other subscribers.

    Args:
        post: ``App.post_message``.
        server: The endpoint index shown.
    """

    def __init__(self, post: Callable[[Message], object], server: int = 0) -> None:
        self.post = post
        self.server = server

    def __call__(self, event: ev.SessionEvent) -> None:
        """Post ``event`` as a message."""
        if getattr(event, "server", self.server) != self.server:
            return
        message = message_for(event)
        if message is not None:
            self.post(message)
