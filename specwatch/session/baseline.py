"""The plain per-token latency the verify-latency verdict compares speculation against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Baseline:
    """Milliseconds per token without speculation, where that came from, or why there is none."""

    ms: float | None = None
    source: str = ""
    error: str | None = None
    """One line saying why the given baseline cannot be used."""


def load_baseline(itl_ms: float | None = None, snapshot: Path | None = None) -> Baseline:
    """The baseline from ``--baseline-itl`` (preferred) or a benchmark snapshot. Never raises.

    A snapshot taken with speculation on is refused: speculation measured against itself always
    reads "about even".
    """
    if itl_ms is not None:
        return Baseline(float(itl_ms), "--baseline-itl")
    if snapshot is None:
        return Baseline()
    from specwatch.core.spec_payoff import baseline_ms_from_snapshot

    try:
        from specwatch.bench.snapshot import read_snapshot

        snap = read_snapshot(snapshot)
    except Exception as e:  # SnapshotError and OSError: report in one line
        return Baseline(error=f"--baseline {snapshot}: {e}")
    server = snap.get("server")
    spec = server.get("speculative") if isinstance(server, dict) else None
    if isinstance(spec, dict) and spec.get("enabled") is True:
        what = spec.get("algorithm") or "speculative decoding"
        return Baseline(
            error=(
                f"--baseline {snapshot}: taken with speculation on ({what}); "
                "the baseline must be a run without speculation"
            )
        )
    ms = baseline_ms_from_snapshot(snap)
    if ms is None:
        return Baseline(error=f"--baseline {snapshot}: no overall decode rate in this snapshot")
    return Baseline(ms, snapshot.name)
