"""``specwatch advise``: which draft length pays, at which running batch.

``advise URL`` watches a live server passively (``/metrics`` only) for ``--seconds``;
``advise FILE[@FROM/TO]`` reads a recording; ``advise SNAP.json ...`` ranks benchmark snapshots
taken at different draft lengths (:func:`run_sweep`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from specwatch.commands.arguments import add_api_key, shared_help

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from specwatch.core.acceptance import AcceptanceCounts
    from specwatch.core.draft_advisor import PlainBaseline
    from specwatch.core.draft_sweep import Sweep
    from specwatch.core.server import MetricsWindow, ServerInfo
    from specwatch.core.snapshot_records import Snapshot
    from specwatch.session.advice_watch import Watched
    from specwatch.sources.http.endpoint import Endpoint

    Watch = Callable[[Endpoint, float, float], Coroutine[Any, Any, Watched]]

EXIT_ADVISED, EXIT_WITHHELD, EXIT_USAGE = 0, 1, 2
NO_BASELINE = (
    "no plain-decoding baseline: speculation's gain is measured against plain decoding of the "
    "same server at the same batch, which a speculating server never shows. Give --baseline "
    "FILE (a recording or benchmark snapshot of the same server without speculation) or "
    "--baseline-itl MS"
)


def add_advise_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch advise``."""
    p.add_argument(
        "source",
        nargs="+",
        metavar="URL|FILE",
        help="a live server (watched passively), a recording FILE or FILE@FROM/TO, or several "
        "benchmark snapshots SNAP.json taken at different draft lengths",
    )
    p.add_argument("--json", action="store_true", help="print the advice as JSON")
    p.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        metavar="N",
        help="live: seconds to watch /metrics (default: 60)",
    )
    p.add_argument(
        "--metrics-interval",
        "--interval",
        dest="interval",
        type=float,
        default=1.0,
        metavar="S",
        help=shared_help("--metrics-interval", 1),
    )
    base = p.add_mutually_exclusive_group()
    base.add_argument(
        "--baseline",
        metavar="FILE",
        default=None,
        help="plain step times: a recording (FILE[@FROM/TO]) or snapshot of the same server "
        "without speculation",
    )
    base.add_argument(
        "--baseline-itl",
        type=float,
        default=None,
        metavar="MS",
        help=shared_help("--baseline-itl"),
    )
    p.add_argument(
        "--draft-ms",
        type=float,
        default=None,
        metavar="MS",
        help="drafting cost per draft token, where known (e.g. the draft model's own step "
        "time); default: the verify is assumed to cost a plain step and the rest of the step "
        "to be drafting, linear in k",
    )
    p.add_argument(
        "--sweep",
        nargs="+",
        default=None,
        metavar="SNAP.json",
        help="benchmark snapshots of the same server at several draft lengths: shown beside "
        "the live prediction, and in place of the model at each batch they rank",
    )
    add_api_key(p)
    p.epilog = (
        "Nothing is sent to the model: a live server is only read (/metrics and detection). "
        "Exit status: 0 advice given (snapshots: every batch ranked), 1 withheld or not ranked "
        "(the reason is printed), 2 bad arguments or an unreadable file."
    )


def _is_file_source(text: str) -> bool:
    """A recording (existing, or named like one: a missing file is said as such, not dialled)."""
    from specwatch.record.compare_range import RECORDING_SUFFIXES, parse_range_spec

    spec = parse_range_spec(text)
    path = spec.path if spec is not None and not Path(text).exists() else Path(text)
    return path.is_file() or path.suffix.lower() in RECORDING_SUFFIXES


def run_advise(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    watch: Watch | None = None,
) -> int:
    """Run ``specwatch advise``; returns the exit status (see the epilog)."""
    out = stdout or sys.stdout or open(os.devnull, "w")  # noqa: SIM115
    err = stderr or sys.stderr or open(os.devnull, "w")  # noqa: SIM115
    from specwatch.record.advice_inputs import is_snapshot

    sources: list[str] = list(args.source)
    if len(sources) > 1 or is_snapshot(sources[0]):
        if not all(is_snapshot(s) for s in sources):
            print("specwatch advise: give one URL or recording, or only snapshots", file=err)
            return EXIT_USAGE

        return run_sweep(sources, args.json, out, err)
    try:
        measured = _sweep(getattr(args, "sweep", None))
        label, info, windows, requests, argv = _windows(sources[0], args, err, watch)
        plain = _baseline(args, windows)
        if args.draft_ms is not None and not args.draft_ms >= 0:
            raise ValueError("--draft-ms must be zero or more")
    except ValueError as e:
        print(f"specwatch advise: {e}", file=err)
        return EXIT_USAGE
    draft_s = None if args.draft_ms is None else args.draft_ms / 1000.0
    return _print_advice(
        label, info, windows, plain, draft_s, args.json, out, measured, requests, argv
    )


def _sweep(paths: list[str] | None) -> Sweep | None:
    """``--sweep``'s snapshots (``ValueError``: one is unreadable)."""
    if not paths:
        return None

    return load_sweep(paths)


def _windows(
    source: str, args: argparse.Namespace, err: TextIO, watch: Watch | None
) -> tuple[str, ServerInfo, tuple[MetricsWindow, ...], AcceptanceCounts | None, tuple[str, ...]]:
    """The windows to advise on, from a recording or a live watch (``ValueError``: why not),
    the per-position counts of the requests a recording's benchmark runs streamed, and the
    server's command line where known."""
    if _is_file_source(source):
        from specwatch.record.advice_inputs import recorded_windows
        from specwatch.record.reader import RecordingError

        try:
            rec = recorded_windows(source)
        except RecordingError as e:
            raise ValueError(str(e)) from None
        if rec.info is None:
            raise ValueError(f"{rec.label}: no server detection recorded (which dialect, which K)")
        from specwatch.core.acceptance import counts_from_histograms

        requests = counts_from_histograms(rec.drafts_histograms)
        return rec.label, rec.info, rec.windows, requests, rec.argv
    import asyncio
    import dataclasses

    from specwatch.sources.http.endpoint import parse_endpoint
    from specwatch.sources.http.server_errors import ServerError

    if not args.seconds > 0 or not args.interval > 0:
        raise ValueError("--seconds and --interval must be positive")
    endpoint = parse_endpoint(source, args.api_key)
    print(f"specwatch advise: watching {endpoint} for {args.seconds:g} s (/metrics only)", file=err)
    try:
        watched = asyncio.run((watch or _watch)(endpoint, args.seconds, args.interval))
    except ServerError as e:
        raise ValueError(str(e)) from None
    info = watched.info
    if info.routed and endpoint.model is None and info.model:
        # the router's first loaded model was watched: the advice names it, as the address
        # that watches it again
        endpoint = dataclasses.replace(endpoint, model=info.model)
        print(f"specwatch advise: {info.routed}", file=err)
    if why := info.counters_off:
        raise ValueError(f"{endpoint}: {why}: no acceptance counters to advise from")
    for line in sorted(set(watched.errors))[:3]:
        print(f"specwatch advise: scrape failed: {line}", file=err)
    return str(endpoint), info, watched.windows, None, watched.argv


async def _watch(endpoint: Endpoint, seconds: float, interval_s: float) -> Watched:
    from specwatch.session.advice_watch import watch_windows

    return await watch_windows(endpoint, seconds, interval_s)


def _baseline(args: argparse.Namespace, windows: tuple[MetricsWindow, ...]) -> PlainBaseline | None:
    from specwatch.core.draft_advisor import flat_baseline
    from specwatch.record.advice_inputs import baseline_from_file

    if args.baseline_itl is not None:
        if not args.baseline_itl > 0:
            raise ValueError("--baseline-itl must be positive")
        return flat_baseline(args.baseline_itl, windows)
    if args.baseline is not None:
        return baseline_from_file(args.baseline)
    return None


def _print_advice(
    label: str,
    info: ServerInfo,
    windows: tuple[MetricsWindow, ...],
    plain: PlainBaseline | None,
    draft_s: float | None,
    as_json: bool,
    out: TextIO,
    measured: Sweep | None = None,
    requests: AcceptanceCounts | None = None,
    argv: tuple[str, ...] = (),
) -> int:
    from specwatch.core.acceptance import windows_words
    from specwatch.core.advice_sweep import measured_lines, merge_sweep
    from specwatch.core.draft_advisor import advice_json, advice_lines, advise
    from specwatch.core.draft_syntax import engine_syntax
    from specwatch.core.values import to_jsonable

    syntax = engine_syntax(info, argv)
    advice = advise(windows, info, plain, draft_s, requests=requests, syntax=syntax)
    swept = merge_sweep(advice, measured) if measured is not None else None
    if swept is not None:
        advice = swept.advice
    withheld = NO_BASELINE if plain is None else None
    if as_json:
        import orjson

        doc: dict[str, Any] = {
            "source": label,
            "windows": len(windows),
            "withheld": withheld,
            "advice": advice_json(advice),
        }
        if swept is not None:
            doc["sweep"] = {
                "points": to_jsonable(swept.points),
                "changes": list(swept.changes),
            }
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        head = [f"{label}: {windows_words(len(windows))}"]
        if withheld is not None:
            head.append(f"advice withheld: {withheld}")
        tail = measured_lines(swept) if swept is not None else []
        out.write("\n".join([*head, *advice_lines(advice), *tail]) + "\n")
    out.flush()
    return EXIT_ADVISED if advice.recommendation is not None else EXIT_WITHHELD


# --- a draft-length sweep: the measured table, and its ranking where the GPUs were alike ---

EXIT_RANKED, EXIT_NOT_RANKED = 0, 1


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
    from specwatch.bench.report import safe
    from specwatch.bench.snapshot import SnapshotError, load_snapshot
    from specwatch.core.draft_sweep import sweep

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
    from specwatch.bench.report import safe_lines
    from specwatch.core.draft_sweep import sweep_lines

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


__all__ = [
    "NO_BASELINE",
    "add_advise_arguments",
    "load_sweep",
    "run_advise",
    "run_sweep",
    "sweep_json",
]
