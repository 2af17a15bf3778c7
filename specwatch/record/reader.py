"""Reading a recording back: its meta, and its events as the typed events the session emitted.

A file of a newer format is refused with one line. A truncated or corrupt file gives what can
be read: rows that fail to decode are skipped and counted, and where SQLite itself cannot go on,
reading stops and :attr:`Reader.stopped` says where.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from specwatch.core.sanitize import sanitize_line
from specwatch.record.codec import DecodeError, decode
from specwatch.record.store import FORMAT_VERSION, local_label
from specwatch.session.events import SessionEvent

CHUNK = 2000
"""Rows fetched per query (a corrupt page then costs at most the chunk it sits in)."""
_MAX_ID = 2**63 - 1


class RecordingError(Exception):
    """The file cannot be read as a recording (one line, shown as it is)."""


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One stored event with its row id and times."""

    id: int
    t: float
    """Session-clock seconds."""
    wall: float
    """Unix seconds."""
    kind: str
    server: int
    event: SessionEvent


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A row's id, time and kind, without its payload (what a replay seeks on)."""

    id: int
    t: float
    kind: str


class Reader:
    """An open recording.

    Raises:
        RecordingError: Missing, not a recording, or of a newer format.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise RecordingError(f"{self.path}: no such recording")
        try:
            self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
            except sqlite3.DatabaseError:
                # A truncated file is shorter than its header says; SQLite refuses it unless
                # told to read what is there (nothing is written: the connection is read-only).
                self._conn.execute("PRAGMA writable_schema=ON")
                rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.Error as e:
            raise RecordingError(
                f"{self.path}: not a specwatch recording ({sanitize_line(str(e))})"
            ) from None
        self.meta: dict[str, str] = {str(k): str(v) for k, v in rows}
        version = self.meta.get("format_version", "")
        if not (version.isascii() and version.isdigit()):  # "²".isdigit() too
            raise RecordingError(f"{self.path}: not a specwatch recording (no format version)")
        if int(version) > FORMAT_VERSION:
            by = sanitize_line(self.meta.get("specwatch_version", "?"), 40)
            raise RecordingError(
                f"{self.path}: recorded by specwatch {by} in format {version}; this specwatch "
                f"reads formats up to {FORMAT_VERSION}: upgrade specwatch to replay it"
            )
        self.offset = _float(self.meta.get("wall_offset"))
        self.skipped = 0
        """Rows that could not be decoded (skipped)."""
        self.stopped: str | None = None
        """Where reading had to stop, when the file is damaged (one line)."""
        self.position = 0
        """The id of the last row :meth:`events` read (progress through :meth:`id_span`)."""

    # --- what the file says -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The recorded server address (stored redacted; sanitised for display)."""
        return sanitize_line(self.meta.get("url", ""), 200)

    @property
    def started(self) -> str:
        """When the recording started, ISO 8601 with zone (sanitised)."""
        return sanitize_line(self.meta.get("started", "?"), 64)

    def wall(self, t: float) -> float:
        """Unix seconds of session time ``t``."""
        return t + self.offset

    def session_t(self, wall: float) -> float:
        """Session time of Unix seconds ``wall``."""
        return wall - self.offset

    def label(self, t: float) -> str:
        """Session time ``t`` as a local date, time and zone."""
        return local_label(self.wall(t))

    def span(self) -> tuple[float, float] | None:
        """The first and last session times recorded; ``None`` when empty or unreadable."""
        try:
            # text sorts after every number in SQLite: a damaged row's text time is left out
            row = self._conn.execute(
                "SELECT MIN(t), MAX(t) FROM events WHERE t BETWEEN -1e300 AND 1e300"
            ).fetchone()
        except sqlite3.Error as e:
            self._stop_at(None, e)
            index = self.index()
            return (min(e.t for e in index), max(e.t for e in index)) if index else None
        if row is None or row[0] is None:
            return None
        return float(row[0]), float(row[1])

    # --- events -----------------------------------------------------------------------------------

    def index(self) -> list[IndexEntry]:
        """Every readable row's id, time and kind, in id order (no payloads decoded)."""
        out: list[IndexEntry] = []
        last = 0
        while True:
            try:
                rows = self._conn.execute(
                    "SELECT id, t, kind FROM events WHERE id > ? ORDER BY id LIMIT ?",
                    (last, CHUNK),
                ).fetchall()
            except sqlite3.Error as e:
                self._stop_at(out[-1] if out else None, e)
                return out
            if not rows:
                return out
            out.extend(
                IndexEntry(int(i), float(t), str(k))
                for i, t, k in rows
                if isinstance(t, int | float)  # a damaged page's NULL time: unreadable
            )
            last = int(rows[-1][0])

    def events(
        self, t0: float | None = None, t1: float | None = None, first_id: int = 0
    ) -> Iterator[RecordedEvent]:
        """Events with ``t0 <= t <= t1`` (session time), in id order, from row ``first_id`` on.

        With a bound, only the rows between the first and last id inside the range are read
        (found on the time index), so a range costs what is in it, not the file's size.
        """
        lo = float("-inf") if t0 is None else t0
        hi = float("inf") if t1 is None else t1
        last = first_id - 1
        end: int | None = None
        if t0 is not None or t1 is not None:
            span = self.id_span(lo, hi)
            if span is None:
                return
            last, end = max(last, span[0] - 1), span[1]
        while True:
            try:
                rows = self._conn.execute(
                    "SELECT id, t, wall, kind, server, z, data FROM events "
                    "WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                    (last, _MAX_ID if end is None else end, CHUNK),
                ).fetchall()
            except sqlite3.Error as e:
                self._stop_at_id(last, e)
                return
            if not rows:
                return
            for i, t, wall, kind, server, z, data in rows:
                last = self.position = int(i)
                if not _row_ok(t, wall, server):
                    # A damaged page can hand back a row with a NULL time, an edited one text
                    # in a number's column: skip it like any other undecodable row.
                    self.skipped += 1
                    continue
                if not lo <= t <= hi:
                    continue
                try:
                    event = decode(str(kind), bytes(data), bool(z))
                except DecodeError:
                    self.skipped += 1
                    continue
                yield RecordedEvent(last, float(t), float(wall), str(kind), int(server), event)

    def latest_before(self, kind: str, t: float, server: int | None = None) -> RecordedEvent | None:
        """The last event of ``kind`` (of ``server``, when given) before session time ``t``:
        the state in force when a range starts (found on the ``(kind, t)`` index)."""
        where = "kind = ? AND t >= -1e300 AND t < ?" + ("" if server is None else " AND server = ?")
        params: tuple[object, ...] = (kind, t) if server is None else (kind, t, server)
        try:
            row = self._conn.execute(
                f"SELECT id FROM events WHERE {where} ORDER BY t DESC, id DESC LIMIT 1", params
            ).fetchone()
        except sqlite3.Error:
            return None  # a damaged index: the range is read without its starting state
        if row is None:
            return None
        return next(self.by_ids([int(row[0])]), None)

    def id_span(self, t0: float | None = None, t1: float | None = None) -> tuple[int, int] | None:
        """The first and last row ids with ``t0 <= t <= t1`` (found on the time index; every
        row without bounds); ``None`` when none. The whole file when the index cannot say (a
        damaged file is then read row by row, as without a range)."""
        try:
            if t0 is None and t1 is None:
                row = self._conn.execute("SELECT MIN(id), MAX(id) FROM events").fetchone()
            else:
                lo = -1e300 if t0 is None else max(t0, -1e300)
                hi = 1e300 if t1 is None else min(t1, 1e300)
                row = self._conn.execute(
                    "SELECT MIN(id), MAX(id) FROM events WHERE t BETWEEN ? AND ?", (lo, hi)
                ).fetchone()
        except sqlite3.Error:
            return 0, _MAX_ID
        if row is None or row[0] is None:
            return None
        return int(row[0]), int(row[1])

    def by_ids(self, ids: list[int]) -> Iterator[RecordedEvent]:
        """The events of these rows (ascending ids), skipping any that no longer decode."""
        for start in range(0, len(ids), CHUNK):
            part = ids[start : start + CHUNK]
            marks = ",".join("?" * len(part))
            try:
                rows = self._conn.execute(
                    "SELECT id, t, wall, kind, server, z, data FROM events "
                    f"WHERE id IN ({marks}) ORDER BY id",
                    part,
                ).fetchall()
            except sqlite3.Error as e:
                self._stop_at_id(part[0], e)
                return
            for i, t, wall, kind, server, z, data in rows:
                if not _row_ok(t, wall, server):
                    self.skipped += 1
                    continue
                try:
                    event = decode(str(kind), bytes(data), bool(z))
                except DecodeError:
                    self.skipped += 1
                    continue
                yield RecordedEvent(int(i), float(t), float(wall), str(kind), int(server), event)

    def _stop_at(self, entry: IndexEntry | None, e: sqlite3.Error) -> None:
        if entry is None:
            where = "before the first event"
        else:
            where = f"after event {entry.id} ({self.label(entry.t)})"
        self.stopped = f"{self.path}: damaged, read up to {where}: {sanitize_line(str(e), 120)}"

    def _stop_at_id(self, last_id: int, e: sqlite3.Error) -> None:
        if self.stopped is None:
            self.stopped = (
                f"{self.path}: damaged, read up to event {max(last_id, 0)}: "
                f"{sanitize_line(str(e), 120)}"
            )

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _row_ok(t: object, wall: object, server: object) -> bool:
    """The row's numeric columns hold finite numbers (not NULL, text or a blob)."""
    return (
        isinstance(t, int | float)
        and isinstance(wall, int | float)
        and isinstance(server, int)
        and math.isfinite(t)
        and math.isfinite(wall)
    )


def _float(text: str | None) -> float:
    """A stored number; 0 when it is not a finite one (``inf``, ``nan``, garbage)."""
    try:
        value = float(text) if text is not None else 0.0
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0


__all__ = ["IndexEntry", "Reader", "RecordedEvent", "RecordingError"]
