"""Goodput: the share of requests that met a latency objective (time to first token, time per
output token), as vllmstat shows it.

Two readings, each honest about what it rests on:

- from the server's histograms (live, ``probe``): the share of requests at or under the SLO is
  known exactly only at a bucket bound; an SLO between two bounds gets the two shares around it
  (``97–99%``), never an interpolated point. The histograms are per figure, so the share that
  met *both* objectives cannot be told from them.
- from a benchmark's own requests (``bench``, snapshots): each request's TTFT and TPOT, so the
  share that met both is exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Cdf = tuple[tuple[float, float], ...]
"""``(le, requests at or under le)``, ascending, ``inf`` last (a histogram's cumulative buckets)."""


@dataclass(frozen=True, slots=True)
class Slo:
    """The latency objectives a request must meet to count as goodput (seconds)."""

    ttft_s: float | None = 1.0
    tpot_s: float | None = 0.05

    def words(self) -> str:
        """``TTFT≤1s · TPOT≤50ms`` (the objectives that are set)."""
        parts = [
            f"{name}≤{_ms_or_s(v)}"
            for name, v in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s))
            if v is not None
        ]
        return " · ".join(parts) if parts else "no SLO"


DEFAULT_SLO = Slo()
"""vllmstat's defaults: TTFT under 1 s and TPOT under 50 ms."""


def _ms_or_s(v: float) -> str:
    return f"{v:g}s" if v >= 1.0 else f"{v * 1000:g}ms"


def slo_from_ms(ttft_ms: float | None, tpot_ms: float | None) -> Slo:
    """``--slo-ttft MS`` / ``--slo-tpot MS``: a value of 0 or less turns that objective off."""

    def seconds(ms: float | None, default: float | None) -> float | None:
        if ms is None:
            return default
        return ms / 1000.0 if ms > 0 and math.isfinite(ms) else None

    return Slo(seconds(ttft_ms, DEFAULT_SLO.ttft_s), seconds(tpot_ms, DEFAULT_SLO.tpot_s))


@dataclass(frozen=True, slots=True)
class ShareBounds:
    """The share of ``requests`` at or under a limit: exactly ``low`` when ``low == high``."""

    low: float
    high: float
    requests: float

    def words(self) -> str:
        """``100.0%``, or ``97.1–98.6%`` when the limit falls inside a bucket."""
        if self.high - self.low < 0.0005:
            return f"{self.low * 100:.1f}%"
        return f"{self.low * 100:.1f}–{self.high * 100:.1f}%"


def cdf_counts(cdf: Cdf, limit: float) -> tuple[float, float, float] | None:
    """``(at least, at most, requests)``: how many of the requests in ``cdf`` were at or under
    ``limit`` (the two are equal at a bucket bound); ``None`` with no requests."""
    if not cdf:
        return None
    total = cdf[-1][1]
    if not total > 0:
        return None
    below = 0.0
    for le, cumulative in cdf:
        if le == limit:
            return cumulative, cumulative, total
        if le > limit:
            return below, cumulative, total
        below = cumulative
    return total, total, total


def cdf_share(cdf: Cdf, limit: float) -> ShareBounds | None:
    """Share of the requests in ``cdf`` at or under ``limit`` (``None`` with no requests)."""
    counts = cdf_counts(cdf, limit)
    if counts is None:
        return None
    low, high, total = counts
    return ShareBounds(low / total, high / total, total)


def add_cdfs(a: Cdf, b: Cdf) -> Cdf:
    """Two windows' buckets added bound by bound (a bound either lacks counts as its last lower
    bound's count, as a cumulative histogram means)."""
    if not a:
        return b
    if not b:
        return a
    bounds = sorted({le for le, _ in a} | {le for le, _ in b})
    return tuple((le, _at(a, le) + _at(b, le)) for le in bounds)


def _at(cdf: Cdf, le: float) -> float:
    n = 0.0
    for bound, cumulative in cdf:
        if bound > le:
            break
        n = cumulative
    return n


@dataclass(frozen=True, slots=True)
class HistogramGoodput:
    """Goodput from the server's histograms (``None``: no requests, or that SLO off)."""

    slo: Slo
    ttft: ShareBounds | None
    tpot: ShareBounds | None

    def parts(self) -> list[str]:
        """``["TTFT≤1s 100.0%", "TPOT≤50ms 97.1–98.6%"]``: each objective set and its share."""
        parts = []
        for name, limit, share in (
            ("TTFT", self.slo.ttft_s, self.ttft),
            ("TPOT", self.slo.tpot_s, self.tpot),
        ):
            if limit is not None:
                got = "no requests" if share is None else share.words()
                parts.append(f"{name}≤{_ms_or_s(limit)} {got}")
        return parts

    def words(self) -> str:
        """``TTFT≤1s 100.0% · TPOT≤50ms 97.1–98.6%`` (what is known)."""
        return " · ".join(self.parts()) or "no SLO set"

    def to_json(self) -> dict[str, object]:
        """For ``probe --json``: the SLO in seconds and each share's bounds."""

        def share(s: ShareBounds | None) -> dict[str, float] | None:
            return None if s is None else {"low": s.low, "high": s.high, "requests": s.requests}

        return {
            "slo_ttft_s": self.slo.ttft_s,
            "slo_tpot_s": self.slo.tpot_s,
            "ttft": share(self.ttft),
            "tpot": share(self.tpot),
            "from": "the server's histograms: exact at a bucket bound, else the two around it",
        }


def histogram_goodput(cdf: Mapping[str, Cdf], slo: Slo) -> HistogramGoodput:
    """Goodput from ``MetricsWindow.latency_cdf`` (or a session's sum of them)."""

    def one(key: str, limit: float | None) -> ShareBounds | None:
        got = cdf.get(key)
        return None if limit is None or not got else cdf_share(got, limit)

    return HistogramGoodput(slo, one("ttft", slo.ttft_s), one("tpot", slo.tpot_s))


@dataclass(frozen=True, slots=True)
class RequestGoodput:
    """Goodput over a benchmark's own requests: each one's TTFT and TPOT are known."""

    slo: Slo
    requests: int
    """Requests with the figures the SLO needs (a request of one token has no TPOT)."""
    met_ttft: int
    met_tpot: int
    met_both: int

    def share(self) -> float | None:
        """Share of requests that met every objective set."""
        return self.met_both / self.requests if self.requests else None

    def words(self) -> str:
        """``98.0% of 50 requests met TTFT≤1s · TPOT≤50ms (TTFT 100.0%, TPOT 98.0%)``."""
        share = self.share()
        if share is None:
            return f"no request with the figures {self.slo.words()} needs"
        each = [
            f"{name} {met / self.requests * 100:.1f}%"
            for name, limit, met in (
                ("TTFT", self.slo.ttft_s, self.met_ttft),
                ("TPOT", self.slo.tpot_s, self.met_tpot),
            )
            if limit is not None
        ]
        return (
            f"{share * 100:.1f}% of {self.requests} requests met {self.slo.words()}"
            f" ({', '.join(each)})"
        )


def request_goodput(
    requests: Iterable[tuple[float | None, float | None]], slo: Slo
) -> RequestGoodput:
    """Goodput over ``(ttft_s, tpot_s)`` of each request; a request lacking a figure an
    objective needs is left out (counted in none of the shares)."""
    n = met_ttft = met_tpot = met_both = 0
    for ttft, tpot in requests:
        ok_ttft = _meets(ttft, slo.ttft_s)
        ok_tpot = _meets(tpot, slo.tpot_s)
        if ok_ttft is None or ok_tpot is None:
            continue
        n += 1
        met_ttft += ok_ttft
        met_tpot += ok_tpot
        met_both += ok_ttft and ok_tpot
    return RequestGoodput(slo, n, met_ttft, met_tpot, met_both)


def _meets(value: float | None, limit: float | None) -> bool | None:
    if limit is None:
        return True
    if value is None or not math.isfinite(value):
        return None
    return value <= limit


def tpot_of(completion_tokens: int, decode_s: float | None) -> float | None:
    """Time per output token after the first: ``decode_s / (tokens − 1)`` (vLLM's TPOT)."""
    if decode_s is None or completion_tokens < 2 or not math.isfinite(decode_s):
        return None
    return decode_s / (completion_tokens - 1)


__all__ = [
    "DEFAULT_SLO",
    "Cdf",
    "HistogramGoodput",
    "RequestGoodput",
    "ShareBounds",
    "Slo",
    "add_cdfs",
    "cdf_counts",
    "cdf_share",
    "histogram_goodput",
    "request_goodput",
    "slo_from_ms",
    "tpot_of",
]
