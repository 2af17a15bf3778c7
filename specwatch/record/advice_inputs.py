"""What ``specwatch advise`` reads from files: a recording's windows (whole, or ``FILE@FROM/TO``)
and the plain-decoding baseline (a recording or snapshot of the same server without
speculation; a flat step time is :func:`specwatch.core.draft_advisor.flat_baseline`).

The advisor cannot observe plain decoding on a server that speculates, so a baseline that
speculates is refused: its step times are verify steps, and the gain against them would be
the gain of one speculative setting over another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specwatch.core.acceptance import drafts_histogram
from specwatch.core.draft_advisor import PlainBaseline
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.core.step_cost import MIN_WINDOWS, plain_steps
from specwatch.record.compare_range import parse_range_spec
from specwatch.record.reader import Reader, RecordingError
from specwatch.record.timespec import parse_time
from specwatch.session import events as ev


class BaselineError(ValueError):
    """The baseline cannot be used (one line, shown as it is)."""


@dataclass(frozen=True, slots=True)
class RecordedWindows:
    """Server 0's windows of a recording (or of a range of it), and what detection said."""

    label: str
    info: ServerInfo | None
    windows: tuple[MetricsWindow, ...]
    drafts_histograms: tuple[tuple[float, ...], ...] = ()
    """The accepted-drafts histograms of the benchmark runs recorded in the range (SGLang's
    per-request ``spec_correct_drafts_histogram``, the first stream of each run)."""
    argv: tuple[str, ...] = ()
    """Server 0's command line as its recorded identity says (empty: not recorded)."""


def is_snapshot(text: str) -> bool:
    """A benchmark snapshot's path (JSON), not a recording."""
    return text.lower().endswith(".json")


def recorded_windows(text: str) -> RecordedWindows:
    """The windows of ``FILE`` or ``FILE@FROM/TO`` (times as ``specwatch compare`` takes them).

    Raises:
        RecordingError: Unreadable file, bad times or an empty recording (one line).
    """
    spec = parse_range_spec(text)
    path = Path(text) if spec is None or Path(text).exists() else spec.path
    with Reader(path) as reader:
        span = reader.span()
        if span is None:
            raise RecordingError(f"{path}: the recording is empty")
        t0, t1 = span
        label = path.name
        if spec is not None and path == spec.path:
            end_wall = reader.wall(span[1])
            try:
                start_wall = reader.wall(span[0])
                t0 = reader.session_t(parse_time(spec.start, end_wall, start_wall=start_wall))
                t1 = reader.session_t(parse_time(spec.end, end_wall, start_wall=start_wall))
            except ValueError as e:
                raise RecordingError(f"{text}: {e}") from None
            if t1 <= t0:
                raise RecordingError(f"{text}: the range ends before it starts")
            label = f"{path.name}@{spec.start}/{spec.end}"
        ready = reader.latest_before("ServerReady", t0, server=0)
        info = (
            ready.event.info
            if ready is not None and isinstance(ready.event, ev.ServerReady)
            else None
        )
        known = reader.latest_before("ServerIdentified", t0, server=0)
        argv = (
            known.event.identity.cmdline
            if known is not None and isinstance(known.event, ev.ServerIdentified)
            else ()
        )
        windows: list[MetricsWindow] = []
        histograms: list[tuple[float, ...]] = []
        for rec in reader.events(t0, t1):
            event = rec.event
            if isinstance(event, ev.ServerReady) and event.server == 0:
                info = event.info
            elif isinstance(event, ev.ServerIdentified) and event.server == 0:
                argv = event.identity.cmdline
            elif rec.t >= t0 and isinstance(event, ev.BenchFinished) and event.result is not None:
                histograms += (
                    h for r in event.result.runs if (h := drafts_histogram(r.server_stats))
                )
            elif (
                rec.t >= t0
                and isinstance(event, ev.MetricsScraped)
                and event.server == 0
                and event.window.dt > 0
            ):
                windows.append(event.window)
    return RecordedWindows(label, info, tuple(windows), tuple(histograms), argv)


def baseline_from_file(text: str) -> PlainBaseline:
    """Plain step time by batch from a snapshot (its concurrency) or a recording (its bins).

    Raises:
        BaselineError: Unreadable, speculating, or without a step time.
    """
    if is_snapshot(text):
        return _snapshot_baseline(text)
    try:
        rec = recorded_windows(text)
    except RecordingError as e:
        raise BaselineError(str(e)) from None
    _refuse_speculating(rec.label, rec.info)
    steps = plain_steps(rec.windows)
    if not steps:
        raise BaselineError(
            f"{rec.label}: no running batch held for {MIN_WINDOWS} windows with a step time"
        )
    return PlainBaseline(steps, f"{rec.label} (recorded without speculation)")


def _snapshot_baseline(text: str) -> PlainBaseline:
    from specwatch.bench.snapshot import SnapshotError, load_snapshot

    try:
        snap = load_snapshot(text)
    except SnapshotError as e:
        raise BaselineError(str(e)) from None
    name = Path(text).name
    spec = snap.server.speculative
    if spec.enabled:
        k = spec.num_draft_tokens
        raise BaselineError(
            f"{name}: the server speculated (draft tokens {k if k is not None else '?'}); "
            "a plain baseline is the same server without speculation"
        )
    step = snap.overall.step_latency_s.mean
    batch = snap.config.get("concurrency")
    if step is None or not math.isfinite(step) or step <= 0 or not isinstance(batch, int | float):
        raise BaselineError(f"{name}: no step latency at a known concurrency")
    return PlainBaseline({max(1, round(batch)): step}, f"{name} (benchmark without speculation)")


def _refuse_speculating(label: str, info: ServerInfo | None) -> None:
    if info is not None and info.spec.enabled:
        k = info.spec.num_draft_tokens
        raise BaselineError(
            f"{label}: the server speculated (draft tokens {k if k is not None else '?'}); "
            "a plain baseline is the same server without speculation"
        )


__all__ = [
    "BaselineError",
    "RecordedWindows",
    "baseline_from_file",
    "is_snapshot",
    "recorded_windows",
]
