"""The pieces a dialect uses to derive one :class:`~specwatch.core.server.MetricsWindow`.

:class:`WindowBuilder` collects values with the series each came from and notes for the
missing ones; the functions compute counter and histogram deltas between two scrapes. The
``spec_*`` helpers read the speculative counters vLLM defines and llama.cpp copied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.server import LatencyBucket
from specwatch.sources.metrics.prom import Histogram, LabelMatch, Scrape

QUANTILES = (0.5, 0.9, 0.99)
"""The step-latency quantiles a window carries."""
CDF_KEYS = ("ttft", "tpot")
"""The latency histograms whose bucket counts a window keeps whole (goodput reads them)."""


@dataclass(slots=True)
class WindowBuilder:
    """Collects the fields of one :class:`~specwatch.core.server.MetricsWindow`."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    progress: Any = None
    """The dialect's :meth:`~specwatch.sources.dialects.base.ServerDialect.progress` answer read
    with this scrape (``None``: none read)."""
    prev_progress: Any = None
    """The same, read with the window's first scrape."""

    def set(self, name: str, value: Any, source: str) -> bool:
        """Set ``name`` from ``source``; ``None`` and non-finite values are left out (``False``)."""
        if value is None:
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        self.values[name] = value
        self.sources[name] = source
        return True

    def note(self, name: str, text: str) -> None:
        """Say why ``name`` is missing, unless it is set or already explained."""
        if name not in self.values:
            self.notes.setdefault(name, text)


def delta(cur: Scrape, prev: Scrape, name: str, where: LabelMatch | None = None) -> float | None:
    """``cur − prev`` of a summed counter (``None`` when ``cur`` lacks it)."""
    now = cur.total(name, where)
    before = prev.total(name, where)
    if now is None:
        return None
    return now - (before or 0.0)


def hist_delta(cur: Scrape, prev: Scrape | None, name: str) -> Histogram | None:
    """The histogram of observations made between the two scrapes."""
    now = cur.histogram(name)
    if now is None or prev is None:
        return None
    before = prev.histogram(name)
    return now if before is None else now.minus(before)


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, or ``None`` when either is missing or ``den <= 0``."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def plus_one(x: float | None) -> float | None:
    """``1 + x`` (the bonus token of a verify step), ``None`` stays ``None``."""
    return None if x is None else 1.0 + x


def minus(a: float | None, c: float | None) -> float | None:
    """``a − c`` with a missing ``c`` read as 0."""
    if a is None:
        return None
    return a - (c or 0.0)


def set_latency_quantiles(b: WindowBuilder, hist: Histogram, source: str) -> None:
    """Step-latency p50/p90/p99 from a histogram of step latencies, and the buckets holding
    them (``latency_buckets["step"]``: what the screen shows, since a point interpolated inside
    a bucket can contradict the mean)."""
    names = ("step_latency_p50_s", "step_latency_p90_s", "step_latency_p99_s")
    for q, name in zip(QUANTILES, names, strict=True):
        b.set(name, hist.quantile(q), f"{source} bucket deltas, q={q:g}, interpolated in bucket")
    found = tuple(x for x in (bucket_of(hist, q) for q in QUANTILES) if x is not None)
    if found:
        b.values.setdefault("latency_buckets", {})["step"] = found
        b.sources["latency_buckets.step"] = f"Δ{source} buckets: the bucket holding each q"


def bucket_of(hist: Histogram, q: float) -> LatencyBucket | None:
    """The bucket the ``q`` quantile falls in (``None`` with no observations)."""
    total = hist.buckets[-1][1] if hist.buckets else 0.0
    if total <= 0:
        return None
    low = 0.0
    for le, cumulative in hist.buckets:
        if cumulative >= q * total:
            return LatencyBucket(q, low, le)
        low = le
    return None


def set_load(
    b: WindowBuilder,
    cur: Scrape,
    prev: Scrape,
    dt: float,
    prefix: str,
    latency: Mapping[str, str],
) -> None:
    """Prompt tok/s, requests/s and the latency buckets (TTFT, TPOT, e2e) over the window.

    ``latency`` maps ``"ttft"``/``"tpot"``/``"e2e"`` to the histogram's name.
    """
    prompt = prefix + "prompt_tokens_total"
    b.set("prompt_tok_s", ratio(delta(cur, prev, prompt), dt), f"Δ{prompt} / Δt")
    buckets: dict[str, tuple[LatencyBucket, ...]] = {}
    for key, name in latency.items():
        hist = hist_delta(cur, prev, name)
        if hist is None:
            continue
        if key == "e2e":
            b.set("requests_per_s", ratio(hist.count, dt), f"Δ{name}_count / Δt")
        if key in CDF_KEYS and hist.count > 0:
            b.values.setdefault("latency_cdf", {})[key] = hist.buckets
            b.sources[f"latency_cdf.{key}"] = f"Δ{name} buckets (cumulative)"
        found = tuple(x for x in (bucket_of(hist, q) for q in QUANTILES) if x is not None)
        if found:
            buckets[key] = found
            b.sources[f"latency_buckets.{key}"] = f"Δ{name} buckets: the bucket holding each q"
    if buckets:
        b.values.setdefault("latency_buckets", {}).update(buckets)


def spec_names(prefix: str) -> tuple[str, str, str]:
    """Accepted-token, draft and draft-token counters (llama.cpp copied vLLM's names)."""
    return (
        prefix + "spec_decode_num_accepted_tokens_total",
        prefix + "spec_decode_num_drafts_total",
        prefix + "spec_decode_num_draft_tokens_total",
    )


def spec_lifetime(b: WindowBuilder, cur: Scrape, prefix: str) -> bool:
    """Set the since-start accept length and rate; ``False`` when there are no spec counters."""
    acc_name, drafts_name, dtok_name = spec_names(prefix)
    if not (cur.has(drafts_name) or cur.has(acc_name)):
        return False
    b.set(
        "lifetime_accept_length",
        plus_one(ratio(cur.total(acc_name), cur.total(drafts_name))),
        f"1 + {acc_name} / {drafts_name} (since start)",
    )
    b.set(
        "lifetime_acceptance_rate",
        ratio(cur.total(acc_name), cur.total(dtok_name)),
        f"{acc_name} / {dtok_name} (since start)",
    )
    return True


def spec_window(b: WindowBuilder, cur: Scrape, prev: Scrape, prefix: str) -> float:
    """Set the windowed accept length, rate and per-position rates; returns Δdrafts.

    Nothing is set when no draft was made in the window (Δdrafts <= 0).
    """
    acc_name, drafts_name, dtok_name = spec_names(prefix)
    drafts = delta(cur, prev, drafts_name) or 0.0
    if drafts <= 0:
        return drafts
    acc = delta(cur, prev, acc_name) or 0.0
    dtoks = delta(cur, prev, dtok_name) or 0.0
    b.set("accept_length", plus_one(ratio(acc, drafts)), f"1 + Δ{acc_name} / Δ{drafts_name}")
    b.set("draft_acceptance_rate", ratio(acc, dtoks), f"Δ{acc_name} / Δ{dtok_name}")
    b.set("spec_drafts", drafts, f"Δ{drafts_name}")
    per_pos = prefix + "spec_decode_num_accepted_tokens_per_pos_total"
    now = cur.by_label(per_pos, "position")
    if now:
        before = prev.by_label(per_pos, "position")
        ordered = sorted(now, key=lambda p: int(p) if p.isdigit() else 1 << 30)
        counts = tuple(now[p] - before.get(p, 0.0) for p in ordered)
        b.set("spec_accepted_per_pos", counts, f"Δ{per_pos}{{position}}")
        b.set(
            "per_position_acceptance",
            tuple(c / drafts for c in counts),
            f"Δ{per_pos}{{position}} / Δ{drafts_name}",
        )
    return drafts


def accept_length_from(
    deltas: Mapping[str, float], num: str, den: str, offset: float, minus_name: str = ""
) -> float | None:
    """``offset + (Δnum − Δminus_name) / Δden`` from counter deltas over a run."""
    top, bottom = deltas.get(num), deltas.get(den)
    if top is None or not bottom:
        return None
    if minus_name:
        top -= deltas.get(minus_name, 0.0)
    return offset + top / bottom


def set_largest_context(b: WindowBuilder, cur: Scrape, prompt: str, generation: str) -> None:
    """Bounds on the largest request's context from the since-start prompt and generation
    token histograms: no request had more than both top occupied buckets' upper bounds, and
    the request in each top bucket had more than its lower bound."""
    hp, hg = cur.histogram(prompt), cur.histogram(generation)
    p = None if hp is None else bucket_of(hp, 1.0)
    g = None if hg is None else bucket_of(hg, 1.0)
    if p is None or g is None:
        return
    b.values["largest_context"] = LatencyBucket(1.0, max(p.low, g.low), p.high + g.high)
    b.sources["largest_context"] = (
        f"{prompt} + {generation}: the top occupied buckets since start (a bound)"
    )


__all__ = [
    "QUANTILES",
    "WindowBuilder",
    "accept_length_from",
    "bucket_of",
    "delta",
    "hist_delta",
    "minus",
    "plus_one",
    "ratio",
    "set_largest_context",
    "set_latency_quantiles",
    "set_load",
    "spec_lifetime",
    "spec_names",
    "spec_window",
]
