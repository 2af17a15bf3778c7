"""A recording as a tidy time series: one row per (time, source, server or GPU, field, value).

Streamed row by row, so a day-long recording exports in constant memory. The time is ISO 8601
with the zone offset; ``source`` is ``gpu``, ``server``, ``energy`` (each window's energy per
token, as the GPU pane shows it), ``goodput`` (each window's requests within the SLO),
``verdict`` or ``bench``; ``subject``
is the GPU index or the server's address. A list-valued figure (per-position acceptance) is one
row per element, its field named ``name.position``; a benchmark's runs are rows at each run's
end, their fields ``run_...`` (docs/record.md lists the fields). Its progress and throughput go
to stderr (:class:`ExportProgress`).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import TextIO, TypeVar

import orjson

from specwatch.bench.progress_line import ProgressLine
from specwatch.core.energy import Energy, PowerLog
from specwatch.core.goodput import DEFAULT_SLO, HistogramGoodput, Slo, histogram_goodput
from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.outcomes import CAUSES
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import MetricsWindow, SpecConfig
from specwatch.record.reader import Reader
from specwatch.record.store import local_iso
from specwatch.session import events as ev

COLUMNS = ("time", "source", "subject", "field", "value")


NUMBER_TYPES = frozenset({"int", "float", "int | None", "float | None"})
"""The annotations of a number field (the modules annotate lazily: the types are strings)."""


def _numbers(cls: type, *skip: str) -> tuple[str, ...]:
    """The number fields of a sample dataclass, in their order, less ``skip``."""
    fields = dataclasses.fields(cls)
    return tuple(f.name for f in fields if f.type in NUMBER_TYPES and f.name not in skip)


GPU_FIELDS = _numbers(GpuSample, "index", "t")
WINDOW_FIELDS = _numbers(MetricsWindow, "t", "dt")
STATIC_FIELDS = _numbers(GpuStatic, "index")

Value = float | int | str | None
Row = tuple[str, str, str, str, Value]

RUN_FIELDS = (
    "completion_tokens",
    "prompt_tokens",
    "wall_s",
    "decode_tok_s",
    "ttft_s",
    "step_latency_mean_s",
    "accept_length",
    "draft_acceptance_rate",
)
"""A measured run's figures exported beside its tok/s (``run_`` + the name)."""
TEXT_LIMIT = 200


def tidy_rows(
    reader: Reader,
    wall0: float | None = None,
    wall1: float | None = None,
    slo: Slo = DEFAULT_SLO,
) -> Iterator[Row]:
    """Rows of the events between Unix seconds ``wall0`` and ``wall1`` (both included);
    goodput rows against ``slo``."""
    servers = _servers(reader)
    t0 = None if wall0 is None else reader.session_t(wall0)
    t1 = None if wall1 is None else reader.session_t(wall1)
    zone = dt.datetime.now().astimezone().tzinfo
    power = PowerLog()
    spec: dict[int, SpecConfig | None] = {}
    for rec in reader.events(t0, t1):
        when = local_iso(rec.wall, zone)
        server = servers.get(rec.server, str(rec.server))
        e = rec.event
        if isinstance(e, ev.BenchFinished):
            yield from _bench_rows(when, server, e, zone)
            continue
        yield from _event_rows(when, server, e)
        if isinstance(e, ev.GpuTicked):
            power.add(e.tick)
        elif isinstance(e, ev.ServerReady):
            spec[rec.server] = e.info.spec
        elif isinstance(e, ev.MetricsScraped) and e.window.dt > 0:
            yield from _energy_rows(
                when, server, power.energy(e.window, None, spec.get(rec.server))
            )
            if e.window.latency_cdf:
                yield from _goodput_rows(when, server, histogram_goodput(e.window.latency_cdf, slo))


def _servers(reader: Reader) -> dict[int, str]:
    try:
        urls = orjson.loads(reader.meta.get("servers", "[]"))
    except orjson.JSONDecodeError:
        urls = []
    if not isinstance(urls, list):
        return {}
    return {i: sanitize_line(str(u), 200) for i, u in enumerate(urls)}


def _event_rows(when: str, server: str, e: ev.SessionEvent) -> Iterator[Row]:
    if isinstance(e, ev.GpuTicked):
        for s in e.tick.samples:
            gpu = str(s.index)
            if s.lost:
                yield when, "gpu", gpu, "lost", 1
            for name in GPU_FIELDS:
                v = getattr(s, name)
                if v is not None:
                    yield when, "gpu", gpu, name, v
    elif isinstance(e, ev.MetricsScraped):
        w = e.window
        for name in WINDOW_FIELDS:
            v = getattr(w, name)
            if v is not None:
                yield when, "server", server, name, v
        for i, rate in enumerate(w.per_position_acceptance or ()):
            yield when, "server", server, f"position_acceptance_rate.{i}", rate
        if w.restarted:
            yield when, "server", server, "restarted", 1
    elif isinstance(e, ev.GpuInventoryChanged):
        for g in e.inventory.gpus:
            for name in STATIC_FIELDS:
                v = getattr(g, name)
                if v is not None:
                    yield when, "gpu", str(g.index), name, v
    elif isinstance(e, ev.ServerReady):
        yield when, "server", server, "state", "ready"
    elif isinstance(e, ev.ServerWaiting):
        yield when, "server", server, "state", sanitize_line(e.state, 40)
    elif isinstance(e, ev.ServerLost):
        yield when, "server", server, "state", "lost"
    elif isinstance(e, ev.BenchProgress):
        if e.tok_s is not None:
            yield when, "bench", server, "run_tok_s", e.tok_s
        yield when, "bench", server, "event", sanitize_line(e.kind, 40)
    elif isinstance(e, ev.VerdictChanged):
        yield from _verdict_rows(when, server, e)


def _energy_rows(when: str, server: str, e: Energy) -> Iterator[Row]:
    """A window's energy per token (the live GPU pane's figure), where it is known."""
    figures: tuple[tuple[str, Value], ...] = (
        ("tokens_per_joule", e.tokens_per_joule),
        ("joules_per_token", e.joules_per_token),
        ("gpu_power_w", e.power_w),
        ("rejected_draft_share", e.rejected_share),
    )
    for name, v in figures:
        if v is not None:
            yield when, "energy", server, name, v


def _goodput_rows(when: str, server: str, good: HistogramGoodput) -> Iterator[Row]:
    """A window's share of requests within each objective: ``low`` and ``high`` (equal at a
    histogram bound), and the requests it counts."""
    for key, limit, share in (
        ("ttft", good.slo.ttft_s, good.ttft),
        ("tpot", good.slo.tpot_s, good.tpot),
    ):
        if limit is None or share is None:
            continue
        yield when, "goodput", server, f"{key}_slo_s", limit
        yield when, "goodput", server, f"{key}_share_low", share.low
        yield when, "goodput", server, f"{key}_share_high", share.high
        yield when, "goodput", server, f"{key}_requests", share.requests


def _verdict_rows(when: str, server: str, e: ev.VerdictChanged) -> Iterator[Row]:
    """The verdict as it changed: its phase and cause, the figures it judged, its first reason."""
    state = e.state
    yield when, "verdict", server, "phase", sanitize_line(state.phase, 40)
    yield when, "verdict", server, "cause", CAUSES.get(state.outcome, "not_judged")
    ref = state.reference
    if ref is not None:
        yield when, "verdict", server, "reference", sanitize_line(ref.label, TEXT_LIMIT)
    figures: list[tuple[str, Value]] = [
        ("tok_s_reference", ref.figures.mean_tok_s if ref is not None else None),
        ("tok_s_current", state.current.mean_tok_s if state.current is not None else None),
    ]
    j = state.judgement
    if j is not None:
        figures += [
            ("change", j.change),
            ("change_low", j.change_low),
            ("change_high", j.change_high),
            ("clock_predicted_ratio", j.expected_ratio),
            ("reason", sanitize_line(j.reasons[0], TEXT_LIMIT) if j.reasons else None),
        ]
    elif state.detail:
        figures.append(("detail", sanitize_line(state.detail, TEXT_LIMIT)))
    for name, v in figures:
        if v is not None:
            yield when, "verdict", server, name, v


def _bench_rows(
    when: str, server: str, e: ev.BenchFinished, zone: dt.tzinfo | None
) -> Iterator[Row]:
    """A benchmark's end (its outcome, mean tok/s, snapshot) and each measured run at its end."""
    yield when, "bench", server, "outcome", sanitize_line(e.outcome, 40)
    result = e.result
    if result is not None:
        yield when, "bench", server, "runs", len(result.runs)
        mean = result.overall.tok_s.mean
        if mean is not None:
            yield when, "bench", server, "mean_tok_s", mean
        for run in result.runs:
            at = _iso_or(result.started_at + run.t_end, zone, when)
            yield at, "bench", server, "run", run.index
            for name in RUN_FIELDS:
                v = getattr(run, name)
                if v is not None:
                    yield at, "bench", server, f"run_{name}", v
            if run.error:
                yield at, "bench", server, "run_error", sanitize_line(run.error, TEXT_LIMIT)
    if e.snapshot_path is not None:
        yield when, "bench", server, "snapshot", sanitize_line(str(e.snapshot_path), TEXT_LIMIT)


def _iso_or(wall: float, zone: dt.tzinfo | None, fallback: str) -> str:
    """``wall`` as ISO 8601, or ``fallback`` where no clock can show it (a damaged recording)."""
    try:
        return local_iso(wall, zone)
    except (OverflowError, OSError, ValueError):
        return fallback


def write_csv(rows: Iterator[Row], out: TextIO) -> int:
    """Write ``rows`` as CSV with a header; the number of rows written."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    n = 0
    for row in rows:
        writer.writerow(row)
        n += 1
    return n


def write_json_lines(rows: Iterator[Row], out: TextIO) -> int:
    """Write ``rows`` as JSON Lines (``pandas.read_json(f, lines=True)``); rows written."""
    n = 0
    for row in rows:
        out.write(orjson.dumps(dict(zip(COLUMNS, row, strict=True))).decode() + "\n")
        n += 1
    return n


# --- progress and throughput on stderr: a terminal redraws one line in place; an export that
# took a while ends with one line saying what it wrote and how fast, so it is never silent ---

REPORT_AFTER_S = 1.0
"""An export that took at least this long says its throughput when it ends."""
_EVERY_ROWS = 2000
_R = TypeVar("_R")


class CountingWriter:
    """A text stream that counts the characters written through it (bytes, for ASCII)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


class ExportProgress:
    """Watches an export of ``reader``'s rows ``span`` (first and last id) into ``written``.

    Args:
        err: Where the progress goes (stderr).
        reader: The recording being read (its :attr:`~Reader.position` is the progress).
        span: The first and last row ids of the range, ``None`` when it is empty.
        written: The output, counted.
        live: Draw in place; default: when ``err`` is a terminal.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        err: TextIO,
        reader: Reader,
        span: tuple[int, int] | None,
        written: CountingWriter,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.line = ProgressLine(err, live=live, clock=clock)
        self.err = err
        self.reader = reader
        self.span = span
        self.written = written
        self.clock = clock
        self.started = clock()
        self.rows = 0

    def watch(self, rows: Iterator[_R]) -> Iterator[_R]:
        """``rows`` unchanged, counted, with the line redrawn now and then."""
        for row in rows:
            self.rows += 1
            if self.rows % _EVERY_ROWS == 0:
                self.line.show(self._text())
            yield row

    def finish(self) -> None:
        """Clear the line; say the throughput when the export took a while or drew the line."""
        drawn = self.line.drawn
        self.line.clear()
        seconds = self.clock() - self.started
        if seconds < REPORT_AFTER_S and not drawn:
            return
        mb = self.written.chars / 1e6
        self.err.write(
            f"specwatch export: {self.rows:,} rows, {mb:,.1f} MB in {seconds:,.1f} s "
            f"({mb / seconds:,.1f} MB/s, {self.rows / seconds:,.0f} rows/s)\n"
        )
        self.err.flush()

    def _text(self) -> str:
        seconds = max(self.clock() - self.started, 1e-9)
        mb = self.written.chars / 1e6
        share = ""
        if self.span is not None and self.span[1] > self.span[0]:
            lo, hi = self.span
            done = min(1.0, max(0.0, (self.reader.position - lo) / (hi - lo)))
            share = f"{done:.0%} · "
        return f"export: {share}{self.rows:,} rows · {mb:,.1f} MB · {mb / seconds:,.1f} MB/s"


__all__ = [
    "COLUMNS",
    "GPU_FIELDS",
    "REPORT_AFTER_S",
    "RUN_FIELDS",
    "STATIC_FIELDS",
    "WINDOW_FIELDS",
    "CountingWriter",
    "ExportProgress",
    "Row",
    "tidy_rows",
    "write_csv",
    "write_json_lines",
]
