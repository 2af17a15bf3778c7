"""The live monitor takes its session's events and applies them to its model, on the UI thread.

The session calls :meth:`SessionEventsApp.receive` from its threads and tasks. Every event waits
in an :class:`EventInbox`, in the order it happened. GPU ticks, ``/metrics`` windows and the
verdicts they lead to (a few a second, every second) wait for the next redraw, which is when
they would first show: posting each as a message woke the event loop and ran Textual's dispatch
for every one (about 0.5 ms each on this machine's kind). Any other event posts one
:class:`Drain`, and the app empties the inbox at once.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

from specwatch.core.sanitize import sanitize_line
from specwatch.ui.model import MonitorModel
from specwatch.ui.terminal_watch import TerminalWatchApp

if TYPE_CHECKING:
    from specwatch.session.bench_job import BenchJob
    from specwatch.session.events import BenchFinished, SessionEvent

LEFT_WAIT_S = 2.0
"""How long leaving waits for a stopped benchmark's snapshot (under SIGHUP's 2.5 s backstop)."""


class Drain(Message):
    """Apply the events waiting in the app's :class:`EventInbox` now (one is worth showing)."""

    def can_replace(self, message: Message) -> bool:
        """One drain still queued empties the inbox for every event behind it."""
        return isinstance(message, Drain)


class EventInbox:
    """Session events for the app in the order they happened; any thread puts, the app takes.

    ``deque.append`` and ``popleft`` are atomic, so no lock is needed.
    """

    def __init__(self) -> None:
        self._items: deque[SessionEvent | Callable[[], object]] = deque()

    def put(self, item: SessionEvent | Callable[[], object]) -> None:
        """Add ``item`` behind those waiting."""
        self._items.append(item)

    def take(self) -> list[SessionEvent | Callable[[], object]]:
        """Every waiting item, oldest first; the inbox is then empty."""
        out: list[SessionEvent | Callable[[], object]] = []
        pop = self._items.popleft
        while True:
            try:
                out.append(pop())
            except IndexError:
                return out

    def __len__(self) -> int:
        return len(self._items)


class SessionEventsApp(TerminalWatchApp):
    """The app's side of its session: starts and stops it, applies its events to
    :attr:`model` (a bad one is counted, never fatal) and passes it the reference marks."""

    model: MonitorModel
    message_counts: Counter[str]
    """How many events of each kind were applied (for tests and the overhead script)."""
    sample_errors: int
    server_shown = 0
    """The endpoint the monitor shows; other endpoints' events are left to other subscribers."""
    _inbox: EventInbox
    _session_stopped = False
    _bench_left: BenchJob | None = None
    leaving: str = "on quitting"
    """How the app was left, for the benchmark line (a signal's name overrides it)."""
    bench_report: tuple[str, str] | None = None
    """The last benchmark's result, ``(title, text)``, for ``o``."""

    def start_session(self) -> None:
        """Receive the session's events and start it (after the first frame)."""
        if self.session is not None and not self._session_stopped:
            if self.model.inventory is None:
                self.model.gpu_opening = self.session.gpus.opening
                self.model.gpu_version += 1
            self.session.subscribe(self.receive)
            verdict = self.session.verdict
            if verdict is not None:  # it may have moved before us (seeded from the fleet)
                self.model.set_verdict(verdict.state())
            self.session.start()

    def on_unmount(self) -> None:
        """Stop the session: its pollers, GPU source, demo and a running benchmark (which
        saves its finished runs: see :meth:`benchmark_left`)."""
        self._session_stopped = True
        if self.session is not None:
            if self.session.bench_running:
                self._bench_left = self.session.bench
            self.session.stop()

    def benchmark_left(self, timeout_s: float = LEFT_WAIT_S) -> str | None:
        """After the app ended: one line on the benchmark its ending stopped (how many runs
        were saved, and where), once it saved them; ``None`` when none was running."""
        job = self._bench_left
        if job is None:
            return None
        job.done.wait(timeout_s)
        watch = self.terminal_watch
        how = f"by {watch.stopped_by}" if watch is not None and watch.stopped_by else self.leaving
        return f"specwatch: {job.stopped_line(how)}"

    def action_mark_reference(self) -> None:
        """Judge against the window ending now from here on (the session keeps the mark)."""
        if self.session is None or not self.session.mark_reference():
            self.notify("no live verdict here to mark a reference for", timeout=3)
            return
        self.notify("reference: the last 30 s", timeout=2)

    def receive(self, event: SessionEvent) -> None:
        """Take one session event (a session subscriber: thread-safe, quick)."""
        from specwatch.session import events as ev  # loaded: an event of it is here

        if getattr(event, "server", self.server_shown) != self.server_shown:
            return
        self._inbox.put(event)
        if not isinstance(event, ev.GpuTicked | ev.MetricsScraped | ev.VerdictChanged):
            self.post_message(Drain())

    def in_order(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the UI thread behind the events waiting now (thread-safe)."""
        self._inbox.put(callback)
        self.post_message(Drain())

    def apply_inbox(self) -> None:
        """Apply the waiting events, oldest first (also while paused: sampling continues, so
        nothing is lost)."""
        for item in self._inbox.take():
            if callable(item):
                item()
            else:
                self.apply_event(item)

    def on_drain(self, message: Drain) -> None:
        """An event that should show at once arrived behind others: apply them all now."""
        self.apply_inbox()

    def apply_event(self, event: SessionEvent) -> None:
        """Apply one session event to the model; a malformed one is counted and shown."""
        from specwatch.session import events as ev

        m = self.model
        apply: Callable[[], object]
        match event:
            case ev.GpuInventoryChanged(inventory=inventory):
                name, apply = "inventory", lambda: m.set_inventory(inventory)
            case ev.GpuTicked(tick=tick):
                name, apply = "gpu_tick", lambda: m.add_tick(tick)
            case ev.ServerWaiting(t, state, attempt, elapsed_s, detail):
                name = "server_waiting"
                apply = lambda: m.set_waiting(t, state, attempt, elapsed_s, detail)  # noqa: E731
            case ev.ServerReady(t=t, info=info):
                name, apply = "server_ready", lambda: m.set_ready(t, info)
            case ev.ServerIdentified(identity=identity):
                name, apply = "server_identified", lambda: m.set_identity(identity)
            case ev.ServerLost(t=t, reason=reason):
                name, apply = "server_lost", lambda: m.set_lost(t, reason)
            case ev.MetricsScraped(window=window):
                name, apply = "metrics", lambda: m.add_window(window)
            case ev.VerdictChanged(state=verdict):
                name, apply = "verdict", lambda: m.set_verdict(verdict)
            case ev.BenchProgress(t, kind, index, total, text, tok_s):
                name = "bench_progress"
                apply = lambda: m.bench_event(t, kind, index, total, text, tok_s)  # noqa: E731
            case ev.BenchFinished():
                name, apply = "bench_finished", lambda: self._show_bench_result(event)
            case ev.RecordingStopped(reason=reason):
                name = "recording_stopped"
                apply = lambda: self.notify(  # noqa: E731
                    reason, title="recording", severity="error", timeout=3600
                )
            case _:
                return
        self.message_counts[name] += 1
        try:
            apply()
        except Exception as e:  # a malformed sample must not take the monitor down
            self.sample_errors += 1
            if self.sample_errors <= 3:
                self.notify(
                    sanitize_line(f"{name}: {type(e).__name__}: {e}", 300),
                    title="bad sample skipped",
                )

    def _show_bench_result(self, event: BenchFinished) -> None:
        """A benchmark ended: its result, where the snapshot went, or why it failed.

        A finished one is said in a notice over the live screen (``o`` opens the whole result);
        one that failed or was cut short opens at once, since it needs reading.
        """
        from specwatch.ui.bench_glue import result_text
        from specwatch.ui.modals import TextModal

        if event.result is None:
            self.bench_report = ("benchmark failed", event.failure or "")
            self.push_screen(TextModal(*self.bench_report))
            return
        body = result_text(event.result)
        if event.snapshot_path is not None:
            body += f"\n\nsnapshot saved: {event.snapshot_path}"
        if event.snapshot_error:
            body += f"\n\n{event.snapshot_error}"
        self.bench_report = (f"benchmark {event.outcome}", body)
        if event.outcome != "finished" or event.snapshot_error:
            self.push_screen(TextModal(*self.bench_report))
            return
        overall = [line.strip() for line in body.splitlines() if "Overall:" in line]
        saved = f" · saved {event.snapshot_path.name}" if event.snapshot_path is not None else ""
        summary = (overall[0] if overall else "done") + saved + " · o: the whole result"
        self.notify(sanitize_line(summary, 300), title="benchmark finished", timeout=12)

    def action_bench_report(self) -> None:
        """Open the last benchmark's whole result."""
        from specwatch.ui.modals import TextModal

        if self.bench_report is None:
            self.notify("no benchmark has finished yet (b starts one)", timeout=3)
            return
        self.push_screen(TextModal(*self.bench_report))


__all__ = ["Drain", "EventInbox", "SessionEventsApp"]
