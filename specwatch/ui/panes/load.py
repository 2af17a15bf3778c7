"""The server-load pane, as vllmstat users expect it: queue, KV cache, throughput, latency buckets.

Percentiles come from the servers' histograms, so they are shown as the bucket they fall in
(``20–40 ms``, ``≤ 40 ms``, ``> 8 s``), never as an interpolated point that can contradict the
mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.core.config_health import config_health, firing, kv_words
from specwatch.core.session_figures import span_words
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import TextPane

if TYPE_CHECKING:
    from specwatch.core.server import LatencyBucket

LATENCY_ROWS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "e2e"))
HELD_AFTER_S = 3.0
"""Buckets older than this say their age: the windows since had no request start or end."""


def _seconds(x: float, unit: str) -> str:
    v = x * 1000.0 if unit == "ms" else x
    return f"{v:g}"


def bucket_words(b: LatencyBucket) -> str:
    """``"20–40 ms"``, ``"≤ 40 ms"`` or ``"> 8 s"`` (the bucket, never a point)."""
    top = b.low if math.isinf(b.high) else b.high
    unit = "ms" if top < 1.0 else "s"
    if math.isinf(b.high):
        return f"> {_seconds(b.low, unit)} {unit}"
    if b.low <= 0.0:
        return f"≤ {_seconds(b.high, unit)} {unit}"
    return f"{_seconds(b.low, unit)}–{_seconds(b.high, unit)} {unit}"


def _tokens(x: float) -> str:
    # Buckets are often powers of two (1024, 2048): "1.024k" would read as a rounding.
    return f"{x / 1000:.0f}k" if x >= 100_000 else f"{x:.0f}"


def token_bucket_words(b: LatencyBucket) -> str:
    """``"256–512"``, ``"≤ 512"`` or ``"> 8k"`` tokens (the bucket, never a point)."""
    if math.isinf(b.high):
        return f"> {_tokens(b.low)}"
    if b.low <= 0.0:
        return f"≤ {_tokens(b.high)}"
    return f"{_tokens(b.low)}–{_tokens(b.high)}"


def _num(v: float | None, fmt: str, scale: float = 1.0, suffix: str = "") -> str:
    return "–" if v is None else f"{format(v * scale, fmt)}{suffix}"


Piece = tuple[int, list[tuple[str, str]]]
"""``(priority, [(text, tone), ...])``: one figure with its label; lower priority is kept longer."""


def _fit_line(pieces: list[Piece], width: int) -> list[Piece]:
    """``pieces`` in order, the least important dropped whole until the line fits ``width``.

    A figure is never cut inside (``p99 6…`` read as 6 ms); the first piece always stays.
    """
    kept = list(pieces)
    while len(kept) > 1 and sum(len(t) for _, runs in kept for t, _ in runs) > width:
        worst = max(range(1, len(kept)), key=lambda i: (kept[i][0], i))
        kept.pop(worst)
    return kept


def load_lines(model: MonitorModel) -> list[list[Piece]] | None:
    """The pane's lines as prioritised pieces (``None`` before the first scrape).

    Gauges (running, waiting, KV) are the latest; rates that jump with what a one-second window
    happened to hold (prompt tok/s, req/s) are a 10 s mean; percentile buckets are the latest a
    window had, held with their age (``12s ago``) for a minute.
    """
    w = model.window or model.last_scrape
    if w is None:
        return None
    now = model.now

    def steady(name: str) -> float | None:
        return model.steady[name].at(now).value

    def pair(priority: int, label: str, value: str) -> Piece:
        return (priority, [(f"{label} ", "label"), (f"{value}  ", "value")])

    first: list[Piece] = [(0, [("running ", "label"), (_num(w.requests_running, ".0f"), "value")])]
    first += _peak(model.peak(model.running))
    first.append((0, [("  waiting ", "label"), (_num(w.requests_waiting, ".0f"), "value")]))
    first += _peak(model.peak(model.waiting))
    first.append((1, [("  kv ", "label"), (_num(w.kv_cache_usage, ".0f", 100.0, "%"), "value")]))
    held = kv_words(w)
    if held is not None:
        first.append((2, [(f" {held}", "dim")]))
    if w.prefix_cache_hit_rate is not None:
        hit = _num(w.prefix_cache_hit_rate, ".0f", 100.0, "%")
        first.append((2, [("  prefix hit ", "label"), (hit, "value")]))
    if w.preemptions_total is not None:
        first.append((4, [("  preempted ", "label"), (_num(w.preemptions_total, ".0f"), "value")]))
    lines = [
        first,
        [
            pair(0, "prompt tok/s", _num(steady("prompt_tok_s"), ".0f")),
            pair(0, "gen", _num(w.gen_tok_s, ".0f")),
            pair(1, "req/s", _num(steady("requests_per_s"), ".1f")),
            *_finished(w.finished_by_reason),
        ],
    ]
    # the benchmark's own requests are no sign of the server's traffic: read since start
    judged = replace(w, finished_in_window={}) if model.bench_overlaps(w) else w
    found = firing(config_health(model.server, judged))
    if found:  # above the latency rows: a short pane keeps its first lines
        lines.append(
            [
                (i, [(f"{f.text()[0]} ", "warn"), (f"{f.short}  ", "value")])
                for i, f in enumerate(found)
            ]
        )
    for key, label in LATENCY_ROWS:
        bucket_held = model.latency.at(now, key)
        if bucket_held is None or not bucket_held[0]:
            continue
        buckets, age = bucket_held
        row: list[Piece] = [(0, [(f"{label:<5}", "label")])]
        for i, b in enumerate(buckets):
            row.append((i, [(f" p{b.q * 100:g} ", "dim"), (bucket_words(b), "value")]))
        if age >= HELD_AFTER_S:
            row.append((3, [(f"  {age:.0f}s ago", "dim")]))
        lines.append(row)
    lines.extend(_session_lines(model))
    lines.extend(_where_and_shape(model, now, w.largest_context))
    return lines


def _session_lines(model: MonitorModel) -> list[list[Piece]]:
    """Goodput against the SLO and the session's busy/idle split, requests and tokens, since
    the monitor started or the ``z`` key reset them."""
    summary = model.session_summary()
    lines: list[list[Piece]] = []
    good = summary.goodput
    if good.ttft is not None or good.tpot is not None:
        row: list[Piece] = [(0, [("goodput ", "label")])]
        row += [(i, [(f"{part}  ", "value")]) for i, part in enumerate(good.parts())]
        lines.append(row)
    elapsed = model.now - summary.since
    if elapsed > 0 and summary.busy_s + summary.idle_s > 0:
        head: Piece = (0, [("session ", "label"), (f"{span_words(elapsed)}  ", "dim")])
        parts = summary.parts()
        # the busy/idle split gives way before the requests and the rates
        order = [1, len(parts), *range(2, len(parts))][: len(parts)]
        body = [(order[i], [(f"{part}  ", "value")]) for i, part in enumerate(parts)]
        lines.append([head, *body])
    return lines


def _peak(peak: float | None) -> list[Piece]:
    """`` max 8``: the most over the graph's window, shown even when it is the reading now
    (a figure that comes and goes with each scrape would flicker); dropped before kv and
    prefix hit."""
    return [] if peak is None else [(3, [(" max ", "dim"), (f"{peak:.0f}", "value")])]


def context_words(b: LatencyBucket) -> str:
    """``"4711"`` when exact, ``"≤ 2560"`` from bucket bounds, ``"> 8192"`` past the last."""
    if b.low == b.high:
        return _tokens(b.high)
    if math.isinf(b.high):
        return f"> {_tokens(b.low)}"
    return f"≤ {_tokens(b.high)}"


def _finished(by_reason: Mapping[str, float]) -> list[Piece]:
    """``done 1204: stop 71% length 29%`` since the server started (low priority)."""
    total = sum(by_reason.values())
    if total <= 0:
        return []
    shares = [(r, n / total) for r, n in sorted(by_reason.items(), key=lambda x: -x[1]) if n > 0]
    out: list[Piece] = [(3, [("done ", "label"), (f"{total:.0f} ", "value")])]
    for i, (reason, share) in enumerate(shares[:3]):
        out.append((4 + i, [(f"{reason} ", "dim"), (f"{share:.0%}  ", "value")]))
    return out


def _where_and_shape(
    model: MonitorModel, now: float, largest: LatencyBucket | None
) -> list[list[Piece]]:
    """Where the time went (queue, prefill, decode p50: vLLM; queue: SGLang), the request
    shape in tokens and the largest context since the server started."""
    lines: list[list[Piece]] = []
    where: list[Piece] = []
    for n, key in enumerate(("queue", "prefill", "decode")):
        held = model.latency.at(now, key)
        if held and held[0]:
            where.append((n, [(f"{key} ", "label"), (f"{bucket_words(held[0][0])}  ", "value")]))
    if where:
        lines.append([(0, [("p50   ", "dim")]), *where])
    shape: list[Piece] = []
    for n, (key, label) in enumerate((("prompt_tokens", "prompt"), ("generation_tokens", "gen"))):
        held = model.latency.at(now, key)
        if held and held[0]:
            b = held[0][0]
            shape.append((n, [(f"{label} ", "label"), (f"{token_bucket_words(b)} tok  ", "value")]))
    line = [(0, [("p50   ", "dim")]), *shape] if shape else []
    if largest is not None:  # since start, so held across windows without a finished request
        line.append((2, [("max ctx ", "label"), (f"{context_words(largest)} tok  ", "value")]))
    if line:
        lines.append(line)
    return lines


def load_text(model: MonitorModel, s: dict[str, Style], width: int = 10_000) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim`` to styles), each laid
    out by priority to fit ``width``: whole figures are dropped, never cut."""
    out = Text(no_wrap=True, overflow="ellipsis")
    lines = load_lines(model)
    if lines is None:
        info = model.server
        off = info.metrics_reason if info is not None and info.metrics_enabled is False else None
        out.append(off or "waiting for /metrics…", s["dim"])
        return out
    for n, line in enumerate(lines):
        if n:
            out.append("\n")
        for _, runs in _fit_line(line, width):
            for text, tone in runs:
                out.append(text, s.get(tone, s["value"]))
    return out


class LoadPane(TextPane):
    """Server load: running and waiting requests, KV cache, prompt vs generation, latencies."""

    VERSION = "spec_version"
    TITLE = "Server load"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "load--label",
        "load--value",
        "load--dim",
        "load--warn",
    }

    DEFAULT_CSS = """
    LoadPane > .load--label { color: $text-muted; }
    LoadPane > .load--value { color: $text; text-style: bold; }
    LoadPane > .load--dim { color: $text-muted; }
    LoadPane > .load--warn { color: $warning; text-style: bold; }
    """

    def render_pane(self) -> RenderableType:
        """The pane's lines at its current width."""
        return load_text(self.model, self.tone_styles(), self.content_size.width)
