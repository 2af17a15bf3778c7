"""``specwatch advise SNAP.json ...``: the measured table of a draft-length sweep, and its
ranking where the GPUs were alike (:mod:`specwatch.core.draft_sweep`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from specwatch.bench.report import safe, safe_lines
from specwatch.bench.snapshot import SnapshotError, load_snapshot
from specwatch.core.draft_sweep import Sweep, sweep, sweep_lines
from specwatch.core.snapshot_records import Snapshot

EXIT_RANKED, EXIT_NOT_RANKED, EXIT_USAGE = 0, 1, 2


def sweep_json(s: Sweep) -> dict[str, Any]:
    """The sweep as plain JSON values."""
    return {
        "draft_lengths": list(s.draft_lengths),
        "cells": [
            {
                "name": c.name,
                "k": c.k,
                "batch": c.batch,
                "tok_s": c.tok_s.mean,
                "tok_s_ci": [c.tok_s.ci_low, c.tok_s.ci_high],
                "runs": c.tok_s.n,
                "slowest_sm_clock_mhz": c.figures.slowest_sm_clock_mhz,
                "clock_reasons": sorted(c.figures.clock_reasons),
                "left_out": c.reason,
            }
            for c in s.cells
        ],
        "batches": [
            {
                "batch": b.batch,
                "best_k": b.best_k,
                "within_noise": list(b.within_noise),
                "cannot_rank": list(b.refusals),
            }
            for b in s.batches
        ],
    }


def load_sweep(paths: list[str]) -> Sweep:
    """The sweep of the snapshots at ``paths`` (``ValueError``: one is not a readable
    snapshot)."""
    snaps: list[tuple[str, Snapshot]] = []
    for path in paths:
        try:
            snaps.append((Path(path).name, load_snapshot(path)))
        except SnapshotError as e:
            raise ValueError(safe(e)) from None
    return sweep(snaps)


def run_sweep(paths: list[str], as_json: bool, out: TextIO, err: TextIO) -> int:
    """Rank the snapshots; 0 when every batch with two draft lengths was ranked, 1 when one
    could not be (the reason is printed), 2 when a file is not a readable snapshot."""
    try:
        s = load_sweep(paths)
    except ValueError as e:
        print(f"specwatch advise: {e}", file=err)
        return EXIT_USAGE
    if as_json:
        import orjson

        out.write(orjson.dumps(sweep_json(s), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write("\n".join(safe_lines(sweep_lines(s))) + "\n")
    out.flush()
    unranked = any(b.refusals for b in s.batches) or not s.batches
    return EXIT_NOT_RANKED if unranked else EXIT_RANKED


__all__ = ["load_sweep", "run_sweep", "sweep_json"]
