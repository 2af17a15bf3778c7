"""A draft-length sweep from benchmark snapshots: measured tok/s by (draft tokens, batch).

Each snapshot is one cell: its draft tokens from the speculative config detected when it ran
(0 when speculation was off), its batch from its concurrency, its per-run tok/s. Where the
sweep has a cell the table is measured, and no model stands in for it.

A k sweep is only as good as the GPUs were alike: the story's 89 vs 82.7 tok/s was a hot
board, not the code. Every pair of cells at one batch is held to the compare judge's terms
(:mod:`specwatch.core.judge` on :func:`~specwatch.core.snapshot_figures.figures`): the slowest
GPU's SM clock within :data:`CLOCK_TOLERANCE`, no throttle reason on one side only, and the load
the same. A batch with a pair that fails is not ranked, and says why; between cells whose tok/s
differ within noise the ranking says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specwatch.core.judge import MIN_CHANGE, Figures, judge, load_changes
from specwatch.core.snapshot_figures import figures
from specwatch.core.snapshot_records import Snapshot
from specwatch.core.stats import Summary, summarize

CLOCK_TOLERANCE = MIN_CHANGE
"""Largest relative difference of the slowest GPU's SM clock between two cells ranked together."""


@dataclass(frozen=True, slots=True)
class SweepCell:
    """One snapshot's place in the sweep."""

    name: str
    k: int | None
    """Draft tokens (0: speculation off); ``None`` when the snapshot does not say."""
    batch: int | None
    """Concurrency of its runs."""
    tok_s: Summary
    figures: Figures
    reason: str | None = None
    """Why the cell is left out of the table."""


@dataclass(frozen=True, slots=True)
class SweepBatch:
    """The cells at one batch, ranked when their GPU state allows it."""

    batch: int
    cells: tuple[SweepCell, ...]
    """By draft tokens."""
    best_k: int | None = None
    """The draft length with the highest measured tok/s; ``None`` when not ranked."""
    within_noise: tuple[int, ...] = ()
    """Other draft lengths whose tok/s the judge cannot tell from the best one's."""
    refusals: tuple[str, ...] = ()
    """Why the batch cannot be ranked: one line per pair whose GPU state or load differs."""


@dataclass(frozen=True, slots=True)
class Sweep:
    """The measured table and its ranking."""

    cells: tuple[SweepCell, ...]
    batches: tuple[SweepBatch, ...]
    draft_lengths: tuple[int, ...]


def cell_of(name: str, snap: Snapshot) -> SweepCell:
    """The sweep cell of one snapshot (with a reason when it cannot be placed)."""
    spec = snap.server.speculative
    k: int | None = 0 if spec.enabled is False else spec.num_draft_tokens
    concurrency = snap.config.get("concurrency")
    batch = round(concurrency) if isinstance(concurrency, int | float) and concurrency > 0 else None
    reason = None
    if snap.finished_runs == 0:
        reason = "no finished run"
    elif k is None:
        reason = "its speculative config does not say how many draft tokens"
    elif batch is None:
        reason = "no concurrency recorded"
    return SweepCell(name, k, batch, summarize(snap.run_tok_s), figures(snap), reason)


def gpu_state_differs(a: SweepCell, b: SweepCell) -> str | None:
    """Why ``a`` and ``b`` cannot be ranked against each other; ``None`` when they can."""
    fa, fb = a.figures, b.figures
    for cell, f in ((a, fa), (b, fb)):
        if f.slowest_sm_clock_mhz is None:
            return f"GPU state unknown: {cell.name} has no SM clock readings"
    ca, cb = fa.slowest_sm_clock_mhz, fb.slowest_sm_clock_mhz
    assert ca is not None and cb is not None
    if abs(ca - cb) > CLOCK_TOLERANCE * max(ca, cb):
        return (
            f"the GPUs ran at different clocks: slowest SM clock {ca:.0f} MHz in {a.name}, "
            f"{cb:.0f} MHz in {b.name} (more than {CLOCK_TOLERANCE:.0%} apart)"
        )
    only_a, only_b = fa.clock_reasons - fb.clock_reasons, fb.clock_reasons - fa.clock_reasons
    for cell, only in ((a, only_a), (b, only_b)):
        if only:
            return f"throttle reasons only in {cell.name}: {', '.join(sorted(only))}"
    loads = load_changes(fa, fb)
    if loads:
        return f"load differs: {'; '.join(loads)}"
    return None


def _rank(batch: int, cells: Sequence[SweepCell]) -> SweepBatch:
    ordered = tuple(sorted(cells, key=lambda c: (c.k or 0, c.name)))
    refusals = tuple(
        f"k={a.k} ({a.name}) vs k={b.k} ({b.name}): {why}"
        for i, a in enumerate(ordered)
        for b in ordered[i + 1 :]
        if (why := gpu_state_differs(a, b)) is not None
    )
    if refusals or not ordered:
        return SweepBatch(batch, ordered, refusals=refusals)
    best = max(ordered, key=lambda c: c.tok_s.mean or 0.0)
    close = tuple(
        c.k
        for c in ordered
        if c is not best
        and c.k is not None
        and c.k != best.k
        and not judge(c.figures, best.figures).beyond_noise
    )
    return SweepBatch(batch, ordered, best_k=best.k, within_noise=close)


def sweep(snapshots: Sequence[tuple[str, Snapshot]]) -> Sweep:
    """The measured table of ``snapshots`` (name, snapshot) and each batch's ranking."""
    cells = tuple(cell_of(name, snap) for name, snap in snapshots)
    placed = [c for c in cells if c.reason is None and c.batch is not None]
    by_batch: dict[int, list[SweepCell]] = {}
    for c in placed:
        assert c.batch is not None
        by_batch.setdefault(c.batch, []).append(c)
    batches = tuple(_rank(b, by_batch[b]) for b in sorted(by_batch))
    ks = tuple(sorted({c.k for c in placed if c.k is not None}))
    return Sweep(cells, batches, ks)


def sweep_lines(s: Sweep) -> list[str]:
    """The sweep as plain lines: the table, then each batch's ranking or why it has none."""
    out = ["measured tok/s by draft tokens (k; 0 = off) and batch (concurrency)"]
    out.append("  batch  " + "".join(f"{f'k={k}':>12}" for k in s.draft_lengths))
    for b in s.batches:
        row = {c.k: c for c in b.cells}
        cols = "".join(f"{_tok(row[k].tok_s) if k in row else '-':>12}" for k in s.draft_lengths)
        out.append(f"  {b.batch:>5}  {cols}")
    for b in s.batches:
        if b.refusals:
            out.append(f"batch {b.batch}: cannot rank these draft lengths:")
            out.extend(f"  {r}" for r in b.refusals)
        elif len(b.cells) < 2:
            out.append(f"batch {b.batch}: one draft length measured, nothing to rank")
        else:
            best = "off" if b.best_k == 0 else f"k={b.best_k}"
            tie = (
                f" (within noise of k={', '.join(str(k) for k in b.within_noise)})"
                if b.within_noise
                else ""
            )
            out.append(f"batch {b.batch}: best measured {best}{tie}")
    out.extend(f"{c.name}: left out, {c.reason}" for c in s.cells if c.reason is not None)
    return out


def _tok(t: Summary) -> str:
    return "?" if t.mean is None else f"{t.mean:.1f}"


__all__ = [
    "CLOCK_TOLERANCE",
    "Sweep",
    "SweepBatch",
    "SweepCell",
    "cell_of",
    "gpu_state_differs",
    "sweep",
    "sweep_lines",
]
