"""Configuration health: rules that read one metrics window and the server's settings and say,
in a line each, where the server's configuration does not fit its traffic.

Every threshold is a constant here, so the live pane, ``probe`` and its JSON say the same
thing. A rule that lacks its inputs (the server does not export them) is ``unknown`` with the
reason, never silently clear. The KV cache's capacity in tokens lives here too: it is what the
pressure rule and the load pane both read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from specwatch.core.server import MetricsWindow, ServerInfo

TRUNCATED_WARN = 0.05
"""Share of finished requests cut at the length cap (finish reason ``length``) that warns."""
TRUNCATED_BAD = 0.5
"""The same share that is an error: most answers end mid-sentence."""
CONTEXT_USED_BELOW = 0.25
"""The largest request seen (prompt + generated tokens, its upper bound) under this share of
max-model-len reads as context over-provisioned: KV memory is reserved for lengths never used."""
CONTEXT_MIN_REQUESTS = 20
"""Finished requests needed before the largest one seen says anything about the traffic, and
before the requests finished since start (no window finished any) say it truncates."""
KV_PRESSURE = 0.9
"""KV-cache use at or over this share warns: the next long request preempts another."""
QUEUE_BACKLOG = 1.0
"""Waiting requests at or over this many per running one is a backlog."""
QUEUE_MIN_WAITING = 2.0
"""Fewer waiting requests than this is a scheduling blip, not a backlog."""

Level = Literal["bad", "warn", "clear", "unknown"]
RULES = ("truncation", "context", "kv_pressure", "queue", "prefix_caching")
"""Every rule, in the order they are shown."""
MARKS: Mapping[Level, str] = {"bad": "✖", "warn": "⚠", "clear": "✔", "unknown": "?"}


@dataclass(frozen=True, slots=True)
class HealthFinding:
    """One rule's verdict on one window."""

    rule: str
    """One of :data:`RULES`."""
    level: Level
    line: str
    """One line, without the level's mark (``"100% of requests truncated at the length cap"``)."""
    short: str = ""
    """A few words for a narrow pane (``"100% truncated"``); empty when the rule is quiet."""

    @property
    def fires(self) -> bool:
        """Whether the rule found something to say."""
        return self.level in ("bad", "warn")

    def text(self) -> str:
        """The line with its mark (``"✖ 100% of requests truncated…"``)."""
        return f"{MARKS[self.level]} {self.line}"


def kv_tokens(w: MetricsWindow) -> tuple[float, float] | None:
    """``(tokens held now, capacity)`` of the KV cache, where the server gives its capacity."""
    if w.kv_capacity_tokens is None or w.kv_cache_usage is None:
        return None
    return w.kv_cache_usage * w.kv_capacity_tokens, w.kv_capacity_tokens


def token_count_words(n: float) -> str:
    """``"256"``, ``"4.1k"``, ``"246.7k"``, ``"1.2M"`` tokens."""
    if n >= 999_950:
        return f"{n / 1e6:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return f"{n:.0f}"


def kv_words(w: MetricsWindow) -> str | None:
    """``"256/246.7k tok"`` (``None`` without a capacity)."""
    found = kv_tokens(w)
    if found is None:
        return None
    used, capacity = found
    return f"{token_count_words(used)}/{token_count_words(capacity)} tok"


def config_health(info: ServerInfo | None, w: MetricsWindow) -> tuple[HealthFinding, ...]:
    """Every rule of :data:`RULES` on ``w`` (and the settings in ``info``), in that order."""
    return (
        _truncation(info, w),
        _context(info, w),
        _kv_pressure(w),
        _queue(w),
        _prefix_caching(info),
    )


def _truncation(info: ServerInfo | None, w: MetricsWindow) -> HealthFinding:
    window = sum(w.finished_in_window.values())
    counts, where = (
        (w.finished_in_window, "in the window")
        if window > 0
        else (w.finished_by_reason, "since start")
    )
    total = sum(counts.values())
    if total <= 0:
        why = "no finished requests by reason" if not counts else "no request finished yet"
        return HealthFinding("truncation", "unknown", why)
    if window <= 0 and total < CONTEXT_MIN_REQUESTS:
        # the server's whole life, and short: on an idle server that is a probe's or a
        # benchmark's own few requests, each cut at its own max_tokens
        why = f"{total:.0f} of {CONTEXT_MIN_REQUESTS} requests finished since start"
        return HealthFinding("truncation", "unknown", why)
    cut = counts.get("length", 0.0)
    share = cut / total
    max_len = info.max_model_len if info is not None else None
    ctx = w.largest_context
    if cut and max_len and ctx is not None and ctx.high < max_len:
        # No request since start could reach the context, so each one cut stopped at the
        # max_tokens its client asked for (a benchmark's, a load generator's): the server's
        # settings cut nothing.
        return HealthFinding(
            "truncation",
            "clear",
            f"{share:.0%} of requests stopped at their own max_tokens ({cut:.0f} of "
            f"{total:.0f} {where}); none came near the {max_len:,}-token context",
        )
    level: Level = (
        "bad" if share >= TRUNCATED_BAD else "warn" if share >= TRUNCATED_WARN else "clear"
    )
    return HealthFinding(
        "truncation",
        level,
        f"{share:.0%} of requests truncated at the length cap ({cut:.0f} of {total:.0f} {where})",
        f"{share:.0%} truncated",
    )


def _context(info: ServerInfo | None, w: MetricsWindow) -> HealthFinding:
    max_len = info.max_model_len if info is not None else None
    ctx = w.largest_context
    if not max_len or ctx is None or math.isinf(ctx.high):
        why = "no max-model-len" if not max_len else "no request sizes (histograms)"
        return HealthFinding("context", "unknown", why)
    finished = sum(w.finished_by_reason.values())
    if w.finished_by_reason and finished < CONTEXT_MIN_REQUESTS:
        return HealthFinding(
            "context", "unknown", f"{finished:.0f} of {CONTEXT_MIN_REQUESTS} requests finished"
        )
    largest = f"{ctx.high:,.0f}" if ctx.low == ctx.high else f"≤ {ctx.high:,.0f}"
    level: Level = "warn" if ctx.high <= CONTEXT_USED_BELOW * max_len else "clear"
    word = "over-provisioned" if level == "warn" else "used"
    return HealthFinding(
        "context",
        level,
        f"context {word}: largest request {largest} of {max_len:,} max-model-len",
        f"ctx over-provisioned {largest}/{max_len:,}",
    )


def _kv_pressure(w: MetricsWindow) -> HealthFinding:
    usage = w.kv_cache_usage
    held = kv_words(w)
    where = f"{usage:.0%}" if usage is not None else "use unknown"
    if held is not None:
        where += f", {held}"
    if w.preemptions_per_s is not None and w.preemptions_per_s > 0:
        n = w.preemptions_per_s * w.dt
        return HealthFinding(
            "kv_pressure",
            "bad",
            f"KV cache exhausted: {n:.0f} preempted in the window ({where})",
            f"{n:.0f} preempted",
        )
    if usage is None:
        return HealthFinding("kv_pressure", "unknown", "no KV-cache use")
    level: Level = "warn" if usage >= KV_PRESSURE else "clear"
    word = "nearly full" if level == "warn" else "has room"
    return HealthFinding("kv_pressure", level, f"KV cache {word} ({where})", f"KV {where}")


def _queue(w: MetricsWindow) -> HealthFinding:
    waiting, running = w.requests_waiting, w.requests_running
    if waiting is None or running is None:
        return HealthFinding("queue", "unknown", "no running/waiting counts")
    backlog = waiting >= QUEUE_MIN_WAITING and waiting >= QUEUE_BACKLOG * running
    if not backlog:
        return HealthFinding(
            "queue", "clear", f"queue {waiting:.0f} waiting, {running:.0f} running"
        )
    full = w.kv_cache_usage is not None and w.kv_cache_usage >= KV_PRESSURE
    hint = "KV cache full" if full else "KV has room: the batch limit holds them"
    return HealthFinding(
        "queue",
        "warn",
        f"queue backlog: {waiting:.0f} waiting vs {running:.0f} running ({hint})",
        f"backlog {waiting:.0f} waiting",
    )


def _prefix_caching(info: ServerInfo | None) -> HealthFinding:
    launch: Mapping[str, Any] = (info.launch_args if info is not None else None) or {}
    if "enable_prefix_caching" in launch:  # vLLM cache_config_info
        on = str(launch["enable_prefix_caching"]).lower() == "true"
        setting = f"enable_prefix_caching={launch['enable_prefix_caching']}"
    elif "disable_radix_cache" in launch:  # SGLang /server_info
        on = str(launch["disable_radix_cache"]).lower() != "true"
        setting = f"disable_radix_cache={launch['disable_radix_cache']}"
    else:
        return HealthFinding("prefix_caching", "unknown", "the server does not say")
    if on:
        return HealthFinding("prefix_caching", "clear", f"prefix caching on ({setting})")
    return HealthFinding(
        "prefix_caching",
        "warn",
        f"prefix caching off ({setting}): shared prompts recomputed",
        "prefix caching off",
    )


def firing(findings: tuple[HealthFinding, ...]) -> tuple[HealthFinding, ...]:
    """The findings that fire, errors first."""
    return tuple(sorted((f for f in findings if f.fires), key=lambda f: f.level != "bad"))


def health_json(findings: tuple[HealthFinding, ...]) -> list[dict[str, str]]:
    """The findings as ``probe --json`` prints them."""
    return [{"rule": f.rule, "level": f.level, "line": f.line} for f in findings]


__all__ = [
    "CONTEXT_MIN_REQUESTS",
    "CONTEXT_USED_BELOW",
    "KV_PRESSURE",
    "QUEUE_BACKLOG",
    "QUEUE_MIN_WAITING",
    "RULES",
    "TRUNCATED_BAD",
    "TRUNCATED_WARN",
    "HealthFinding",
    "config_health",
    "firing",
    "health_json",
    "kv_tokens",
    "kv_words",
    "token_count_words",
]
