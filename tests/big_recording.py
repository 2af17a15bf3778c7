"""A large recording written quickly: the rows of :func:`tests.record_world.story` are encoded
once as templates and inserted in bulk, with their times put in by substitution (a sentinel
time in the uncompressed payload), so a million rows take seconds, not the minutes a recorder
would need."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from specwatch.record.codec import encode
from specwatch.record.recorder import recording_meta
from specwatch.record.store import open_for_writing
from specwatch.session import events as ev
from specwatch.sources.http.endpoint import Endpoint
from tests.record_world import MAX_CLOCK, SECRET, WALL0, story, tick, window

_T = 7_777_777.0
"""A time no row has: every occurrence in a template payload is this row's time."""


def _template(event: ev.SessionEvent) -> tuple[str, bytes]:
    kind, data, packed = encode(event)
    if packed:
        import orjson

        from specwatch.core.values import to_jsonable

        data = orjson.dumps(to_jsonable(event))
    return kind, data


def write_big_recording(path: Path, seconds: int, drop_at: float | None = None) -> int:
    """A recording of ``seconds`` seconds of :func:`~tests.record_world.story` (a tick and a
    window each second; clocks sag from ``drop_at``); returns the rows written."""
    conn = open_for_writing(
        path, recording_meta([Endpoint("http://gpu-box:30000", SECRET)], WALL0, WALL0)
    )
    head = list(story(0))
    sag = float("inf") if drop_at is None else drop_at
    templates = {
        slow: (
            _template(ev.GpuTicked(tick(_T, 1600 if slow else MAX_CLOCK))),
            _template(ev.MetricsScraped(window(_T, 73.0 if slow else 90.0))),
        )
        for slow in (False, True)
    }
    marker = repr(_T).encode()
    wall_marker = repr(WALL0 + _T).encode()

    def rows() -> Iterator[tuple[float, float, str, int, int, bytes]]:
        for e in head:
            kind, data, packed = encode(e)
            yield 0.0, WALL0, kind, 0, int(packed), data
        for s in range(1, seconds + 1):
            t = float(s)
            at, wall = repr(t).encode(), repr(WALL0 + t).encode()
            for kind, data in templates[t >= sag]:
                body = data.replace(wall_marker, wall).replace(marker, at)
                yield t, WALL0 + t, kind, 0, 0, body

    conn.execute("BEGIN")
    cur = conn.executemany(
        "INSERT INTO events (t, wall, kind, server, z, data) VALUES (?, ?, ?, ?, ?, ?)", rows()
    )
    conn.execute("COMMIT")
    n = cur.rowcount
    conn.close()
    return n
