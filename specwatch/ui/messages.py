"""Messages that carry the live session's events to the app (see ``ui/live.py``).

Each is small and immutable in spirit: it carries one frozen sample from the core models. The
session's threads post them with ``App.post_message``, which is thread-safe.
"""

from __future__ import annotations

from textual.message import Message

from specwatch.core.gpu import GpuInventory, GpuTick
from specwatch.core.identity import ServerIdentity
from specwatch.core.server import MetricsWindow, ServerInfo


class GpuInventoryChanged(Message):
    """The GPUs' fixed data: when the source opened (or why it cannot), then on every change."""

    def __init__(self, inventory: GpuInventory) -> None:
        super().__init__()
        self.inventory = inventory


class GpuTicked(Message):
    """One tick of every GPU."""

    def __init__(self, tick: GpuTick) -> None:
        super().__init__()
        self.tick = tick


class ServerWaiting(Message):
    """The server is not ready yet; the app keeps waiting and says so."""

    def __init__(self, t: float, state: str, attempt: int, elapsed_s: float, detail: str) -> None:
        super().__init__()
        self.t = t
        self.state = state
        self.attempt = attempt
        self.elapsed_s = elapsed_s
        self.detail = detail

    def can_replace(self, message: Message) -> bool:
        """A newer waiting status supersedes an older one still queued."""
        return isinstance(message, ServerWaiting)


class ServerReady(Message):
    """The server answered and was identified."""

    def __init__(self, t: float, info: ServerInfo) -> None:
        super().__init__()
        self.t = t
        self.info = info


class ServerIdentified(Message):
    """The ready server's code identity (commit, environment, libraries) was read."""

    def __init__(self, identity: ServerIdentity) -> None:
        super().__init__()
        self.identity = identity


class ServerLost(Message):
    """The server stopped answering (the poller goes back to waiting)."""

    def __init__(self, t: float, reason: str) -> None:
        super().__init__()
        self.t = t
        self.reason = reason


class MetricsScraped(Message):
    """One ``/metrics`` scrape turned into a window of deltas."""

    def __init__(self, window: MetricsWindow) -> None:
        super().__init__()
        self.window = window


class BenchProgress(Message):
    """A benchmark event (``started``, ``warmup_done``, ``run_start``, ``run_done``, ...)."""

    def __init__(
        self,
        t: float,
        kind: str,
        index: int,
        total: int,
        message: str,
        tok_s: float | None = None,
    ) -> None:
        super().__init__()
        self.t = t
        self.kind = kind
        self.index = index
        self.total = total
        self.message = message
        self.tok_s = tok_s


class BenchFinished(Message):
    """A benchmark ended: its summary, where the snapshot went, or why it failed."""

    def __init__(self, title: str, body: str, snapshot_path: str | None, error: str | None) -> None:
        super().__init__()
        self.title = title
        self.body = body
        self.snapshot_path = snapshot_path
        self.error = error
