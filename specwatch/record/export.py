"""A recording as a tidy time series: one row per (time, source, server or GPU, field, value).

Streamed row by row, so a day-long recording exports in constant memory. The time is ISO 8601
with the zone offset; ``source`` is ``gpu``, ``server`` or ``bench``; ``subject`` is the GPU
index or the server's address.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import TextIO

import orjson

from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import MetricsWindow
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


def tidy_rows(
    reader: Reader, wall0: float | None = None, wall1: float | None = None
) -> Iterator[Row]:
    """Rows of the events between Unix seconds ``wall0`` and ``wall1`` (both included)."""
    servers = _servers(reader)
    t0 = None if wall0 is None else reader.session_t(wall0)
    t1 = None if wall1 is None else reader.session_t(wall1)
    zone = dt.datetime.now().astimezone().tzinfo
    for rec in reader.events(t0, t1):
        when = local_iso(rec.wall, zone)
        server = servers.get(rec.server, str(rec.server))
        yield from _event_rows(when, server, rec.event)


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


__all__ = [
    "COLUMNS",
    "GPU_FIELDS",
    "STATIC_FIELDS",
    "WINDOW_FIELDS",
    "Row",
    "tidy_rows",
    "write_csv",
    "write_json_lines",
]
