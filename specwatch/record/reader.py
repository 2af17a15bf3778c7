"""Reading a recording back: its meta, and its events as the typed events the session emitted.

A file of a newer format, or one whose schema is not a recording's (a trigger, a view, any
object :data:`~specwatch.record.store.SCHEMA` does not create), is refused with one line. A
truncated or corrupt file gives what can be read: rows that fail to decode, hold a value over
:data:`MAX_VALUE_BYTES` or a time outside :data:`~specwatch.record.store.WALL_LIMIT` are skipped
and counted, and where SQLite itself cannot go on, reading stops and :attr:`Reader.stopped` says
where.

Every step SQLite takes is watched (its progress handler): one that runs past
:data:`STEP_DEADLINE_S` stops the read with one line, and Ctrl-C ends it at once.
"""

from __future__ import annotations

import math
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specwatch.core.sanitize import sanitize_line
from specwatch.record.codec import MAX_EVENT_BYTES, DecodeError, decode, event_time
from specwatch.record.store import FORMAT_VERSION, WALL_LIMIT, local_label, schema_problem
from specwatch.session.events import SessionEvent

CHUNK = 2000
"""Rows asked for per query (a corrupt page then costs at most the chunk it sits in)."""
MAX_VALUE_BYTES = MAX_EVENT_BYTES
"""Largest value SQLite hands over (its length limit on this connection): a stored payload is
never larger than the event it inflates to."""
MAX_KIND_CHARS = 64
MAX_META_KEY_CHARS, MAX_META_VALUE_CHARS, MAX_META_ROWS = 64, 65536, 256
STEP_DEADLINE_S = 30.0
"""Longest one step of a read may run in SQLite (a row, a minimum, a count) before the read
stops with one line."""
PROGRESS_EVERY = 10_000
"""SQLite virtual machine instructions between two looks at the deadline and at Ctrl-C."""
_MAX_ID = 2**63 - 1
_ROW = (
    f"SELECT id, t, wall, CASE WHEN length(kind) <= {MAX_KIND_CHARS} THEN kind END, server, z, "
    "data FROM events"
)

_INDEX_ROW = f"SELECT id, t, CASE WHEN length(kind) <= {MAX_KIND_CHARS} THEN kind END FROM events"


class _Overdue(sqlite3.OperationalError):
    """A step ran past the deadline."""


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

    def __init__(self, path: Path | str, step_deadline_s: float = STEP_DEADLINE_S) -> None:
        self.path = Path(path)
        self.step_deadline_s = step_deadline_s
        self._deadline = math.inf
        self._overdue = False
        if not self.path.is_file():
            raise RecordingError(f"{self.path}: no such recording")
        try:
            uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as e:
            raise RecordingError(
                f"{self.path}: not a specwatch recording ({sanitize_line(str(e))})"
            ) from None
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._conn.set_progress_handler(self._progress, PROGRESS_EVERY)
        try:
            self._conn.execute("PRAGMA trusted_schema=OFF")
            try:
                problem = self._guarded(schema_problem, self._conn)
            except sqlite3.DatabaseError:
                # A truncated file is shorter than its header says; SQLite refuses it unless
                # told to read what is there (nothing is written: the connection is read-only).
                self._conn.execute("PRAGMA writable_schema=ON")
                problem = self._guarded(schema_problem, self._conn)
            if problem is not None:
                raise RecordingError(f"{self.path}: not a specwatch recording ({problem})")
            rows = list(
                self._rows(
                    "SELECT key, value FROM meta WHERE length(key) <= ? AND length(value) <= ? "
                    "LIMIT ?",
                    (MAX_META_KEY_CHARS, MAX_META_VALUE_CHARS, MAX_META_ROWS),
                )
            )
        except sqlite3.Error as e:
            self._conn.close()
            raise RecordingError(
                f"{self.path}: not a specwatch recording ({sanitize_line(str(e))})"
            ) from None
        except BaseException:
            self._conn.close()
            raise
        self.meta: dict[str, str] = {str(k): str(v) for k, v in rows}
        version = self.meta.get("format_version", "")
        if not (version.isascii() and version.isdigit() and len(version) < 10):  # "²" too
            self._conn.close()
            raise RecordingError(f"{self.path}: not a specwatch recording (no format version)")
        if int(version) > FORMAT_VERSION:
            self._conn.close()
            by = sanitize_line(self.meta.get("specwatch_version", "?"), 40)
            raise RecordingError(
                f"{self.path}: recorded by specwatch {by} in format {version}; this specwatch "
                f"reads formats up to {FORMAT_VERSION}: upgrade specwatch to replay it"
            )
        self.offset = _float(self.meta.get("wall_offset"))
        """Wall seconds minus session seconds (0 when the file's is not a time: 1e300, inf)."""
        self.t_range = (-WALL_LIMIT - self.offset, WALL_LIMIT - self.offset)
        """The session times a row may have (their wall times inside ``WALL_LIMIT``)."""
        self.skipped = 0
        """Rows that could not be decoded (skipped)."""
        self.stopped: str | None = None
        """Where reading had to stop, when the file is damaged (one line)."""
        self.position = 0
        """The id of the last row :meth:`events` read (progress through :meth:`id_span`)."""

    # --- every step watched -----------------------------------------------------------------------

    def _progress(self) -> int:
        """SQLite's progress handler: non-zero stops the step. Ctrl-C raises in here before
        this body runs; SQLite then stops the step too, and :meth:`_guarded` raises it again."""
        if time.monotonic() > self._deadline:
            self._overdue = True
            return 1
        return 0

    def _guarded(self, step: Any, *args: Any) -> Any:
        """``step(*args)`` with the deadline armed.

        Raises:
            KeyboardInterrupt: A signal stopped the step (Ctrl-C).
            _Overdue: The step ran past :attr:`step_deadline_s`.
            sqlite3.Error: SQLite could not go on (a damaged file).
        """
        self._overdue = False
        self._deadline = time.monotonic() + self.step_deadline_s
        try:
            return step(*args)
        except sqlite3.OperationalError as e:
            if self._overdue:
                raise _Overdue(f"a step took over {self.step_deadline_s:g} s") from None
            if "interrupted" in str(e):
                # the progress handler's exception (a signal's) is dropped by sqlite3
                raise KeyboardInterrupt from None
            raise
        finally:
            self._deadline = math.inf

    def _rows(self, sql: str, params: tuple[object, ...] | list[int] = ()) -> Iterator[Any]:
        """The rows of one query, one at a time (a chunk's values are never all held), each
        step under the deadline."""
        cursor = self._guarded(self._conn.execute, sql, params)
        while (row := self._guarded(cursor.fetchone)) is not None:
            yield row

    def _one(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        return next(self._rows(sql, params), None)

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
            row = self._one(
                "SELECT MIN(t), MAX(t) FROM events WHERE t BETWEEN ? AND ?", self.t_range
            )
        except sqlite3.Error as e:
            self._stop_at(None, e)
            if isinstance(e, _Overdue):
                return None
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
            n = 0
            try:
                for i, t, k in self._rows(
                    f"{_INDEX_ROW} WHERE id > ? ORDER BY id LIMIT ?", (last, CHUNK)
                ):
                    n, last = n + 1, int(i)
                    # a damaged page's NULL time, or one no clock shows: unreadable
                    if self._time_ok(t) and isinstance(k, str):
                        out.append(IndexEntry(last, float(t), k))
            except sqlite3.Error as e:
                if (past := self._past(last, e, _INDEX_ROW)) is None:
                    self._stop_at(out[-1] if out else None, e)
                    return out
                last, row = past
                if row is not None and self._time_ok(row[1]) and isinstance(row[2], str):
                    out.append(IndexEntry(last, float(row[1]), row[2]))
                continue
            if not n:
                return out

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
            n = 0
            try:
                for row in self._rows(
                    f"{_ROW} WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                    (last, _MAX_ID if end is None else end, CHUNK),
                ):
                    n, last = n + 1, int(row[0])
                    self.position = last
                    rec = self._decoded(row)
                    if rec is not None and lo <= rec.t <= hi:
                        yield rec
            except sqlite3.Error as e:
                if (past := self._past(last, e, _ROW)) is None:
                    self._stop_at_id(last, e)
                    return
                last, row = past
                self.position = last
                rec = None if row is None else self._decoded(row)
                if rec is not None and lo <= rec.t <= hi and (end is None or last <= end):
                    yield rec
                continue
            if not n:
                return

    def latest_before(self, kind: str, t: float, server: int | None = None) -> RecordedEvent | None:
        """The last event of ``kind`` (of ``server``, when given) before session time ``t``:
        the state in force when a range starts (found on the ``(kind, t)`` index)."""
        where = "kind = ? AND t >= ? AND t < ?" + ("" if server is None else " AND server = ?")
        params: tuple[object, ...] = (kind, self.t_range[0], min(t, self.t_range[1]))
        if server is not None:
            params += (server,)
        try:
            row = self._one(
                f"SELECT id FROM events WHERE {where} ORDER BY t DESC, id DESC LIMIT 1", params
            )
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
                row = self._one("SELECT MIN(id), MAX(id) FROM events")
            else:
                lo = self.t_range[0] if t0 is None else max(t0, self.t_range[0])
                hi = self.t_range[1] if t1 is None else min(t1, self.t_range[1])
                row = self._one(
                    "SELECT MIN(id), MAX(id) FROM events WHERE t BETWEEN ? AND ?", (lo, hi)
                )
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
            seen = part[0] - 1
            try:
                for row in self._rows(f"{_ROW} WHERE id IN ({marks}) ORDER BY id", part):
                    seen = int(row[0])
                    rec = self._decoded(row)
                    if rec is not None:
                        yield rec
            except sqlite3.DataError:
                # a value over the limit among them: the rest one by one, past the one
                for i in (i for i in part if i > seen):
                    try:
                        row = self._one(f"{_ROW} WHERE id = ?", (i,))
                    except sqlite3.DataError:
                        self.skipped += 1
                        continue
                    except sqlite3.Error as e:
                        self._stop_at_id(i, e)
                        return
                    rec = None if row is None else self._decoded(row)
                    if rec is not None:
                        yield rec
            except sqlite3.Error as e:
                self._stop_at_id(part[0], e)
                return

    def _decoded(self, row: tuple[Any, ...]) -> RecordedEvent | None:
        """The event of one row; ``None`` (counted in :attr:`skipped`) when its numbers are not
        numbers, its times no clock shows, or its payload is not the event its kind says."""
        i, t, wall, kind, server, z, data = row
        # A damaged page can hand back a row with a NULL time, an edited one text in a number's
        # column, a crafted one -1e308.
        ok = (
            self._time_ok(t)
            and isinstance(wall, int | float)
            and abs(wall) <= WALL_LIMIT
            and isinstance(server, int)
            and isinstance(kind, str)
            and isinstance(data, bytes)
        )
        if ok:
            try:
                event = decode(kind, data, bool(z))
            except DecodeError:
                ok = False
            else:
                carried = event_time(event)
                ok = carried is None or self._time_ok(carried)
        if not ok:
            self.skipped += 1
            return None
        return RecordedEvent(int(i), float(t), float(wall), kind, server, event)

    def _time_ok(self, t: object) -> bool:
        """``t`` is a session time whose wall time a clock can show."""
        lo, hi = self.t_range
        return isinstance(t, int | float) and lo <= t <= hi

    def _past(
        self, last_id: int, e: sqlite3.Error, columns: str
    ) -> tuple[int, tuple[Any, ...] | None] | None:
        """After SQLite refused a row past ``last_id`` (a value over :data:`MAX_VALUE_BYTES`;
        sqlite3 steps one row ahead, so the refused one may be the row after the next): the
        next row's id and its ``columns``, or ``None`` for them when it is the refused one
        (counted as skipped). ``None`` when reading cannot go on (damage, a deadline)."""
        if not isinstance(e, sqlite3.DataError):
            return None
        try:
            row = self._one("SELECT MIN(id) FROM events WHERE id > ?", (last_id,))
            if row is None or row[0] is None:
                return None
            after = int(row[0])
            try:
                return after, self._one(f"{columns} WHERE id = ?", (after,))
            except sqlite3.DataError:
                self.skipped += 1
                return after, None
        except sqlite3.Error:
            return None

    def _stop_at(self, entry: IndexEntry | None, e: sqlite3.Error) -> None:
        if entry is None:
            where = "before the first event"
        else:
            where = f"after event {entry.id} ({self.label(entry.t)})"
        self._stop(where, e)

    def _stop_at_id(self, last_id: int, e: sqlite3.Error) -> None:
        self._stop(f"event {max(last_id, 0)}", e)

    def _stop(self, where: str, e: sqlite3.Error) -> None:
        if self.stopped is not None:
            return
        if isinstance(e, _Overdue):
            self.stopped = f"{self.path}: read up to {where}, then {e}: stopped there"
        else:
            self.stopped = f"{self.path}: damaged, read up to {where}: {sanitize_line(str(e), 120)}"

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _float(text: str | None) -> float:
    """A stored wall offset; 0 when it is not one a clock shows (``inf``, ``nan``, 1e300,
    garbage)."""
    try:
        value = float(text) if text is not None else 0.0
    except ValueError:
        return 0.0
    return value if abs(value) <= WALL_LIMIT else 0.0


__all__ = ["IndexEntry", "Reader", "RecordedEvent", "RecordingError"]
