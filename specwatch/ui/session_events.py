"""The live monitor's handlers for what its session sends: samples into the model, errors shown.

Kept apart from the screen and its keys (``ui/app.py``). GPU ticks and ``/metrics`` windows
wait in an inbox (``ui/live.py``) that the redraw timer empties; every other event drains it at
once, so their order holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from specwatch.ui.model import MonitorModel
from specwatch.ui.terminal_watch import TerminalWatchApp

if TYPE_CHECKING:
    from textual.message import Message

    from specwatch.ui.live import Drain, EventInbox
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


class SessionEventsApp(TerminalWatchApp):
    """Applies the session's messages to :attr:`model`; a bad one is counted, never fatal."""

    model: MonitorModel
    message_counts: Counter[str]
    sample_errors: int
    _inbox: EventInbox | None

    def apply_inbox(self) -> None:
        """Handle the session's waiting messages, oldest first (also while paused: sampling
        continues, so nothing is lost)."""
        if self._inbox is None:
            return
        for message in self._inbox.take():
            getattr(self, message.handler_name)(message)

    def on_drain(self, message: Drain) -> None:
        """An event that should show at once arrived behind others: handle them all now."""
        self.apply_inbox()

    def post_in_order(self, message: Message) -> None:
        """Post ``message`` behind the session's waiting events (thread-safe)."""
        if self._inbox is None:
            self.post_message(message)
            return
        from specwatch.ui.live import Drain

        self._inbox.put(message)
        self.post_message(Drain())

    def _guard(self, name: str, fn: Callable[[], None]) -> None:
        """Apply one incoming sample; a bad one is counted and shown, never fatal."""
        self.message_counts[name] += 1
        try:
            fn()
        except Exception as e:  # a malformed sample must not take the monitor down
            self.sample_errors += 1
            if self.sample_errors <= 3:
                self.notify(f"{name}: {type(e).__name__}: {e}", title="bad sample skipped")

    def on_gpu_inventory_changed(self, message: GpuInventoryChanged) -> None:
        """The GPU source opened (or not), or the GPUs' fixed data changed."""
        self._guard("inventory", lambda: self.model.set_inventory(message.inventory))

    def on_gpu_ticked(self, message: GpuTicked) -> None:
        """A GPU tick arrived from the sampler thread."""
        self._guard("gpu_tick", lambda: self.model.add_tick(message.tick))

    def on_server_waiting(self, message: ServerWaiting) -> None:
        """The server is down or loading."""
        m = message
        self._guard(
            "server_waiting",
            lambda: self.model.set_waiting(m.t, m.state, m.attempt, m.elapsed_s, m.detail),
        )

    def on_server_ready(self, message: ServerReady) -> None:
        """The server answered."""
        self._guard("server_ready", lambda: self.model.set_ready(message.t, message.info))

    def on_server_identified(self, message: ServerIdentified) -> None:
        """The server's code identity: its commit goes beside the version."""
        self._guard("server_identified", lambda: self.model.set_identity(message.identity))

    def on_server_lost(self, message: ServerLost) -> None:
        """The server stopped answering."""
        self._guard("server_lost", lambda: self.model.set_lost(message.t, message.reason))

    def on_metrics_scraped(self, message: MetricsScraped) -> None:
        """A ``/metrics`` window arrived."""
        self._guard("metrics", lambda: self.model.add_window(message.window))

    def on_bench_progress(self, message: BenchProgress) -> None:
        """A benchmark event."""
        m = message
        self._guard(
            "bench_progress",
            lambda: self.model.bench_event(m.t, m.kind, m.index, m.total, m.message, m.tok_s),
        )

    def on_bench_finished(self, message: BenchFinished) -> None:
        """A benchmark ended: show the result and where it was saved."""
        self.message_counts["bench_finished"] += 1
        body = message.body
        if message.snapshot_path:
            body += f"\n\nsnapshot saved: {message.snapshot_path}"
        if message.error:
            body += f"\n\n{message.error}"
        from specwatch.ui.modals import TextModal

        self.push_screen(TextModal(message.title, body))


__all__ = ["SessionEventsApp"]
