"""Live advice with a draft-length sweep beside it: measured points where the sweep has them.

The live advice (:mod:`specwatch.core.draft_advisor`) models the step time at draft lengths the
server is not running; a sweep (:mod:`specwatch.core.draft_sweep`) measured some of them. Each
measured cell is shown beside the live prediction at its (batch, k). At a batch the sweep could
rank (the compare judge found its snapshots' GPUs alike), the measured best draft length
replaces the model's unless the model's is within noise of it, and the recommendation is
written again from the result; a batch the sweep could not rank keeps the model's, and says
why. The sweep's snapshots are not judged against the live windows' GPU state (a live watch
reads ``/metrics`` only): they are only as comparable as the days they were taken.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specwatch.core.acceptance import Estimate
from specwatch.core.draft_advisor import Advice, BatchAdvice
from specwatch.core.draft_sweep import Sweep, SweepBatch
from specwatch.core.draft_syntax import engine_setting
from specwatch.core.stats import Summary

MEASURED_TOK_S = "measured: a snapshot's tokens over its runs' wall time (TTFT included)"


@dataclass(frozen=True, slots=True)
class MeasuredPoint:
    """One sweep cell beside the live prediction at the same batch and draft length."""

    batch: int
    k: int
    measured: Summary
    """The snapshot's per-run tok/s."""
    name: str
    """The snapshot it came from."""
    predicted: Estimate | None
    """The live advice's tok/s there; ``None`` where it has none (k above K, no such batch)."""
    modelled: bool | None
    """Whether that prediction's step time was the model's (``None``: no prediction)."""


@dataclass(frozen=True, slots=True)
class SweptAdvice:
    """The live advice after the sweep's measurements, and the points behind it."""

    advice: Advice
    sweep: Sweep
    points: tuple[MeasuredPoint, ...]
    changes: tuple[str, ...]
    """One line per batch the sweep spoke for: kept, replaced, or why it could not."""


def _prediction(b: BatchAdvice | None, k: int) -> tuple[Estimate | None, bool | None]:
    for o in b.options if b is not None else ():
        if o.k == k:
            return o.tok_s, o.modelled
    return None, None


def _measured_k(sb: SweepBatch, live: BatchAdvice | None) -> tuple[int | None, str]:
    """The draft length the sweep gives this batch, and the line saying so."""
    name = f"batch {sb.batch}"
    if sb.refusals:
        return None, f"{name}: the sweep cannot rank it ({sb.refusals[0]}); the model stands"
    if sb.best_k is None or len(sb.cells) < 2:
        return None, f"{name}: one draft length measured, nothing to rank; the model stands"
    best = "off" if sb.best_k == 0 else f"k={sb.best_k}"
    model_k = live.advised_k if live is not None else None
    if model_k is None:
        return sb.best_k, f"{name}: measured best {best} (no live advice at this batch)"
    if model_k == sb.best_k or model_k in sb.within_noise:
        return (
            model_k,
            f"{name}: the sweep agrees with the model's k={model_k} (measured best {best})",
        )
    return sb.best_k, f"{name}: measured best {best} replaces the model's k={model_k}"


def merge_sweep(advice: Advice, s: Sweep) -> SweptAdvice:
    """``advice`` with the measurements of ``s`` in place of the model where they rank."""
    live = {b.batch: b for b in advice.bins}
    points = []
    for sb in s.batches:
        for c in sb.cells:
            if c.k is None:
                continue
            predicted, modelled = _prediction(live.get(sb.batch), c.k)
            points.append(MeasuredPoint(sb.batch, c.k, c.tok_s, c.name, predicted, modelled))
    chosen: dict[int, int] = {b.batch: b.advised_k for b in advice.bins if b.advised_k is not None}
    changes = []
    for sb in s.batches:
        k, line = _measured_k(sb, live.get(sb.batch))
        changes.append(line)
        if k is not None:
            chosen[sb.batch] = k
    bins = tuple(
        replace(b, advised_k=chosen[b.batch]) if b.batch in chosen else b for b in advice.bins
    )
    merged = replace(advice, bins=bins)
    if advice.k_running is not None and chosen:
        per_batch = sorted(chosen.items())
        main = advice.main_batch if advice.main_batch in chosen else per_batch[0][0]
        text = engine_setting(advice.dialect, advice.k_running, per_batch, main, advice.syntax)
        merged = replace(merged, recommendation=text, main_batch=main)
    return SweptAdvice(merged, s, tuple(points), tuple(changes))


def _est(e: Estimate | None) -> str:
    return "-" if e is None else f"{e.value:.0f} [{e.low:.0f}, {e.high:.0f}]"


def _summary(t: Summary) -> str:
    if t.mean is None:
        return "?"
    if t.ci_low is None or t.ci_high is None:
        return f"{t.mean:.0f}"
    return f"{t.mean:.0f} [{t.ci_low:.0f}, {t.ci_high:.0f}]"


def measured_lines(swept: SweptAdvice) -> list[str]:
    """The measured points beside the predicted ones, then what the sweep did to the advice."""
    out = [
        "the sweep beside the live prediction, tok/s",
        f"  {'batch':>5}  {'k':>2}  {'predicted (live)':>24}  {'measured (sweep)':>18}  snapshot",
    ]
    for p in swept.points:
        how = "" if p.modelled is None else (" model" if p.modelled else " obs. ")
        how = " plain" if p.k == 0 and p.predicted is not None else how
        pred = _est(p.predicted) + how
        out.append(f"  {p.batch:>5}  {p.k:>2}  {pred:>24}  {_summary(p.measured):>18}  {p.name}")
    out.append(f"  ({MEASURED_TOK_S}; predicted: decode steps only)")
    out.extend(swept.changes)
    out.extend(
        f"{c.name}: left out of the sweep, {c.reason}" for c in swept.sweep.cells if c.reason
    )
    return out


__all__ = ["MEASURED_TOK_S", "MeasuredPoint", "SweptAdvice", "measured_lines", "merge_sweep"]
