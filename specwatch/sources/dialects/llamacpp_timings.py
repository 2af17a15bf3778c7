"""llama.cpp's final ``timings``: sent by its native ``/completion`` and its OpenAI endpoints.

Shared by the llama.cpp dialect and the generic one (a llama-server behind a proxy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specwatch.core.values import as_float, as_int

TIMINGS_STEP_NOTE = (
    "realized tokens per decode step from timings: (predicted_n − 1) / "
    "(predicted_n − 1 − draft_n_accepted)"
)
"""The note of an accept length that is the request's tokens a step, drafted or not."""


def decode_steps(stats: Mapping[str, Any]) -> int | None:
    """``predicted_n - 1 - draft_n_accepted`` from llama.cpp's final timings."""
    timings = stats.get("timings")
    if not isinstance(timings, Mapping):
        return None
    n = as_int(timings.get("predicted_n"))
    if n is None:
        return None
    return n - 1 - (as_int(timings.get("draft_n_accepted")) or 0)


def spec_from_timings(
    stats: dict[str, Any], notes: dict[str, str]
) -> tuple[float | None, float | None]:
    """Accept length and draft rate from llama.cpp's final ``timings`` (adds step latency)."""
    timings = stats.get("timings")
    if not isinstance(timings, Mapping):
        notes.setdefault("draft_acceptance_rate", "no timings in the final response")
        return None, None
    n = as_float(timings.get("predicted_n"))
    ms = as_float(timings.get("predicted_ms"))
    draft_n = as_float(timings.get("draft_n"))
    accepted = as_float(timings.get("draft_n_accepted"))
    steps = None
    if n is not None:
        steps = n - 1 - (accepted or 0.0)
        if steps > 0 and ms is not None:
            stats["step_latency_s"] = ms / 1000.0 / steps
            stats["decode_steps"] = int(steps)
    if draft_n is None or accepted is None:
        why = "no draft_n in timings: this request did not speculate"
        notes.setdefault("draft_acceptance_rate", why)
        notes.setdefault("accept_length", why)
        return None, None
    rate = accepted / draft_n if draft_n > 0 else None
    length = (n - 1) / steps if n is not None and steps and steps > 0 else None
    notes.setdefault("accept_length", TIMINGS_STEP_NOTE)
    return length, rate


__all__ = ["TIMINGS_STEP_NOTE", "decode_steps", "spec_from_timings"]
