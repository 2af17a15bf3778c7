"""The recording file: one SQLite database (WAL) with a ``meta`` table and an ``events`` table.

``events`` holds one row per session event: the session-clock time ``t``, the wall time
``wall`` (Unix seconds), the event's ``kind`` and ``server``, and its payload (orjson bytes,
zlib-compressed when ``z`` is 1). Two indexes make a time range cost what is in it: ``t``
(the rows of a range) and ``(kind, t)`` (the state in force when it starts). ``meta`` holds
the format version and where the recording came from; never a credential.
"""

from __future__ import annotations

import datetime as dt
import fcntl
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

STATE_KINDS = (
    "GpuInventoryChanged",
    "ServerReady",
    "ServerWaiting",
    "ServerLost",
    "VerdictChanged",
)
"""Events that describe a state lasting until the next one; retention keeps the latest of each
(per server) so that what remains still replays with its GPUs, server and verdict known."""


def open_for_writing(path: Path, meta: Mapping[str, str]) -> sqlite3.Connection:
    """Create (or reopen and append to) a recording; writes ``meta`` on creation.

    Raises:
        sqlite3.Error: Not a database, or not writable.
        ValueError: An existing recording of another format version.
    """
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
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
    "SCHEMA",
    "STATE_KINDS",
    "local_iso",
    "local_label",
    "lock_recording",
    "open_for_writing",
]
