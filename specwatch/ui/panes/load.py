"""The server-load pane, as vllmstat users expect it: queue, KV cache, throughput, latency buckets.

Percentiles come from the servers' histograms, so they are shown as the bucket they fall in
(``20–40 ms``, ``≤ 40 ms``, ``> 8 s``), never as an interpolated point that can contradict the
mean.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text

from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.base import TextPane

if TYPE_CHECKING:
    from specwatch.core.server import LatencyBucket

LATENCY_ROWS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "e2e"))


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


def _num(v: float | None, fmt: str, scale: float = 1.0, suffix: str = "") -> str:
    return "–" if v is None else f"{format(v * scale, fmt)}{suffix}"


def load_text(model: MonitorModel, s: dict[str, Style], width: int = 10_000) -> Text:
    """The pane's lines (pure; ``s`` maps ``label``/``value``/``dim`` to styles)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    w = model.window or model.last_scrape
    if w is None:
        out.append("waiting for /metrics…", s["dim"])
        return out

    def pair(label: str, value: str) -> None:
        out.append(f"{label} ", s["label"])
        out.append(f"{value}  ", s["value"])

    pair("running", _num(w.requests_running, ".0f"))
    pair("waiting", _num(w.requests_waiting, ".0f"))
    pair("kv", _num(w.kv_cache_usage, ".0f", 100.0, "%"))
    if w.prefix_cache_hit_rate is not None:
        pair("prefix hit", _num(w.prefix_cache_hit_rate, ".0f", 100.0, "%"))
    out.append("\n")
    pair("prompt tok/s", _num(w.prompt_tok_s, ".0f"))
    pair("gen", _num(w.gen_tok_s, ".0f"))
    pair("req/s", _num(w.requests_per_s, ".1f"))
    for key, label in LATENCY_ROWS:
        buckets = w.latency_buckets.get(key)
        if not buckets:
            continue
        out.append("\n")
        out.append(f"{label:<5}", s["label"])
        for b in buckets:
            out.append(f" p{b.q * 100:g} ", s["dim"])
            out.append(bucket_words(b), s["value"])
    return out


class LoadPane(TextPane):
    """Server load: running and waiting requests, KV cache, prompt vs generation, latencies."""

    VERSION = "spec_version"
    TITLE = "Server load"

    COMPONENT_CLASSES: ClassVar[set[str]] = {"load--label", "load--value", "load--dim"}

    DEFAULT_CSS = """
    LoadPane > .load--label { color: $text-muted; }
    LoadPane > .load--value { color: $text; text-style: bold; }
    LoadPane > .load--dim { color: $text-muted; }
    """

    def render_pane(self) -> RenderableType:
        """The pane's lines at its current width."""
        return load_text(self.model, self.tone_styles(), self.content_size.width)
