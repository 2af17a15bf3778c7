"""A session subscriber that writes every event into a recording, in batches, off the caller.

The subscriber call only appends to a list (the session's threads must stay quick); a thread of
the recorder's own encodes and commits the batch every ``flush_s`` seconds, in one transaction.
A killed process therefore loses at most the batch not yet committed. A full disk stops the
recording with one line and keeps everything already committed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specwatch import __version__
from specwatch.record.codec import encode, event_time
from specwatch.record.store import (
    FORMAT_VERSION,
    STATE_KINDS,
    local_iso,
    lock_recording,
    open_for_writing,
)
from specwatch.session.events import RecordingStopped, SessionEvent
from specwatch.sources.http.endpoint import Endpoint, redact

if TYPE_CHECKING:
    from specwatch.session.live import LiveSession

FLUSH_S = 1.0
"""Seconds between commits."""
TRIM_EVERY_S = 60.0
"""How often retention trims old rows."""


def recording_meta(
    endpoints: Sequence[Endpoint], offset: float, wall: float, interval_s: float | None = None
) -> dict[str, str]:
    """The ``meta`` rows of a new recording: never the API key, only the redacted addresses."""
    import orjson

    urls = [redact(e.base_url, e) for e in endpoints]
    meta = {
        "format_version": str(FORMAT_VERSION),
        "specwatch_version": __version__,
        "started": local_iso(wall),
        "started_unix": repr(wall),
        "wall_offset": repr(offset),
        "url": urls[0] if urls else "",
        "servers": orjson.dumps(urls).decode(),
    }
    if interval_s is not None:
        meta["interval_s"] = repr(interval_s)
    return meta


class Recorder:
    """Writes a session's events into ``path`` (call :meth:`start`, then subscribe it).

    Args:
        path: The recording (created, or appended to when it is one of this format).
        endpoints: The session's servers (their addresses are stored, redacted; never a key).
        clock: The session's clock (times events that carry none).
        wall_clock: Unix seconds; the wall time of session time ``t`` is ``t + offset``, with the
            offset taken once at start.
        flush_s: Seconds between commits.
        retention_s: Keep only this many seconds (of session time) behind the newest event.
        on_stop: Called with one line when recording stops on an error (a full disk).
        on_commit: Called with the total rows committed after each commit (tests, status).
        max_bytes: Refuse to grow the file beyond this (tests simulate a full disk with it).
        trim_every_s: Real seconds between retention trims.
    """

    def __init__(
        self,
        path: Path,
        endpoints: Sequence[Endpoint] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        flush_s: float = FLUSH_S,
        retention_s: float | None = None,
        on_stop: Callable[[str], object] | None = None,
        on_commit: Callable[[int], object] | None = None,
        interval_s: float | None = None,
        max_bytes: int | None = None,
        trim_every_s: float = TRIM_EVERY_S,
    ) -> None:
        self.path = Path(path)
        self.endpoints = tuple(endpoints)
        self.clock = clock
        self.wall_clock = wall_clock
        self.flush_s = flush_s
        self.retention_s = retention_s
        self.on_stop = on_stop
        self.on_commit = on_commit
        self.interval_s = interval_s
        self.max_bytes = max_bytes
        self.trim_every_s = trim_every_s
        self.offset = 0.0
        """Wall seconds minus session seconds."""
        self.rows = 0
        """Rows committed so far (by this recorder)."""
        self.error: str | None = None
        """Why recording stopped early (one line), else ``None``."""
        self._pending: list[tuple[float, SessionEvent]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._file_lock: int | None = None
        """The descriptor holding the one-writer lock of :attr:`path`."""
        self._last_trim = float("-inf")

    def start(self) -> None:
        """Open the file, write its meta, start the writer thread.

        Raises:
            sqlite3.Error, ValueError, OSError: The file cannot be a recording (one line).
        """
        now_t, now_wall = self.clock(), self.wall_clock()
        self.offset = now_wall - now_t
        meta = recording_meta(self.endpoints, self.offset, now_wall, self.interval_s)
        self._file_lock = lock_recording(self.path)
        try:
            self._conn = open_for_writing(self.path, meta)
        except BaseException:
            self._unlock()
            raise
        if self.max_bytes is not None:
            page = self._conn.execute("PRAGMA page_size").fetchone()[0]
            self._conn.execute(f"PRAGMA max_page_count={max(1, self.max_bytes // page)}")
        self._thread = threading.Thread(target=self._run, name="specwatch-record", daemon=True)
        self._thread.start()

    def attach_to(self, session: LiveSession) -> None:
        """Record ``session``; when recording stops on an error, the session says so to its
        subscribers (:class:`~specwatch.session.events.RecordingStopped`), so a front end can
        show it. An ``on_stop`` given before is still called."""
        before = self.on_stop

        def stopped(reason: str) -> None:
            if before is not None:
                before(reason)
            session.emit(RecordingStopped(session.clock(), reason))

        self.on_stop = stopped
        session.subscribe(self)

    def __call__(self, event: SessionEvent) -> None:
        """Queue one event (cheap; called on the session's threads)."""
        if self.error is not None or self._stop.is_set():
            return
        t = event_time(event)
        with self._lock:
            self._pending.append((self.clock() if t is None else float(t), event))

    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            self.flush()
        self.flush()

    def flush(self) -> None:
        """Commit what is queued (the writer thread does this every ``flush_s``)."""
        with self._lock:
            batch, self._pending = self._pending, []
        conn = self._conn
        if not batch or conn is None or self.error is not None:
            return
        rows = []
        for t, event in batch:
            kind, data, z = encode(event)
            rows.append((t, t + self.offset, kind, getattr(event, "server", 0), int(z), data))
        try:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO events (t, wall, kind, server, z, data) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as e:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._fail(e)
            return
        self.rows += len(rows)
        if self.on_commit is not None:
            self.on_commit(self.rows)
        if self.retention_s is not None and time.monotonic() - self._last_trim >= self.trim_every_s:
            self.trim(max(t for t, _ in batch) - self.retention_s)

    def trim(self, before_t: float) -> int:
        """Delete rows older than ``before_t``, keeping the latest state rows; rows deleted."""
        conn = self._conn
        if conn is None:
            return 0
        self._last_trim = time.monotonic()
        kinds = ",".join(f"'{k}'" for k in STATE_KINDS)
        try:
            cur = conn.execute(
                f"DELETE FROM events WHERE t < ? AND id NOT IN (SELECT MAX(id) FROM events "
                f"WHERE t < ? AND kind IN ({kinds}) GROUP BY kind, server)",
                (before_t, before_t),
            )
        except sqlite3.Error as e:
            self._fail(e)
            return 0
        return cur.rowcount

    def _fail(self, e: BaseException) -> None:
        text = str(e) or type(e).__name__
        self.error = (
            f"recording stopped: {text}; {self.rows} events kept in {self.path}"
            if "full" not in text
            else f"recording stopped: disk full; {self.rows} events kept in {self.path}"
        )
        with self._lock:
            self._pending = []
        if self.on_stop is not None:
            self.on_stop(self.error)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Commit what is queued, stop the thread, close the file. Idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._unlock()

    def _unlock(self) -> None:
        lock, self._file_lock = self._file_lock, None
        if lock is not None:
            os.close(lock)


__all__ = ["FLUSH_S", "Recorder", "recording_meta"]
