"""How long and how much specwatch will take from a server: deadlines and size limits.

Every request has a wall-clock deadline besides the read timeout (``--timeout`` bounds each
read; a server dripping one byte a second never trips it). The defaults fit each use and
``--deadline`` overrides them:

==============================  =====================================================
use                             deadline
==============================  =====================================================
``probe``                       60 s for each request, the stream included
the TUI's polls                 5 s for each request (detection and ``/metrics``)
a benchmark run's stream        60 s + 0.25 s × ``max_tokens`` (2048 tokens: 572 s)
any other request               60 s
==============================  =====================================================

Every body is read as a stream and reading stops past its limit, so memory stays bounded
whatever the server sends: JSON answers 16 MiB, one ``/metrics`` scrape 8 MiB, one SSE line
1 MiB; of an error answer only the first 64 KiB are read (an excerpt is all that is shown).
"""

from __future__ import annotations

MIB = 1024 * 1024

BODY_LIMIT_BYTES = 16 * MIB
"""A JSON answer (``/v1/models``, ``/server_info``, ``/version``...)."""
METRICS_LIMIT_BYTES = 8 * MIB
"""One ``/metrics`` scrape (real servers send well under 1 MiB)."""
SSE_LINE_LIMIT_BYTES = 1 * MIB
"""One line (event) of a stream."""
ERROR_BODY_LIMIT_BYTES = 64 * 1024
"""What is read of an error answer; the rest is not needed for the excerpt."""

REQUEST_DEADLINE_S = 60.0
"""Any request without a more specific deadline."""
PROBE_DEADLINE_S = 60.0
"""``specwatch probe``: each request, the stream included."""
POLL_DEADLINE_S = 5.0
"""The live session's (TUI's) requests: a poll must never hold the monitor for long."""
RUN_FIXED_S = 60.0
"""A benchmark stream's fixed allowance (queueing, prefill)..."""
RUN_PER_TOKEN_S = 0.25
"""...plus this per requested token (a server slower than 4 tokens/s is reported)."""


def run_deadline(max_tokens: int) -> float:
    """The default wall-clock deadline of one stream of ``max_tokens`` tokens."""
    return RUN_FIXED_S + RUN_PER_TOKEN_S * max(0, max_tokens)


def mib(n: float) -> str:
    """``n`` bytes in MiB, e.g. ``"47.7"`` or ``"8"``."""
    value = n / MIB
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def too_large(what: str, size: int | None, limit: int) -> str:
    """The one line for an answer over its limit; ``size`` is ``None`` when unknown."""
    shown = f"{mib(size)} MiB" if size is not None else f"over {mib(limit)} MiB"
    return f"{what}: answer too large ({shown}, limit {mib(limit)} MiB)"


def deadline_hint(deadline_s: float) -> str:
    """The end of a deadline message: how long, and how to allow more."""
    return f"within the {deadline_s:g} s deadline (--deadline S allows more)"


__all__ = [
    "BODY_LIMIT_BYTES",
    "ERROR_BODY_LIMIT_BYTES",
    "METRICS_LIMIT_BYTES",
    "MIB",
    "POLL_DEADLINE_S",
    "PROBE_DEADLINE_S",
    "REQUEST_DEADLINE_S",
    "RUN_FIXED_S",
    "RUN_PER_TOKEN_S",
    "SSE_LINE_LIMIT_BYTES",
    "deadline_hint",
    "mib",
    "run_deadline",
    "too_large",
]
