"""Does speculation pay? The arithmetic behind the verify-latency pane.

Not the live verdict (GPU state, load or code?: :mod:`specwatch.session.live_verdict`).

Speculative decoding trades one verify step (slower than a plain decode step) for several tokens.
With ``step`` the mean verify-step latency, ``L`` the mean tokens per step (accept length, bonus
token included) and ``plain`` the per-token latency without speculation:

* effective latency per token = ``step / L``
* break-even accept length = ``step / plain`` (the ``L`` at which both are equal)
* speed ratio = ``plain / (step / L)``; above 1 speculation gains, below 1 it costs.

In the story, plain decoding ran at 82.7 tok/s (12.1 ms/token) and EAGLE-3 at 60 tok/s: a ratio
of 0.73, "speculation costs 27%".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EVEN_BAND = 0.02
"""Within +/-2% speculation is "about even": below what a live window can resolve."""


@dataclass(frozen=True, slots=True)
class SpecPayoff:
    """Speculation against plain decoding, from one window of measurements."""

    effective_ms_per_token: float | None
    """Verify-step latency divided by tokens per step."""
    plain_ms_per_token: float | None
    """Per-token latency without speculation (a baseline), if known."""
    break_even_accept_length: float | None
    """Tokens per step needed for speculation to match plain decoding."""
    speed_ratio: float | None
    """Plain per-token latency / effective per-token latency (> 1: speculation is faster)."""
    text: str
    """A plain sentence: "speculation gains 18%", "speculation costs 27%", or why it is unknown."""


def effective_ms_per_token(step_ms: float | None, tokens_per_step: float | None) -> float | None:
    """Verify-step latency spread over the tokens that step produced."""
    if step_ms is None or tokens_per_step is None or tokens_per_step <= 0 or step_ms <= 0:
        return None
    return step_ms / tokens_per_step


def break_even_accept_length(step_ms: float | None, plain_ms: float | None) -> float | None:
    """The accept length at which a verify step of ``step_ms`` matches plain decoding."""
    if step_ms is None or plain_ms is None or plain_ms <= 0 or step_ms <= 0:
        return None
    return step_ms / plain_ms


def spec_payoff(
    step_ms: float | None, tokens_per_step: float | None, plain_ms: float | None
) -> SpecPayoff:
    """Judge speculation from a window's step latency and accept length against a baseline.

    Args:
        step_ms: Mean verify-step latency in milliseconds.
        tokens_per_step: Mean tokens per verify step (accept length, bonus included).
        plain_ms: Per-token latency without speculation, in milliseconds.

    Returns:
        The derived figures and a one-line sentence.
    """
    eff = effective_ms_per_token(step_ms, tokens_per_step)
    be = break_even_accept_length(step_ms, plain_ms)
    if plain_ms is None or plain_ms <= 0:
        text = "no baseline: --baseline-itl MS or --baseline SNAPSHOT"
        return SpecPayoff(eff, None, None, None, text)
    if eff is None:
        return SpecPayoff(None, plain_ms, be, None, "waiting for step latency and accept length")
    ratio = plain_ms / eff
    change = ratio - 1.0
    if abs(change) < EVEN_BAND:
        text = "speculation about even with plain decoding"
    elif change > 0:
        text = f"speculation gains {change * 100:.0f}%"
    else:
        text = f"speculation costs {-change * 100:.0f}%"
    return SpecPayoff(eff, plain_ms, be, ratio, text)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value > 0:
        return float(value)
    if isinstance(value, Mapping):
        return _number(value.get("mean"))
    return None


def baseline_ms_from_snapshot(snapshot: Mapping[str, Any]) -> float | None:
    """Plain per-token latency (ms) from a benchmark snapshot taken without speculation.

    Uses the overall decode rate (tokens after the first, over decode time) when present, else the
    overall tok/s. Returns ``None`` when the snapshot has neither.
    """
    overall = snapshot.get("overall")
    if not isinstance(overall, Mapping):
        return None
    for key in ("decode_tok_s", "tok_s"):
        rate = _number(overall.get(key))
        if rate is not None:
            return 1000.0 / rate
    return None
