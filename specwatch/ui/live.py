"""The adapter between the live session and the app: session events in, Textual messages out.

The session (``specwatch.session``) owns every poller, thread and task; this module only turns
its events into messages and hands them over, so the app never touches a source. GPU ticks and
``/metrics`` windows (one or two a second, every second) wait in an :class:`EventInbox` that
the app empties at its next redraw, which is when they would first show: posting each as a
message woke the event loop and ran Textual's dispatch for every one (about 0.5 ms each on this
machine's kind). Every other event goes into the same inbox, so the order is kept, and posts a
:class:`Drain` that empties it at once.
"""

from __future__ import annotations

from collections import deque
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


class Drain(Message):
    """Apply the events waiting in the app's :class:`EventInbox` now (one is worth showing)."""

    def can_replace(self, message: Message) -> bool:
        """One drain still queued empties the inbox for every event behind it."""
        return isinstance(message, Drain)


class EventInbox:
    """Messages for the app in the order their events happened; any thread puts, the app takes.

    ``deque.append`` and ``popleft`` are atomic, so no lock is needed.
    """

    def __init__(self) -> None:
        self._messages: deque[Message] = deque()

    def put(self, message: Message) -> None:
        """Add ``message`` behind those waiting."""
        self._messages.append(message)

    def take(self) -> list[Message]:
        """Every waiting message, oldest first; the inbox is then empty."""
        out: list[Message] = []
        pop = self._messages.popleft
        while True:
            try:
                out.append(pop())
            except IndexError:
                return out

    def __len__(self) -> int:
        return len(self._messages)


COALESCED = (GpuTicked, MetricsScraped)
"""Messages that wait for the next redraw instead of waking the app."""


class SessionRelay:
    """A session subscriber that hands each event to the app as a message.

    The app shows one server; events of other endpoints are left to other subscribers.

    Args:
        post: ``App.post_message``.
        server: The endpoint index shown.
        inbox: Where messages wait for the app (see the module's docstring); ``None`` posts
            each one.
    """

    def __init__(
        self,
        post: Callable[[Message], object],
        server: int = 0,
        inbox: EventInbox | None = None,
    ) -> None:
        self.post = post
        self.server = server
        self.inbox = inbox

    def __call__(self, event: ev.SessionEvent) -> None:
        """Hand ``event`` over as a message."""
        if getattr(event, "server", self.server) != self.server:
            return
        message = message_for(event)
        if message is None:
            return
        if self.inbox is None or isinstance(message, Notify):
            self.post(message)
            return
        self.inbox.put(message)
        if not isinstance(message, COALESCED):
            self.post(Drain())
