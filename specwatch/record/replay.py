"""A recording played back as a session: the same subscribe/start/stop surface as
:class:`~specwatch.session.LiveSession`, emitting the recorded events on a clock it controls.

The replay clock runs on the recording's own time axis (the session clock it was recorded
with), so every event arrives with the timestamps it had live and a front end renders exactly
what it rendered then. Seeking backwards tells ``on_rewind`` listeners to forget what they hold,
then re-emits the state events and the last :data:`HISTORY_S` seconds before the target, so
graph windows fill as they were.

The live verdict comes from the recording (its ``VerdictChanged`` events, as the session judged
live); a recording made before the session judged is judged again as it plays.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections.abc import Callable

from specwatch.record.reader import IndexEntry, Reader
from specwatch.record.store import STATE_KINDS
from specwatch.session.gpu_source import NoGpus
from specwatch.session.live import LiveSession
from specwatch.session.live_verdict import LiveVerdict

HISTORY_S = 3600.0
"""Seconds of history re-emitted after a backward seek (the longest graph window)."""
SPEEDS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Replay speeds the +/- keys step through."""
STEP_S = 1.0
"""Seconds a single step moves."""
TICK_S = 0.1
"""Real seconds between replay clock advances while playing."""
OPENING_S = 5.0
"""Seconds after the first row within which the first GPU inventory is part of the opening."""


class ReplaySession(LiveSession):
    """Plays a recording to its subscribers.

    Drive it with :meth:`start` (a task on the running loop moves the clock in real time times
    :attr:`speed`) or by hand with :meth:`seek` (headless tests).

    Args:
        reader: The open recording.
        speed: Recorded seconds per real second.
        real_clock: Real monotonic seconds (the playing task's pace).
    """

    def __init__(
        self,
        reader: Reader,
        speed: float = 1.0,
        real_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__([], NoGpus("no GPU readings recorded before this moment"), clock=self._now)
        self.reader = reader
        self.speed = speed
        self.real_clock = real_clock
        self.index: list[IndexEntry] = reader.index()
        self._times = [e.t for e in self.index]
        if any(e.kind == "VerdictChanged" for e in self.index):
            self.verdict = None  # shown as recorded, never judged again
        self.first_t = min(self._times) if self._times else 0.0
        self.last_t = max(self._times) if self._times else 0.0
        self.start_t = self._opening_t()
        """Where playing starts, and the earliest a seek goes (see :meth:`_opening_t`)."""
        self.now = self.start_t
        """The replay clock: session seconds of the recording."""
        self.paused = False
        self._cursor = 0
        """Index entries before this one have been emitted."""
        self._rewind: list[Callable[[], object]] = []
        self._task: asyncio.Task[None] | None = None
        self._real_last: float | None = None
        self._replay_started = False

    def _now(self) -> float:
        return self.now

    def _opening_t(self) -> float:
        """Where playing starts: the first GPU inventory when it follows the first row within
        :data:`OPENING_S` (a session's GPU source opens just after it starts), so the first
        frame shows the recorded GPUs rather than none; else the first row."""
        for e in self.index:
            if e.t > self.first_t + OPENING_S:
                break
            if e.kind == "GpuInventoryChanged":
                return max(e.t, self.first_t)
        return self.first_t

    # --- what front ends read ---------------------------------------------------------------------

    @property
    def at_end(self) -> bool:
        """Every event has been emitted."""
        return self._cursor >= len(self.index)

    def label(self) -> str:
        """``REPLAY 2026-12-01 14:03:12 CET ×10`` plus ``paused``/``end`` (for the status line)."""
        parts = ["REPLAY", self.reader.label(self.now), f"×{self.speed:g}"]
        if self.at_end:
            parts.append("end")
        elif self.paused:
            parts.append("paused")
        return " ".join(parts)

    def on_rewind(self, listener: Callable[[], object]) -> None:
        """Call ``listener`` before the re-emitted history of a backward seek."""
        self._rewind.append(listener)

    # --- controls ---------------------------------------------------------------------------------

    def toggle_pause(self) -> None:
        """Pause or resume the replay clock."""
        self.paused = not self.paused
        self._real_last = None

    def faster(self) -> None:
        """The next speed up (×60 at most)."""
        later = [s for s in SPEEDS if s > self.speed]
        self.speed = later[0] if later else SPEEDS[-1]

    def slower(self) -> None:
        """The next speed down (×1 at least)."""
        earlier = [s for s in SPEEDS if s < self.speed]
        self.speed = earlier[-1] if earlier else SPEEDS[0]

    def step(self, direction: int) -> None:
        """Pause and move one :data:`STEP_S` forwards (``+1``) or backwards (``-1``)."""
        self.paused = True
        self.seek(self.now + direction * STEP_S)

    def seek_by(self, seconds: float) -> None:
        """Move the replay clock by ``seconds`` (negative: back)."""
        self.seek(self.now + seconds)

    def jump_to_wall(self, wall: float) -> None:
        """Move the replay clock to Unix seconds ``wall``."""
        self.seek(self.reader.session_t(wall))

    def seek(self, t: float) -> None:
        """Move the replay clock to ``t`` (clamped to the recording) and emit accordingly."""
        t = min(max(t, self.start_t), self.last_t)
        if t < self.now:
            self._restart_at(t)
        self.now = t
        self._emit_until(t)

    # --- emitting ---------------------------------------------------------------------------------

    def _restart_at(self, t: float) -> None:
        for listener in list(self._rewind):
            with contextlib.suppress(Exception):
                listener()
        if self.verdict is not None:
            self.verdict = LiveVerdict()
        start = bisect.bisect_left(self._times, t - HISTORY_S) if self._times else 0
        # Times are nearly sorted (each source stamps in order); a late-stamped row before
        # ``start`` is simply not replayed, which matches what a live window had scrolled past.
        latest: dict[str, int] = {}
        for i in range(start):
            if self.index[i].kind in STATE_KINDS:
                latest[self.index[i].kind] = i
        before = sorted(latest.values())
        self._emit_ids([self.index[i].id for i in before])
        self._cursor = start

    def _emit_until(self, t: float) -> None:
        end = self._cursor
        while end < len(self.index) and self.index[end].t <= t:
            end += 1
        if end > self._cursor:
            ids = [e.id for e in self.index[self._cursor : end]]
            self._cursor = end
            self._emit_ids(ids)

    def _emit_ids(self, ids: list[int]) -> None:
        for row in self.reader.by_ids(ids):
            self.emit(row.event)

    # --- lifecycle (the LiveSession surface) ------------------------------------------------------

    def start(self) -> None:
        """Emit the recording's opening state and play it on the running loop."""
        if self._replay_started:
            return
        self._replay_started = True
        self._emit_until(self.now)
        self._task = asyncio.get_running_loop().create_task(self._play(), name="specwatch-replay")

    async def _play(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.advance_real()

    def advance_real(self) -> None:
        """Move the replay clock by the real time elapsed since the last call, times the speed."""
        real = self.real_clock()
        last, self._real_last = self._real_last, real
        if self.paused or last is None or self.at_end:
            return
        self.now = min(self.now + (real - last) * self.speed, self.last_t)
        self._emit_until(self.now)

    def stop(self, gpu_timeout_s: float = 10.0) -> None:
        """Stop playing (the recording stays open until :meth:`close`)."""
        if self._task is not None:
            with contextlib.suppress(RuntimeError):
                self._task.cancel()
        super().stop(gpu_timeout_s)

    def set_interval(self, interval_s: float) -> None:
        """Nothing to change: the recording was sampled as it was."""


__all__ = ["HISTORY_S", "SPEEDS", "STEP_S", "ReplaySession"]
