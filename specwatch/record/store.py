"""The recording file: one SQLite database (WAL) with a ``meta`` table and an ``events`` table.

``events`` holds one row per session event: the session-clock time ``t``, the wall time
``wall`` (Unix seconds), the event's ``kind`` and ``server``, and its payload (orjson bytes,
zlib-compressed when ``z`` is 1). Two indexes make a time range cost what is in it: ``t``
(the rows of a range) and ``(kind, t)`` (the state in force when it starts). ``meta`` holds
the format version and where the recording came from; never a credential.

A recording is data, never code: a file is accepted only when every object in its schema is one
that :data:`SCHEMA` creates (a trigger would run on every insert, a view on every read), and a
file that is not is refused before anything is written into it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from specwatch.core.sanitize import sanitize_line

FORMAT_VERSION = 1
"""Bumped whenever a reader of the previous version could misread a new file."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    t REAL NOT NULL,
    wall REAL NOT NULL,
    kind TEXT NOT NULL,
    server INTEGER NOT NULL,
    z INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_t ON events (t);
CREATE INDEX IF NOT EXISTS events_kind_t ON events (kind, t);
"""

REQUIRED_TABLES = ("meta", "events")
"""Tables a recording cannot be read without (an index missing only slows a read: the first
files had no ``events_kind_t``)."""
WALL_LIMIT = 6e10
"""Largest Unix seconds (either side of 1970) a recording's time may stand for: about 1900 years,
well inside what :mod:`datetime` can show in any zone (a stored 1e300 or -1e12 is refused where
it is read, not met as an ``OverflowError`` when it is shown)."""

STATE_KINDS = (
    "GpuInventoryChanged",
    "ServerReady",
    "ServerWaiting",
    "ServerLost",
    "VerdictChanged",
)
"""Events that describe a state lasting until the next one; retention keeps the latest of each
(per server) so that what remains still replays with its GPUs, server and verdict known."""


@functools.cache
def _expected_objects() -> dict[str, tuple[str, str, str]]:
    """Each schema object :data:`SCHEMA` creates, by name: its type, table and SQL (as SQLite
    stores it, whitespace collapsed)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    finally:
        conn.close()
    return {str(n): (str(ty), str(tbl), _collapse(sql)) for ty, n, tbl, sql in rows}


def _collapse(sql: object) -> str:
    return " ".join(str(sql).split()) if sql is not None else ""


def schema_problem(conn: sqlite3.Connection, *, complete: bool = True) -> str | None:
    """What in the open database is not a specwatch recording's schema (one phrase); ``None``
    when every object is one :data:`SCHEMA` creates, exactly as it creates it, and (with
    ``complete``) the tables of :data:`REQUIRED_TABLES` are there.

    Raises:
        sqlite3.Error: The schema cannot be read (not a database).
    """
    expected = _expected_objects()
    # sqlite_master is read as data: nothing in it is run by this query
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid LIMIT 64"
    ).fetchall()
    seen: set[str] = set()
    for ty, name, tbl, sql in rows:
        shown = sanitize_line(f"{ty} {name}", 80)
        want = expected.get(str(name))
        if want is None:
            return f"it holds {shown}, which no recording has"
        if (str(ty), str(tbl), _collapse(sql)) != want:
            return f"its {shown} is not the recording's {want[0]} {name}"
        seen.add(str(name))
    missing = [t for t in REQUIRED_TABLES if t not in seen]
    if complete and missing:
        return f"no table {missing[0]}"
    return None


def open_for_writing(path: Path, meta: Mapping[str, str]) -> sqlite3.Connection:
    """Create (or reopen and append to) a recording; writes ``meta`` on creation.

    Raises:
        sqlite3.Error: Not a database, or not writable.
        ValueError: An existing recording of another format version, or a file whose schema
            is not a recording's (refused before anything is written).
    """
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        problem = schema_problem(conn, complete=False)
        if problem is not None:
            raise ValueError(
                f"{path}: not a specwatch recording ({problem}): nothing written; record into "
                "a new file"
            )
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed batch survives a killed process (not a power cut).
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key='format_version'").fetchone()
        if row is not None and row[0] != str(FORMAT_VERSION):
            raise ValueError(
                f"{path}: a recording of format {row[0]}; this specwatch writes format "
                f"{FORMAT_VERSION}: record into a new file"
            )
        had = conn.execute("SELECT value FROM meta WHERE key='servers'").fetchone()
        if row is not None and had is not None and had[0] != meta.get("servers", had[0]):
            # its events would be exported and replayed under the first session's addresses
            raise ValueError(
                f"{path}: a recording of {sanitize_line(str(had[0]), 200)}, not of this "
                "session's servers: record into a new file"
            )
        if row is None:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", sorted(meta.items())
            )
            conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def lock_recording(path: Path) -> int:
    """Take the one-writer lock of ``path`` (created if missing); returns the descriptor that
    holds it (close it to release). Readers (replay, export) do not take it.

    Raises:
        ValueError: Another specwatch is recording into ``path``.
        OSError: ``path`` cannot be opened.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ValueError(
            f"{path}: another specwatch is recording into it; record into another file"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def local_iso(wall: float, zone: dt.tzinfo | None = None) -> str:
    """Unix seconds as ISO 8601 with the zone offset (the local zone by default)."""
    moment = dt.datetime.fromtimestamp(wall, tz=dt.UTC)
    return moment.astimezone(zone).isoformat(timespec="milliseconds")


def local_label(wall: float, zone: dt.tzinfo | None = None) -> str:
    """Unix seconds as ``2026-12-01 14:03:12 CET`` (date, time and zone, for the status line)."""
    moment = dt.datetime.fromtimestamp(wall, tz=dt.UTC).astimezone(zone)
    return moment.strftime("%Y-%m-%d %H:%M:%S ") + (moment.tzname() or moment.strftime("%z"))


__all__ = [
    "FORMAT_VERSION",
    "REQUIRED_TABLES",
    "SCHEMA",
    "STATE_KINDS",
    "WALL_LIMIT",
    "local_iso",
    "local_label",
    "lock_recording",
    "open_for_writing",
    "schema_problem",
]
