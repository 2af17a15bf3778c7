"""The fleet screen: a row per server with its node's GPUs, exact totals, and a drill-in.

The app owns no poller, thread or task: the headless
:class:`~specwatch.session.fleet.FleetSession` refreshes the fleet and :class:`FleetRelay`
posts its events as messages. Enter ends the app with the chosen server
(:class:`FleetChoice`); the caller (:mod:`specwatch.ui.fleet_run`) opens the single-server
screen for it and brings the fleet back when that one is left with Escape.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from specwatch.core.fleet import FleetRow, fleet_rows, held_gpus, with_gone
from specwatch.core.gpu import GpuSample
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import MetricsWindow
from specwatch.session.fleet import FleetError, FleetEvent, FleetRefreshed, FleetSession
from specwatch.sources.prometheus.fleet import FleetReading
from specwatch.ui.fleet_pane import FleetPane
from specwatch.ui.hangup import TerminalWatch
from specwatch.ui.help_text import textual_commands
from specwatch.ui.modals import HelpScreen
from specwatch.ui.themes import cycle_order, load_themes

HISTORY_WINDOWS = 60
"""Windows kept per server for a drill-down's verdict (two minutes at the 2 s refresh)."""
STALE_AFTER = 3.0
"""A reading older than this many refresh intervals (and 5 s) is marked stale."""
MIN_STALE_S = 5.0


@dataclass(frozen=True, slots=True)
class FleetChoice:
    """The server Enter chose, and what its single-server screen needs."""

    instance: str
    dialect: str
    model: str | None
    gpus: tuple[str, ...]
    """Its node's GPU keys."""
    exporters: tuple[str, ...]
    """The exporter targets (``host:port``) those GPUs were read from."""
    history: tuple[MetricsWindow, ...] = ()
    """Its windows the fleet screen read, oldest first, timed in seconds before the newest
    (``t <= 0``): the drill-down's verdict starts from them instead of from scratch."""


class FleetUpdated(Message):
    """A fleet reading arrived."""

    def __init__(self, reading: FleetReading) -> None:
        super().__init__()
        self.reading = reading

    def can_replace(self, message: Message) -> bool:
        """A newer reading supersedes one still queued."""
        return isinstance(message, FleetUpdated)


class FleetFailed(Message):
    """The history or a refresh failed (one line)."""

    def __init__(self, where: str, text: str) -> None:
        super().__init__()
        self.where = where
        self.text = text


class FleetRelay:
    """A fleet-session subscriber that posts each event to the app as a message."""

    def __init__(self, post: Callable[[Message], object]) -> None:
        self.post = post

    def __call__(self, event: FleetEvent) -> None:
        """Post ``event`` as a message (history is not drawn on this screen)."""
        if isinstance(event, FleetRefreshed):
            self.post(FleetUpdated(event.reading))
        elif isinstance(event, FleetError) and event.where == "history":
            self.post(FleetFailed(event.where, event.message))


def _seconds(s: float) -> str:
    return f"{s:.0f}s" if s >= 10 else f"{s:.1f}".rstrip("0").rstrip(".") + "s"


def status_text(reading: FleetReading | None, where: str, age_s: float | None, stale: bool) -> str:
    """The status line: where the fleet comes from, its size, and how fresh the reading is."""
    if reading is None:
        return f"fleet: {sanitize_line(where)} · waiting for the first reading…"
    parts = [
        f"fleet: {sanitize_line(where)}",
        f"{len(reading.servers)} servers",
        f"{len(reading.gpus)} GPUs",
        f"rate window {_seconds(reading.window_s)}",
        f"{reading.queries} queries/refresh",
    ]
    if age_s is not None:
        parts.append(f"STALE: last reading {age_s:.0f}s ago" if stale else f"{age_s:.0f}s ago")
    return " · ".join(parts)


def errors_text(reading: FleetReading | None, failures: list[str]) -> str:
    """The errors line (empty when all is well)."""
    errors = list(failures) + (list(reading.errors) if reading is not None else [])
    if reading is not None and reading.skipped:
        errors.append(reading.skipped)
    return " · ".join(sanitize_line(e, 200) for e in errors)


class FleetApp(App[FleetChoice | int]):
    """Every server of a fleet on one screen; Enter drills into one."""

    TITLE = "specwatch fleet"
    DEFAULT_CSS = """
    #fleet-status { dock: top; height: 1; background: $panel; padding: 0 1; }
    #fleet-status.-stale { color: $warning; text-style: bold; }
    #fleet-errors { height: auto; color: $error; padding: 0 1; }
    #fleet-errors.-none { display: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("enter", "drill", "Open"),
        Binding("r", "refresh_now", "Refresh"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        session: FleetSession | None = None,
        where: str = "",
        theme: str = "dark",
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = 2.0,
        selected: str | None = None,
        theme_dirs: list[Path] | None = None,
        watch_terminal: bool = True,
        history: dict[str, deque[MetricsWindow]] | None = None,
    ) -> None:
        super().__init__()
        loaded = load_themes(theme_dirs)
        for t in loaded.themes.values():
            self.register_theme(t)
        self.theme_names = cycle_order(loaded.themes)
        if theme in self.available_themes:
            self.theme = theme
        self.session = session
        """The fleet session whose events this app shows (``None``: messages posted by hand)."""
        self.where = where
        self.watch_terminal = watch_terminal
        self.clock = clock
        self.interval_s = session.interval_s if session is not None else interval_s
        self.reading: FleetReading | None = None
        self.rows: list[FleetRow] = []
        self.failures: list[str] = []
        self.selected_instance = selected
        self._last_busy: dict[str, GpuSample] = {}
        self.history = history if history is not None else {}
        """Each server's recent windows, newest last (kept by the caller across drill-downs)."""
        self.pane = FleetPane(id="fleet")
        self.status = Static(id="fleet-status", markup=False)
        self.errors = Static(id="fleet-errors", markup=False, classes="-none")
        self._unsubscribe: Callable[[], None] | None = None
        self.terminal_watch: TerminalWatch | None = None
        """Its watch on SIGTERM, SIGHUP and the terminal, once started."""

    def compose(self) -> ComposeResult:
        """Status line, the table, the errors line, footer."""
        yield self.status
        yield self.pane
        yield self.errors
        yield Footer(compact=True)

    def on_mount(self) -> None:
        """Show the session's latest reading at once, then follow its events."""
        session = self.session
        if session is not None:
            if session.latest is not None:
                self.show(session.latest)
            self._unsubscribe = session.subscribe(FleetRelay(self.post_message))
            session.start()
        self.set_interval(1.0, self.update_status)
        self.update_status()
        if self.watch_terminal and not self.is_headless:
            # SIGTERM and SIGHUP leave as q does, the terminal restored; an orphaned monitor
            # after an SSH drop must not live on (the single-server screen's path).
            self.terminal_watch = TerminalWatch(self, self.exit)
            self.terminal_watch.start()

    def on_unmount(self) -> None:
        """Stop listening (the session belongs to the caller and keeps running)."""
        if self._unsubscribe is not None:
            self._unsubscribe()

    # --- data -----------------------------------------------------------------------------------

    def show(self, reading: FleetReading) -> None:
        """Draw ``reading``: servers in instance order, ones gone since marked stale."""
        self.reading = reading
        for s in reading.servers:
            kept = self.history.setdefault(s.instance, deque(maxlen=HISTORY_WINDOWS))
            if s.window.dt > 0 and (not kept or s.window.t > kept[-1].t):
                kept.append(s.window)
        servers = sorted(reading.servers, key=lambda s: s.instance)
        gpus = held_gpus(reading.gpus, self._last_busy)
        self.rows = with_gone(fleet_rows(servers, gpus, reading.joins), self.rows)
        self.pane.rows = tuple(self.rows)
        self.pane.totals = reading.totals
        self.pane.gpus = len(reading.gpus)
        self._place_cursor()
        self.update_status()

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        """A refresh arrived."""
        self.show(message.reading)

    def on_fleet_failed(self, message: FleetFailed) -> None:
        """The history could not be read (the table is unaffected)."""
        self.failures = [f"{message.where}: {message.text}"]
        self.update_status()

    def age_s(self) -> float | None:
        """Seconds since the latest reading (``None`` before the first)."""
        return None if self.reading is None else max(0.0, self.clock() - self.reading.t)

    def is_stale(self) -> bool:
        """The latest reading is older than a few refresh intervals."""
        age = self.age_s()
        return age is not None and age > max(MIN_STALE_S, STALE_AFTER * self.interval_s)

    def update_status(self) -> None:
        """Redraw the status and errors lines."""
        stale = self.is_stale()
        self.status.update(status_text(self.reading, self.where, self.age_s(), stale))
        self.status.set_class(stale, "-stale")
        text = errors_text(self.reading, self.failures)
        self.errors.update(text)
        self.errors.set_class(not text, "-none")

    def _place_cursor(self) -> None:
        names = [r.server.instance for r in self.rows]
        if self.selected_instance in names:
            self.pane.selected = names.index(self.selected_instance)
        elif names:
            self.pane.selected = min(self.pane.selected, len(names) - 1)
            self.selected_instance = names[self.pane.selected]

    # --- actions --------------------------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        """Move the cursor up or down a row."""
        if not self.rows:
            return
        i = max(0, min(len(self.rows) - 1, self.pane.selected + step))
        self.pane.selected = i
        self.selected_instance = self.rows[i].server.instance

    def selected_row(self) -> FleetRow | None:
        """The row under the cursor."""
        i = self.pane.selected
        return self.rows[i] if 0 <= i < len(self.rows) else None

    def action_drill(self) -> None:
        """Leave with the selected server, for its single-server screen."""
        row = self.selected_row()
        if row is None:
            self.notify("no server yet", severity="warning", timeout=2)
            return
        gpus = {g.key: g for g in self.reading.gpus} if self.reading is not None else {}
        exporters = tuple(dict.fromkeys(gpus[k].instance for k in row.gpus if k in gpus))
        s = row.server
        kept = self.history.get(s.instance, ())
        newest = kept[-1].t if kept else 0.0
        history = tuple(dataclasses.replace(w, t=w.t - newest) for w in kept)
        self.exit(FleetChoice(s.instance, s.dialect.value, s.model, row.gpus, exporters, history))

    def action_refresh_now(self) -> None:
        """Refresh without waiting for the interval."""
        if self.session is not None:
            self.session.refresh_now()

    def action_cycle_theme(self) -> None:
        """Switch to the next specwatch theme."""
        names = self.theme_names
        if names:
            i = names.index(self.theme) + 1 if self.theme in names else 0
            self.theme = names[i % len(names)]

    def action_help(self) -> None:
        """Keys (the fleet screen's among them) and what each word means."""
        if not isinstance(self.screen, HelpScreen):
            from specwatch.ui.help_text import FLEET_SECTIONS

            self.push_screen(HelpScreen(FLEET_SECTIONS))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        """The command palette: the fleet's commands, then Textual's (each once)."""
        yield SystemCommand("Refresh", "Read the fleet again now", self.action_refresh_now)
        yield SystemCommand(
            "Next theme", "Switch to the next specwatch theme", self.action_cycle_theme
        )
        yield SystemCommand("Help", "Keys and what each word on the screen means", self.action_help)
        yield SystemCommand("Quit", "Leave specwatch", self.action_quit)
        yield from textual_commands(super().get_system_commands(screen))


__all__ = [
    "FleetApp",
    "FleetChoice",
    "FleetFailed",
    "FleetRelay",
    "FleetUpdated",
    "errors_text",
    "status_text",
]
