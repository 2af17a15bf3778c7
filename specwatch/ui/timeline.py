"""Marks: labelled spans on the token-rate time axis (server down or loading, warmups,
restarts, benchmark runs, profiles), newest last and bounded."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

MARKS = 256
DOWN_MARK_S = 5.0
"""A refused server gets a ``down`` mark once it has been refused this long (dated back)."""
WARMUP_MAX_S = 120.0
"""A warmup mark closes after this long even if the rate never settles."""
WARMUP_SETTLED = 0.15
"""Warmup ends when two consecutive windows with traffic agree within 15%."""


@dataclass(slots=True)
class Mark:
    """A labelled span (or point, when ``t1 == t0``) on the token-rate time axis."""

    kind: str
    """``"down"``, ``"loading"``, ``"warmup"``, ``"restart"``, ``"bench"``, ``"profile"`` or
    ``"lost"``."""
    t0: float
    t1: float | None
    """``None`` while the span is still open."""
    label: str


class Timeline:
    """The marks, newest last (bounded), and the spans still open."""

    def __init__(self) -> None:
        self.marks: deque[Mark] = deque(maxlen=MARKS)
        self.bench_runs = 0
        """Measured benchmark runs this session (marks are numbered across benchmarks)."""
        self._warmup: Mark | None = None
        self._warmup_prev: float | None = None
        self._loading: Mark | None = None
        self._bench_run: Mark | None = None
        self._bench_warm: Mark | None = None
        self._profile: Mark | None = None

    def waiting(self, t: float, state: str, attempt: int, elapsed_s: float) -> None:
        """The server is not ready: a ``loading`` mark once it says it is loading (HTTP 503),
        else ``down`` (a refused port may be a server loading, or one never started), and only
        after :data:`DOWN_MARK_S`."""
        word = "loading" if state == "loading" else "down"
        label = f"{word} #{attempt} {elapsed_s:.0f}s"
        if self._loading is None and (word == "loading" or elapsed_s >= DOWN_MARK_S):
            # Dated back to the first refusal; a server starting beside us (the demo's) for less
            # than DOWN_MARK_S is no outage, and the status line says it is waiting.
            self._loading = Mark(word, t - elapsed_s, None, label)
            self.marks.append(self._loading)
        elif self._loading is not None:
            if state == "loading":
                self._loading.kind = "loading"
            self._loading.label = label.replace("down", self._loading.kind, 1)

    def ready(self, t: float) -> None:
        """The server answered: close the loading mark and open a warmup mark."""
        if self._loading is not None:
            self._loading.t1 = t
            self._loading = None
        self.open_warmup(t)

    def lost(self, t: float, was_connected: bool) -> None:
        """The server stopped answering (a ``lost`` point if it had answered)."""
        if was_connected:
            self.marks.append(Mark("lost", t, t, "lost"))
        self._close_warmup(t)

    def restarted(self, t: float) -> None:
        """The server restarted: a ``restart`` point, and a new warmup."""
        self.marks.append(Mark("restart", t, t, "restart"))
        self.open_warmup(t)

    def rate(self, t: float, tok_s: float | None) -> None:
        """A window's rate: the warmup closes once it settles (or after :data:`WARMUP_MAX_S`)."""
        mark = self._warmup
        if mark is None:
            return
        if t - mark.t0 > WARMUP_MAX_S:
            self._close_warmup(t)
            return
        if not tok_s:
            return
        prev, self._warmup_prev = self._warmup_prev, tok_s
        if prev and abs(tok_s - prev) <= WARMUP_SETTLED * max(tok_s, prev):
            self._close_warmup(t)

    def open_warmup(self, t: float) -> None:
        """Close any warmup mark and open a new one at ``t`` (server ready, or restarted)."""
        self._close_warmup(t)
        self._warmup = Mark("warmup", t, None, "warmup")
        self._warmup_prev = None
        self.marks.append(self._warmup)

    def _close_warmup(self, t: float) -> None:
        if self._warmup is not None:
            self._warmup.t1 = t
            self._warmup = None

    def bench(self, t: float, kind: str) -> None:
        """A benchmark event: its warmup span, then one numbered span per measured run."""
        if kind == "started":
            self._bench_warm = Mark("warmup", t, None, "bench warmup")
            self.marks.append(self._bench_warm)
        elif kind == "run_start":
            self._close_bench_warmup(t)
            self.bench_runs += 1
            self._bench_run = Mark("bench", t, None, f"B{self.bench_runs}")
            self.marks.append(self._bench_run)
        elif kind in ("run_done", "finished", "interrupted", "error"):
            if kind != "run_done":
                self._close_bench_warmup(t)
            if self._bench_run is not None:
                self._bench_run.t1 = t
                self._bench_run = None

    def profile(self, t: float, phase: str) -> None:
        """A profile's events: its span, from the armed profiler to its end."""
        if phase == "armed":
            self._profile = Mark("profile", t, None, "profile")
            self.marks.append(self._profile)
        elif phase == "ended" and self._profile is not None:
            self._profile.t1 = t
            self._profile = None

    def _close_bench_warmup(self, t: float) -> None:
        if self._bench_warm is not None:
            self._bench_warm.t1 = t
            self._bench_warm = None

    def since(self, t0: float, now: float) -> Iterable[Mark]:
        """Marks that overlap ``(t0, now]``."""
        for m in self.marks:
            end = m.t1 if m.t1 is not None else now
            if end >= t0:
                yield m


__all__ = ["DOWN_MARK_S", "MARKS", "Mark", "Timeline"]
