"""The specwatch Textual app: GPUs, token rate, speculation and verify latency on one screen.

The app renders what its headless :class:`~specwatch.session.LiveSession` emits. The session
calls :meth:`SpecwatchApp.receive` from its threads and tasks; every event waits in an
:class:`~specwatch.ui.model.EventInbox`, in the order it happened. GPU ticks, ``/metrics``
windows and the verdicts they lead to (a few a second, every second) wait for the next redraw,
which is when they would first show: posting each as a message would wake the event loop and
run Textual's dispatch for every one. Any other event posts one :class:`Drain`, and the app
empties the inbox at once.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from specwatch.core.sanitize import sanitize_line
from specwatch.ui import hangup
from specwatch.ui.model import WINDOWS, EventInbox, MonitorModel
from specwatch.ui.panes.base import ModelPane
from specwatch.ui.panes.bench_bar import BenchBar
from specwatch.ui.panes.gpus import GpusPane
from specwatch.ui.panes.load import LoadPane
from specwatch.ui.panes.speculation import SpeculationPane
from specwatch.ui.panes.status import StatusLine
from specwatch.ui.panes.token_rate import TokenRatePane
from specwatch.ui.panes.verdict import VerdictLine
from specwatch.ui.panes.verify import VerifyPane
from specwatch.ui.settings import AppSettings, default_screenshot_dir
from specwatch.ui.themes import ThemeLoad, cycle_order, load_themes

if TYPE_CHECKING:
    # Off the path to the first frame: the session, the modals and the palette are imported
    # when first used.
    from specwatch.session import LiveSession
    from specwatch.session.bench_job import BenchJob
    from specwatch.session.events import BenchFinished, SessionEvent

INTERVALS = (0.5, 1.0, 2.0, 5.0)
"""Sampling intervals the ``i`` key cycles through, seconds."""
MIN_REDRAW_S = 0.5
CPU_EVERY_S = 5.0
TALL_ENOUGH_FOR_STRIPS = 22
WIDE_ENOUGH_FOR_PALETTE = 72
"""Below this width the footer drops its command-palette hint (Ctrl+P still works)."""
WIDE_ENOUGH_FOR_MORE_KEYS = 100
"""From this width the footer also names :data:`MORE_KEYS` (help lists them at any width)."""
WIDE_ENOUGH_FOR_MORE_KEYS_AND_PALETTE = 112
"""With :data:`MORE_KEYS` listed, the palette hint returns from this width."""
MORE_KEYS = (
    ("r", "mark_reference", "Ref"),
    ("a", "advice", "Advice"),
    ("m", "sources", "Sources"),
    ("s", "save_svg", "Shot"),
    ("o", "bench_report", "Result"),
)
"""``(key, action, footer words)`` of the keys a newcomer needs beyond the always-listed ones."""
LEFT_WAIT_S = 2.0
"""How long leaving waits for a stopped benchmark's snapshot (under SIGHUP's 2.5 s backstop)."""


class Drain(Message):
    """Apply the events waiting in the app's :class:`EventInbox` now (one is worth showing)."""

    def can_replace(self, message: Message) -> bool:
        """One drain still queued empties the inbox for every event behind it."""
        return isinstance(message, Drain)


class SpecwatchApp(App[int]):
    """Live GPU state, token rate and speculative decoding for one inference server.

    Args:
        settings: What the command line chose.
        session: The live session to render (``None``: events are given to :meth:`receive` by
            hand, or it is built by ``session_factory``).
        model: The model the panes draw (``None``: a new one).
        cpu_clock: The clock the monitor's own CPU share is measured with.
        wall_clock: The wall clock beside it.
        session_factory: Builds the session after the first frame, when ``session`` is
            ``None`` (the live monitor: the first frame does not wait for the session's
            imports).
        themes: The themes already loaded from the default folders (``None``: loaded here from
            ``settings.theme_dirs``).
    """

    session: LiveSession | None = None
    """The live session whose events this app renders (``None``: events given by hand); its
    benchmark is stopped (and finished runs saved) on the way out."""
    terminal_watch: hangup.TerminalWatch | None = None
    """Its watch on SIGHUP, SIGTERM and the terminal, once started (``None`` in tests)."""
    message_counts: Counter[str]
    """How many events of each kind were applied (for tests and the overhead script)."""
    sample_errors: int
    server_shown = 0
    """The endpoint the monitor shows; other endpoints' events are left to other subscribers."""
    _session_stopped = False
    _bench_left: BenchJob | None = None
    leaving: str = "on quitting"
    """How the app was left, for the benchmark line (a signal's name overrides it)."""
    bench_report: tuple[str, str] | None = None
    profile_report: tuple[str, str] | None = None
    """The last benchmark's result, ``(title, text)``, for ``o``."""

    CSS_PATH = "app.tcss"
    TITLE = "specwatch"

    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012 (a list in Textual's own declaration)
        (0, "-narrow"),
        (76, "-normal"),
        (120, "-wide"),
    ]
    VERTICAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-short"),
        (TALL_ENOUGH_FOR_STRIPS, "-tall"),
        (36, "-roomy"),
    ]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_pause", "Pause"),
        Binding("p", "resume", "Resume"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("i", "cycle_interval", "Interval"),
        Binding("w", "cycle_window", "Window"),
        Binding("b", "benchmark", "Bench"),
        # The footer lists these from WIDE_ENOUGH_FOR_MORE_KEYS columns (through
        # action_listed); narrower, the unlisted twins below take the keys, so that help and
        # quit still fit in the footer of a 60-column terminal.
        *(Binding(key, f"listed({action!r})", words) for key, action, words in MORE_KEYS),
        *(Binding(key, action, words, show=False) for key, action, words in MORE_KEYS),
        Binding("P", "profile", "Profile", show=False),
        Binding("z", "reset_session", "Reset", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        settings: AppSettings | None = None,
        session: LiveSession | None = None,
        model: MonitorModel | None = None,
        cpu_clock: Callable[[], float] = time.process_time,
        wall_clock: Callable[[], float] = time.monotonic,
        session_factory: Callable[[], LiveSession] | None = None,
        themes: ThemeLoad | None = None,
    ) -> None:
        self.settings = settings or AppSettings()
        loaded = themes if themes is not None else load_themes(self.settings.theme_dirs)
        super().__init__()
        self.theme_errors = loaded.errors
        for theme in loaded.themes.values():
            self.register_theme(theme)
        self.theme_names = cycle_order(loaded.themes)
        wanted = self.settings.theme
        if wanted in self.available_themes:
            self.theme = wanted
        elif self.theme_names:
            self.theme_errors.append(f"theme {wanted!r} not found; using {self.theme_names[0]!r}")
            self.theme = self.theme_names[0]
        self.model = model or MonitorModel(self.settings.baseline_ms, self.settings.baseline_source)
        self.model.interval_s = self.settings.interval_s
        self.model.metrics_interval_s = self.settings.metrics_interval_s
        self.model.slo = self.settings.slo
        self.model.show_overhead = self.settings.show_overhead
        self.session = session
        if session is not None:
            self.model.gpu_opening = session.gpus.opening
        self._session_factory = session_factory
        self.message_counts: Counter[str] = Counter()
        self.sample_errors = 0
        self._cpu_clock = cpu_clock
        self._wall_clock = wall_clock
        self._cpu_last: tuple[float, float] | None = None
        self._panes: list[ModelPane] = []
        self._inbox = EventInbox()
        """Session events waiting for the next redraw (see the module's docstring)."""
        # Held directly: app-level keys and resizes also arrive while a modal is on top, when
        # a query would search the modal instead of the main screen.
        self.status_line = StatusLine(self.model, id="status")
        self.rate_pane = TokenRatePane(self.model, id="rate")
        self.rate_pane.window = self.settings.window
        self.bench_bar = BenchBar(self.model, id="bench")

    # --- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Status line, live verdict, GPUs, token rate, the lower panes side by side, footer."""
        yield self.status_line
        yield VerdictLine(self.model, id="verdict")
        yield GpusPane(self.model, id="gpus")
        yield self.rate_pane
        with Horizontal(id="lower"):
            yield SpeculationPane(self.model, id="spec")
            yield VerifyPane(self.model, id="verify")
            yield LoadPane(self.model, id="load")
        yield self.bench_bar
        # Compact, so every key (quit and help included) stays visible at 80 columns.
        yield Footer(compact=True)

    def on_mount(self) -> None:
        """Start the timers and the sources; report themes that failed to load."""
        self._panes = list(self.screen.query(ModelPane))
        self._redraw_timer = self.set_interval(self._redraw_period(), self._redraw_due)
        if self.settings.live_cpu:
            self.set_interval(CPU_EVERY_S, self._measure_cpu)
        for error in self.theme_errors:
            self.notify(
                sanitize_line(error, 300), title="theme skipped", severity="warning", timeout=8
            )
        if self.settings.watch_terminal and not self.is_headless:
            self._watch_terminal()
        # The first frame first: starting the pollers imports httpx, builds a client and
        # detects the server on this loop, which would hold the screen back by ~0.3 s.
        self.call_after_refresh(self._after_first_frame)
        self.redraw()

    def _after_first_frame(self) -> None:
        factory = self._session_factory
        if self.session is None and factory is not None and not self._session_stopped:
            # Built here rather than before ``run()``: importing the session (pollers, events,
            # the NVML source) would hold the first frame back.
            self.session = factory()
        self.start_session()

    def on_resize(self, event: Resize) -> None:
        """Drop the clock and heat strips on short terminals; redraw everything at the new size."""
        self.rate_pane.strips = event.size.height >= TALL_ENOUGH_FOR_STRIPS
        width = event.size.width
        more = width >= WIDE_ENOUGH_FOR_MORE_KEYS
        palette = WIDE_ENOUGH_FOR_MORE_KEYS_AND_PALETTE if more else WIDE_ENOUGH_FOR_PALETTE
        self.query_one(Footer).show_command_palette = width >= palette
        self.refresh_bindings()
        for pane in self._panes:
            pane.force_sync()

    # --- the session and the terminal -----------------------------------------------------------

    def _watch_terminal(self) -> None:
        self.terminal_watch = hangup.TerminalWatch(
            self, self.exit, self._stop_work, self._finish_work
        )
        self.terminal_watch.start()

    def _stop_work(self) -> None:
        session = self.session
        if session is not None:
            # Kept now: the stopped benchmark may save its runs before the app unmounts.
            if session.bench_running:
                self._bench_left = session.bench
            session.cancel_benchmark()

    def _finish_work(self) -> None:
        session = self.session
        job = session.bench if session is not None else None
        if job is not None:
            job.done.wait(hangup.BACKSTOP_S - 0.5)
        # NVML is shut down if that is quick; the rest (HTTP, an in-process demo) dies with us.
        if session is not None:
            with contextlib.suppress(Exception):
                session.gpus.stop(timeout_s=0.5)

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
            if self.session.bench_running and self._bench_left is None:
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
            case ev.ProfileProgress(t, phase, words):
                name, apply = "profile_progress", lambda: m.profile_event(t, phase, words)
            case ev.ProfileFinished():
                from specwatch.ui.profile_glue import show_finished

                name, apply = "profile_finished", lambda: show_finished(self, event)
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
        from specwatch.ui.bench_glue import finished_notice, result_text
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
        summary = finished_notice(body, event.snapshot_path)
        self.notify(sanitize_line(summary, 300), title="benchmark finished", timeout=12)

    def action_bench_report(self) -> None:
        """Open the last benchmark's whole result."""
        from specwatch.ui.modals import TextModal

        if self.bench_report is None:
            self.notify("no benchmark has finished yet (b starts one)", timeout=3)
            return
        self.push_screen(TextModal(*self.bench_report))

    # --- drawing --------------------------------------------------------------------------------

    def _redraw_period(self) -> float:
        """Every two sampling intervals, between MIN_REDRAW_S and the settings' redraw_s."""
        return max(MIN_REDRAW_S, min(self.settings.redraw_s, 2.0 * self.model.interval_s))

    def _redraw_due(self) -> None:
        """The redraw timer: take in the session's events since the last one, then redraw."""
        self.apply_inbox()
        self.redraw()

    def redraw(self) -> None:
        """Take in the waiting session events, then refresh the panes whose data changed;
        nothing is drawn while paused."""
        self.apply_inbox()
        if self.model.paused:
            return
        for pane in self._panes:
            pane.sync()

    def _measure_cpu(self) -> None:
        cpu, wall = self._cpu_clock(), self._wall_clock()
        if self._cpu_last is not None:
            dcpu, dwall = cpu - self._cpu_last[0], wall - self._cpu_last[1]
            if dwall > 0:
                self.model.set_monitor_cpu(100.0 * dcpu / dwall)
        self._cpu_last = (cpu, wall)

    # --- actions --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers Pause while drawing and Resume while paused (the same key)."""
        if action == "toggle_pause":
            return not self.model.paused
        if action == "resume":
            return self.model.paused
        if action == "listed":
            wide = self.size.width >= WIDE_ENOUGH_FOR_MORE_KEYS
            return wide and self.check_action(str(parameters[0]), ())
        return True

    async def action_listed(self, action: str) -> None:
        """A key the wide footer lists (:data:`MORE_KEYS`): run its own action."""
        await self.run_action(action)

    def action_resume(self) -> None:
        """Resume drawing."""
        if self.model.paused:
            self.action_toggle_pause()

    def action_toggle_pause(self) -> None:
        """Freeze the display (sampling continues, so nothing is lost)."""
        self.model.paused = not self.model.paused
        self.model.status_version += 1
        self.status_line.force_sync()
        self.refresh_bindings()
        if not self.model.paused:
            self.redraw()

    def action_cycle_theme(self) -> None:
        """Switch to the next specwatch theme."""
        names = self.theme_names
        if not names:
            return
        i = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[i % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_cycle_interval(self) -> None:
        """Sample the GPUs and scrape the server at the next interval."""
        now = self.model.interval_s
        later = [v for v in INTERVALS if v > now]
        new = later[0] if later else INTERVALS[0]
        self.model.interval_s = self.model.metrics_interval_s = new
        self.model.status_version += 1
        if self.session is not None:
            self.session.set_interval(new)
        self._redraw_timer.stop()
        self._redraw_timer = self.set_interval(self._redraw_period(), self._redraw_due)
        self.notify(f"sampling every {new:g}s", timeout=2)

    def action_cycle_window(self) -> None:
        """Show the next graph window (1m, 5m, 15m, 1h)."""
        rate = self.rate_pane
        keys = list(WINDOWS)
        rate.window = keys[(keys.index(rate.window) + 1) % len(keys)]

    def action_reset_session(self) -> None:
        """Count the session figures (busy/idle, requests, goodput) from now."""
        self.model.reset_session()
        self.notify("session figures reset: counting from now", timeout=3)
        self.redraw()

    def action_help(self) -> None:
        """Keys and the clock-event legend."""
        from specwatch.ui.modals import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_save_svg(self) -> None:
        """Save an SVG screenshot in the screenshots folder and say where."""
        directory = self.settings.screenshot_dir or default_screenshot_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(directory))
        except OSError as e:
            self.notify(sanitize_line(f"cannot save screenshot: {e}", 300), severity="error")
            return
        self.notify(f"saved {path}", title="screenshot")

    def action_benchmark(self) -> None:
        """Start a benchmark with the current settings, or stop the one running."""
        session = self.session
        if session is not None and session.bench_running:
            session.cancel_benchmark()
            self.notify("stopping the benchmark after the current run…", timeout=3)
            return
        server = self.model.server
        if server is not None and server.keyless:  # its streams would each be refused
            self.notify(sanitize_line(f"cannot benchmark: {server.keyless}", 300), severity="error")
            return
        job = None
        if session is not None:
            job = session.start_benchmark(
                self.settings.snapshot_dir,
                self.settings.bench_config,  # type: ignore[arg-type]
                command=["specwatch", "(TUI benchmark)"],
            )
        if job is None:
            self.notify("no server connected: nothing to benchmark", severity="warning")
            return
        self.bench_bar.add_class("-active")

    def action_profile(self) -> None:
        """Ask, then profile the server's steps with its own profiler (again: stop it)."""
        from specwatch.ui.profile_glue import ask_profile

        ask_profile(self)

    def action_compare(self) -> None:
        """Compare the two latest snapshots and show the verdict."""
        from specwatch.ui.bench_glue import compare_latest
        from specwatch.ui.modals import TextModal

        title, body = compare_latest(self.settings.snapshot_dir)
        self.push_screen(TextModal(title, body))

    def action_sources(self) -> None:
        """Where every number in the speculation and verify panes comes from."""
        from specwatch.ui.modals import TextModal
        from specwatch.ui.source_words import sources_text

        body = sources_text(
            self.model.window or self.model.last_scrape, self.model.inventory, self.model.server
        )
        self.push_screen(TextModal("metric sources", body))

    def action_advice(self) -> None:
        """Which draft length pays at which batch, from the session's recent windows."""
        from specwatch.ui.advice_view import open_advice

        open_advice(self, self.model, self.settings.sweep)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        """The command palette: the app's own commands, then Textual's (each once)."""
        from specwatch.ui.help_text import palette_commands, textual_commands

        yield from palette_commands(self)
        yield from textual_commands(super().get_system_commands(screen))


__all__ = ["INTERVALS", "Drain", "SpecwatchApp"]
