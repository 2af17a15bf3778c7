"""The help screen's text: every key, and every word or abbreviation the screens show; and the
command palette's share of Textual's own commands."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from specwatch.core.gpu import REASONS

if TYPE_CHECKING:
    from textual.app import SystemCommand

Rows = tuple[tuple[str, str], ...]

KEYS: Rows = (
    ("p", "pause / resume drawing (sampling continues)"),
    ("t", "next theme"),
    ("i", "next sampling interval (GPU and /metrics)"),
    ("w", "next graph window: 1m, 5m, 15m, 1h"),
    ("b", "benchmark with the current settings (again: stop it)"),
    ("o", "the last benchmark's whole result (a finished one is only noted on the screen)"),
    ("P", "profile the server's steps with its own profiler: where the verify step's time goes"),
    ("r", "mark the reference: the live verdict judges against the last 30 s from now on"),
    ("m", "metric sources: where each number comes from, and the formulas"),
    ("a", "draft advisor: which draft length pays at which batch, with intervals"),
    ("z", "reset the session figures (goodput, busy/idle, requests): count from now"),
    ("s", "save an SVG screenshot (~/.local/share/specwatch/screenshots, or --screenshot-dir)"),
    ("? / F1", "this help"),
    ("ctrl+p", "command palette (compare snapshots, next theme…)"),
    ("q", "quit"),
)

FLEET_KEYS: Rows = (
    ("↑ ↓ / k j", "fleet screen (several URLs): move between servers"),
    ("enter", "open the chosen server's own screen; esc there goes back to the fleet"),
    ("r", "fleet screen: refresh now (the r key marks the reference elsewhere)"),
    ("STALE", "fleet status line: the last reading is older than three refreshes"),
    ("accept, step ms", "fleet table: accept length and verify-step latency, last window"),
    ("run/wait", "fleet table: requests running / waiting"),
    ("SM clk / hot", "fleet table: the node's slowest SM clock, % of max / its hottest GPU"),
    ("GPUs", "the node's GPUs and how they were matched to the server (pair, pod, host)"),
    ("(gone)", "a server missing from the latest reading: its last figures, dimmed"),
)

REPLAY_KEYS: Rows = (
    ("space", "replay: play / pause"),
    ("← →", "replay: one step back / forward (pauses)"),
    ("[ ] / { }", "replay: 1 minute / 10 minutes back or forward"),
    ("+ / -", "replay: faster / slower (×1 to ×60)"),
    ("g", "replay: jump to a time (ISO 8601, or -10m before the end)"),
)

VERDICT: Rows = (
    ("verdict", "top line: now vs the reference, in compare's words (r marks a new reference)"),
    ("vs", "the reference: steady after warmup, the moment r was pressed, or --reference FILE"),
    ("slowest GPU", "its SM clock against its maximum, and the clock-event reason if any"),
    ("running", "requests running now vs at the reference (load changed: not the code)"),
)

GPU_WORDS: Rows = (
    ("SM MHz", "the GPU's SM (compute) clock now"),
    ("vs max", "SM clock below its maximum: −7% is 7% slower; highlighted with no reason set"),
    ("memclk / HBM", "memory clock, MHz / HBM (memory) temperature, °C"),
    ("power W", "power drawn / the power limit, watts"),
    ("P", "performance state: P0 is full speed, P8 idle"),
    ("PCIe", "link generation x lanes (5x16); 5x16! is below its maximum under load"),
    ("util / mem GiB", "GPU busy time, % / memory used of total"),
    ("DRAM/TC", "DRAM activity / tensor-core activity, % (dcgm-exporter profiling fields, GPM)"),
    ("SM 5m", "each GPU's SM clock over the graph's window (5m, 1h…)"),
    ("◂", "the straggler: lowest SM clock (then hottest) sets a TP step's pace"),
    ("summary", "short terminals: slowest GPU, hottest GPU, and min–max over all GPUs"),
)

CLOCK_EVENTS: Rows = tuple(
    (r.short, r.meaning + ("" if r.harmful or "harmless" in r.meaning else " (harmless)"))
    for r in REASONS
)

GRAPH_MARKS: Rows = (
    ("╌ loading #N", "server not ready yet: attempt N, seconds waited (short: L#N, L)"),
    ("┄ down #N", "server refused or unreachable for 5 s or more: attempt N (short: D#N, D)"),
    ("· warmup", "from ready until two windows agree within 15% (short: W)"),
    ("━ B1…", "benchmark runs started with b"),
    ("┅ profile", "the server's profiler armed with P, until the profile is read"),
    ("R / ✕", "server restarted (counters went back) / connection lost"),
    ("clk% / hot°C", "mean SM clock as % of max / hottest GPU, on the token-rate graph"),
)

PANE_WORDS: Rows = (
    ("accept len", "tokens a verify step yields: accepted draft tokens + 1"),
    ("acceptance", "share of draft tokens accepted; per pos: by draft position"),
    ("life", "since the server started (the other figures are the last window)"),
    ("held 12s", "not updated in the last window: the last reading, dimmed, with its age"),
    ("step / tok/step", "verify-step latency / tokens each step yields"),
    ("p50≈", "percentile from the server's histogram (approximate)"),
    ("effective", "verify-step latency / accept length: ms per generated token"),
    ("plain", "ms per token without speculation (--baseline or --baseline-itl)"),
    ("break-even", "accept length at which speculation starts to pay"),
    ("running/waiting", "requests being decoded / queued; max: the most over the graph's window"),
    ("max ctx", "largest request since start, prompt + generated tokens (≤: a histogram bound)"),
    ("kv / prefix hit", "KV-cache use / prefix-cache hit rate"),
    (
        "goodput",
        "share of requests within --slo-ttft / --slo-tpot since start or z (97–99%: "
        "the SLO falls inside a histogram bucket)",
    ),
    (
        "session",
        "since start or z: busy/idle time, requests finished, tokens per request, tok/s while busy",
    ),
    ("prompt / gen", "prompt (prefill) and generated tokens per second; req/s: finished requests"),
    ("TTFT / TPOT", "time to first token / time per output token"),
    ("e2e", "whole request, end to end"),
    ("40–60 ms", "the histogram bucket a percentile falls in (≤ 10 ms: the first one)"),
    ("cpu / nvml", "status line: specwatch's own CPU use (not the server's) / one GPU read"),
    ("every 1s", "status line: the sampling interval (i changes it)"),
    (
        "scrapes up to 9s apart",
        "status line: /metrics read late in the last minute: short of CPU, or a slow server",
    ),
)

SECTIONS: tuple[tuple[str, str, Rows], ...] = (
    ("Keys", "", KEYS),
    ("Verdict line", "", VERDICT),
    ("GPU table", "", GPU_WORDS),
    ("Clock events", "why the SM clock is below max", CLOCK_EVENTS),
    ("Graph marks", "", GRAPH_MARKS),
    ("Panes", "speculation, verify latency, server load, status", PANE_WORDS),
    ("Fleet screen", "specwatch URL URL…", FLEET_KEYS),
    ("Replay", "specwatch replay FILE", REPLAY_KEYS),
)


FLEET_SECTIONS: tuple[tuple[str, str, Rows], ...] = (
    (
        "Fleet screen",
        "specwatch URL URL… or --prometheus URL",
        (
            *FLEET_KEYS,
            ("t", "next theme"),
            ("? / F1", "this help"),
            ("ctrl+p", "command palette"),
            ("q", "quit"),
        ),
    ),
    ("Clock events", "why the SM clock is below max", CLOCK_EVENTS),
)
"""The fleet screen's help: its own keys and words, not the single-server screen's."""


def help_renderable(sections: tuple[tuple[str, str, Rows], ...] = SECTIONS) -> Table:
    """The help text as a Rich table: keys, then what each word on the screens means."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column()
    for i, (title, note, rows) in enumerate(sections):
        if i:
            grid.add_row("", "")
        grid.add_row(Text(title, style="bold underline"), note)
        for key, what in rows:
            grid.add_row(key, what)
    return grid


TEXTUAL_COMMANDS_LEFT_OUT = (
    "Screenshot",
    "Theme",
    "Change theme",
    "Keys",
    "Quit",
    "Maximize",
    "Minimize",
)
"""Textual's screenshot (specwatch's says where it goes), its theme picker (twenty built-in
themes mixed with specwatch's; the t key and "Next theme" cycle specwatch's), its key panel
(specwatch's Help explains every key and word), its Quit beside specwatch's, and maximising
the focused widget (no pane takes focus)."""


def textual_commands(commands: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
    """Textual's own palette commands less those specwatch replaces."""
    return (c for c in commands if c.title not in TEXTUAL_COMMANDS_LEFT_OUT)


def palette_commands(app: Any) -> Iterable[SystemCommand]:
    """The app's own commands in the command palette, before Textual's (``app``: the
    :class:`~specwatch.ui.app.SpecwatchApp`, typed loosely as the app imports this room)."""
    from textual.app import SystemCommand

    from specwatch.ui.settings import default_screenshot_dir

    yield SystemCommand(
        "Compare snapshots…",
        f"Code or GPU? Compare the two latest snapshots in {app.settings.snapshot_dir}",
        app.action_compare,
    )
    yield SystemCommand("Benchmark", "Start (or stop) a benchmark", app.action_benchmark)
    yield SystemCommand(
        "Benchmark result", "The last benchmark's runs and results", app.action_bench_report
    )
    yield SystemCommand(
        "Profile the server",
        "Where the verify step's time goes: the server's own profiler, asked first",
        app.action_profile,
    )
    yield SystemCommand("Metric sources", "Where each number comes from", app.action_sources)
    yield SystemCommand(
        "Draft advisor", "Which draft length pays, at which batch size", app.action_advice
    )
    yield SystemCommand(
        "Resume" if app.model.paused else "Pause",
        "Pause or resume drawing (sampling continues)",
        app.action_toggle_pause,
    )
    yield SystemCommand(
        "Mark reference",
        "Judge the live verdict against the last 30 s",
        app.action_mark_reference,
    )
    yield SystemCommand("Next theme", "Switch to the next specwatch theme", app.action_cycle_theme)
    yield SystemCommand("Help", "Keys and what each word on the screen means", app.action_help)
    where = app.settings.screenshot_dir or default_screenshot_dir()
    yield SystemCommand("Screenshot", f"Save an SVG in {where}", app.action_save_svg)
    yield SystemCommand("Quit", "Leave specwatch", app.action_quit)


__all__ = [
    "CLOCK_EVENTS",
    "FLEET_KEYS",
    "FLEET_SECTIONS",
    "KEYS",
    "REPLAY_KEYS",
    "SECTIONS",
    "TEXTUAL_COMMANDS_LEFT_OUT",
    "help_renderable",
    "palette_commands",
    "textual_commands",
]
