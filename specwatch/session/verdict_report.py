"""The live verdict as plain JSON: ``probe --json`` and any headless front end that reports it.

A state without a verdict says so — ``outcome`` null, ``reason`` "not enough data yet: …" and
what the verdict needs — never a made-up value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specwatch.core.values import to_jsonable
from specwatch.session.live_verdict import CURRENT_S, MIN_INTERVALS, REFERENCE_S, LiveVerdict
from specwatch.session.verdict_state import LiveVerdictState

if TYPE_CHECKING:
    from specwatch.core.judge import Figures
    from specwatch.sources.probe import ProbeResult

NOT_ENOUGH = "not enough data yet"
NEEDS = (
    f"a reference ({REFERENCE_S:.0f} s of traffic once the server's warmup settled, a marked "
    f"window, or a snapshot) and {CURRENT_S:.0f} s of traffic now, each with at least "
    f"{MIN_INTERVALS} samples of tok/s"
)
"""What the live verdict needs before it judges."""
NEEDS_COUNTERS = "the server's token counters on /metrics"
"""What a server that serves none lacks before any verdict."""


def figures_json(figures: Figures | None) -> dict[str, Any] | None:
    """One side of the comparison, with its mean tok/s and clock deficit."""
    if figures is None:
        return None
    out: dict[str, Any] = to_jsonable(figures)
    out["clock_reasons"] = sorted(figures.clock_reasons)
    out["mean_tok_s"] = figures.mean_tok_s
    out["clock_deficit"] = figures.clock_deficit
    return out


def verdict_json(state: LiveVerdictState, why: str | None = None) -> dict[str, Any]:
    """``state`` as JSON; ``why`` replaces the state's own word on why nothing is judged."""
    j = state.judgement
    ref = state.reference
    reference = None
    if ref is not None:
        reference = {
            "kind": ref.kind,
            "label": ref.label,
            "t": ref.t,
            "figures": figures_json(ref.figures),
        }
    return {
        "phase": state.phase,
        "outcome": j.outcome.name if j is not None else None,
        "wording": j.outcome.wording if j is not None else None,
        "reason": j.reason if j is not None else f"{NOT_ENOUGH}: {why or state.detail}",
        "change": j.change if j is not None else None,
        "noise": j.noise if j is not None else None,
        "since": state.since,
        "reference": reference,
        "current": figures_json(state.current),
        "needs": None if j is not None else NEEDS,
    }


def probe_verdict(result: ProbeResult) -> LiveVerdictState:
    """The live verdict a session reaches from what one probe read (its metrics window)."""
    verdict = LiveVerdict()
    if result.inventory is not None:
        verdict.set_inventory(result.inventory)
    w = result.window
    if result.info is not None and w is not None:
        verdict.server_ready(w.t - w.dt)
        verdict.add_window(w)
    return verdict.state()


def probe_verdict_json(result: ProbeResult) -> dict[str, Any]:
    """The ``verdict`` of ``probe --json``: what a probe's one window gives, and why no more."""
    state = probe_verdict(result)
    w = result.window
    off = result.info.counters_off if result.info is not None else ""
    if off:  # more data would not help
        return {**verdict_json(state), "reason": f"no verdict: {off}", "needs": NEEDS_COUNTERS}
    if result.info is None:
        why = f"the server could not be probed ({result.problem})"
    elif w is None or w.dt <= 0:
        why = "no /metrics window was read"
    else:
        why = f"{state.detail}; a probe reads one {w.dt:.1f} s window"
    return verdict_json(state, why if state.judgement is None else None)


__all__ = [
    "NEEDS",
    "NEEDS_COUNTERS",
    "NOT_ENOUGH",
    "figures_json",
    "probe_verdict",
    "probe_verdict_json",
    "verdict_json",
]
