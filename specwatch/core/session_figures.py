"""Session figures: what the server did since the monitor started (or since the user reset
them): time busy and idle, requests finished, tokens generated per request, the token rate
while busy, and goodput over every request the histograms saw (vllmstat's session averages).

Built from the metrics windows alone, so they mean the same live and over a recording.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specwatch.core.goodput import Cdf, HistogramGoodput, Slo, add_cdfs, histogram_goodput

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """The session so far."""

    since: float
    """The ``t`` (monotonic) the figures count from: the first window, or the reset."""
    busy_s: float
    """Seconds of windows with a request in the server or a token generated."""
    idle_s: float
    unknown_s: float
    """Seconds of windows that told neither (no running gauge, no token counter)."""
    requests: float | None
    """Requests finished (``None``: the server counts none)."""
    tokens: float | None
    """Tokens generated (``None``: the server counts none)."""
    goodput: HistogramGoodput

    @property
    def active(self) -> float | None:
        """Busy share of the time that told busy from idle."""
        known = self.busy_s + self.idle_s
        return self.busy_s / known if known > 0 else None

    @property
    def tokens_per_request(self) -> float | None:
        if self.tokens is None or not self.requests:
            return None
        return self.tokens / self.requests

    @property
    def busy_tok_s(self) -> float | None:
        """Generated tokens per busy second: the rate the server held while it had work."""
        if self.tokens is None or self.busy_s <= 0:
            return None
        return self.tokens / self.busy_s

    def parts(self) -> list[str]:
        """``["active 97.5%", "(45s busy / 1s idle)", "176 reqs", "128 gen tok/req", ...]``."""
        active = self.active
        if active is None:
            parts = ["active –"]
        else:
            busy, idle = span_words(self.busy_s), span_words(self.idle_s)
            parts = [f"active {active * 100:.1f}%", f"({busy} busy / {idle} idle)"]
        if self.requests is not None:
            parts.append(f"{self.requests:.0f} reqs")
        per = self.tokens_per_request
        if per is not None:
            parts.append(f"{per:.0f} gen tok/req")
        rate = self.busy_tok_s
        if rate is not None:
            parts.append(f"{rate:.1f} tok/s busy")
        return parts

    def words(self) -> str:
        """``active 97.5% (45s busy / 1s idle) · 176 reqs · 128 gen tok/req · 41 tok/s busy``."""
        return " · ".join(self.parts())


def span_words(s: float) -> str:
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) and v >= 0 else None


@dataclass(slots=True)
class SessionTotals:
    """The running sums behind :class:`SessionSummary` (constant memory: a few numbers and the
    summed latency buckets)."""

    since: float | None = None
    busy_s: float = 0.0
    idle_s: float = 0.0
    unknown_s: float = 0.0
    requests: float | None = None
    tokens: float | None = None
    cdf: dict[str, Cdf] = field(default_factory=dict)

    def reset(self, t: float) -> None:
        """Count from ``t`` again (the reset key)."""
        self.since = t
        self.busy_s = self.idle_s = self.unknown_s = 0.0
        self.requests = self.tokens = None
        self.cdf = {}

    def add(self, w: MetricsWindow) -> None:
        """One window's deltas (the first scrape, and one across a restart, carry none)."""
        if self.since is None:
            self.since = w.t - w.dt
        if not w.dt > 0 or w.restarted or not math.isfinite(w.dt):
            return
        tokens = _finite(w.tokens)
        if tokens is None and (rate := _finite(w.gen_tok_s)) is not None:
            tokens = rate * w.dt
        running = _finite(w.requests_running)
        if running is None and tokens is None:
            self.unknown_s += w.dt
        elif (running or 0.0) > 0 or (tokens or 0.0) > 0:
            self.busy_s += w.dt
        else:
            self.idle_s += w.dt
        if tokens is not None:
            self.tokens = (self.tokens or 0.0) + tokens
        finished = _finished(w)
        if finished is not None:
            self.requests = (self.requests or 0.0) + finished
        for key, cdf in w.latency_cdf.items():
            self.cdf[key] = add_cdfs(self.cdf.get(key, ()), cdf)

    def summary(self, slo: Slo, now: float) -> SessionSummary:
        return SessionSummary(
            since=now if self.since is None else self.since,
            busy_s=self.busy_s,
            idle_s=self.idle_s,
            unknown_s=self.unknown_s,
            requests=self.requests,
            tokens=self.tokens,
            goodput=histogram_goodput(self.cdf, slo),
        )


def _finished(w: MetricsWindow) -> float | None:
    by_reason: Mapping[str, float] = w.finished_in_window
    if by_reason:
        total = math.fsum(v for v in by_reason.values() if math.isfinite(v) and v >= 0)
        return total
    rate = _finite(w.requests_per_s)
    return None if rate is None else rate * w.dt


__all__ = ["SessionSummary", "SessionTotals", "span_words"]
