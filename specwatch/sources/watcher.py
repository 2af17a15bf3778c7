"""Passive watch: windowed readings from ``/metrics`` counter and histogram deltas.

Each :meth:`MetricsWatcher.scrape` fetches ``/metrics`` once and compares it with the previous
scrape, and notices restarts. Which series give which number is the dialect's business
(``sources/dialects/``); each value says in ``sources`` what it was computed from, and each
missing value says why in ``notes``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from specwatch.core.sanitize import clean_notes
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.sources.dialects.base import SIDE_EVERY_S, WindowBuilder, dialect_for
from specwatch.sources.dialects.llamacpp_router import unloaded_reason
from specwatch.sources.http.client import METRICS_LIMIT_BYTES, REQUEST_DEADLINE_S, ServerClient
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.server_queries import not_prometheus
from specwatch.sources.metrics.parse import MetricsReader, parse_metrics
from specwatch.sources.metrics.prom import Sample, Scrape, series_key

_COUNTER_SUFFIXES = ("_total", "_count", "_sum")
_BREAKDOWN_LABELS = ("mode", "position", "token_position")
_RESTART_EPS = 1e-9
_MONOTONIC_SUFFIXES = (*_COUNTER_SUFFIXES, "_bucket")
"""Samples that only grow while the server runs."""
_WATCHED_SUFFIXES = (*_MONOTONIC_SUFFIXES, "_created")


def summed_counters(scrape: Scrape) -> dict[str, float]:
    """Counter-like samples summed over their series (replicas once), by name.

    Keys are sample names (``vllm:generation_tokens_total``, ``..._seconds_sum``,
    ``..._count``) plus ``name{mode="decode"}`` / ``name{position="0"}`` breakdowns.
    """
    out: dict[str, float] = {}
    for name in sorted(scrape.names()):
        if not name.endswith(_COUNTER_SUFFIXES):
            continue
        total = scrape.total(name)
        if total is not None:
            out[name] = total
        for label in _BREAKDOWN_LABELS:
            for value, amount in scrape.by_label(name, label).items():
                out[f'{name}{{{label}="{value}"}}'] = amount
    return out


@dataclass(slots=True)
class _Snapshot:
    t: float
    scrape: Scrape
    start_header: str | None
    progress: Any = None


class MetricsWatcher:
    """Scrapes ``/metrics`` and turns pairs of scrapes into :class:`MetricsWindow` readings.

    Args:
        client: The server's client.
        info: What detection found (the dialect decides which series are read).
        clock: Monotonic seconds for window times.
        only_used: Parse only the families the dialect reads (``wanted_families``); the
            benchmark, which keeps every counter's delta, passes ``False``.
    """

    def __init__(
        self,
        client: ServerClient,
        info: ServerInfo,
        clock: Callable[[], float] = time.monotonic,
        only_used: bool = True,
    ) -> None:
        self.client = client
        self.info = info
        self.clock = clock
        self.last_scrape: Scrape | None = None
        self._prev: _Snapshot | None = None
        wanted = dialect_for(info.dialect).wanted_families
        self._reader = MetricsReader(wanted) if only_used and wanted else None
        self._counters: tuple[Scrape | None, Mapping[str, float]] = (None, {})
        self._side: dict[str, tuple[float, str]] = {}
        self._side_at: float | None = None
        self._progress: Any = None
        self._path = dialect_for(info.dialect).metrics_path
        self._refused: str | None = None
        """Why the metrics path is not asked again (its answer was not Prometheus text)."""

    @property
    def last_counters(self) -> Mapping[str, float]:
        """Summed raw counters of the last good scrape (see :func:`summed_counters`).

        Worked out when asked (the benchmark asks twice a run; the live watch never does).
        """
        scrape = self.last_scrape
        if scrape is None:
            return {}
        if self._counters[0] is not scrape:
            self._counters = (scrape, summed_counters(scrape))
        return self._counters[1]

    async def scrape(self) -> MetricsWindow:
        """Fetch ``/metrics`` once; return the window since the previous good scrape.

        Never raises: a failed fetch or parse gives ``notes["error"]`` and keeps the previous
        scrape as the start of the next window; so does an answer that is not Prometheus text or
        has none of the dialect's series. The first scrape has ``dt == 0.0`` and only
        lifetime values and gauges. A body over 8 MiB is neither read past the limit nor
        parsed (``notes["error"]`` says "answer too large"). Notes are sanitised.
        """
        window = await self._scrape()
        notes = clean_notes(window.notes)
        return window if notes == window.notes else dataclasses.replace(window, notes=notes)

    async def _scrape(self) -> MetricsWindow:
        t = self.clock()
        if self.info.metrics_enabled is False:
            reason = self.info.metrics_reason or "metrics are off on this server"
            return MetricsWindow(t=t, dt=0.0, notes={"metrics": reason})
        if self._refused is not None:
            return MetricsWindow(t=t, dt=0.0, notes={"metrics": self._refused})
        deadline = self.client.deadline_s or REQUEST_DEADLINE_S
        ends = asyncio.get_running_loop().time() + deadline
        try:
            # One deadline for the scrape: a hung server must not cost one per request of it
            # (llama.cpp's /slots, then /metrics, and /slots again after an idle read).
            async with asyncio.timeout_at(ends):
                progress = await self._read_progress()
                response = await self.client.get(self._path, check=False, limit=METRICS_LIMIT_BYTES)
        except TimeoutError:
            error = self.client.deadline_error(self._path, deadline)
            return MetricsWindow(t=t, dt=0.0, notes={"error": str(error)})
        except ServerError as exc:
            return MetricsWindow(t=t, dt=0.0, notes={"error": str(exc)})
        except Exception as exc:  # never raise from a scrape
            return MetricsWindow(t=t, dt=0.0, notes={"error": f"scrape failed: {exc!r}"[:200]})
        try:
            if response.status_code >= 400:
                return MetricsWindow(
                    t=t, dt=0.0, notes=self._status_notes(response.status_code, response.text)
                )
            text = response.text
            refused = not_prometheus(self._path, text)
            if refused is not None:
                self._refused = refused
                return MetricsWindow(t=t, dt=0.0, notes={"error": refused, "metrics": refused})
            scrape = self._reader.parse(text) if self._reader else parse_metrics(text)
            foreign = self._foreign(scrape, text)
            if foreign is not None:
                notes = {"error": foreign, **({"parse": scrape.error} if scrape.error else {})}
                return MetricsWindow(t=t, dt=0.0, notes=notes)
            header = response.headers.get("Process-Start-Time-Unix")
            progress = await self._complete_progress(progress, scrape, ends)
            await self._read_side(t, scrape)
            return self._window(_Snapshot(t, scrape, header, progress))
        except Exception as exc:  # a bug here must not take the monitor down
            return MetricsWindow(
                t=t, dt=0.0, notes={"error": f"metrics derivation failed: {exc!r}"}
            )

    def _foreign(self, scrape: Scrape, text: str) -> str | None:
        """Why an answer of 200 is no reading of this server (``None``: it is one): none of the
        series its dialect reads, with lines that are not Prometheus text (random bytes, a
        page) or nothing at all, or with no word from the dialect on why (vLLM's
        ``--disable-log-stats`` leaves only ``python_*`` series, and says so)."""
        url = self.client.endpoint.url(self._path)
        dialect = dialect_for(self.info.dialect)
        wanted = dialect.wanted_families
        if wanted and any(scrape.has_prefix(prefix) for prefix in wanted):
            return None
        if (scrape.error and not scrape.samples) or (wanted and not text.strip()):
            return f"{url}: the answer is not Prometheus text"
        if wanted and scrape.error:
            return f"{url}: the answer is not Prometheus text with {self.info.dialect.value} series"
        if wanted and "metrics" not in dialect.scrape_notes(scrape):
            return f"{url}: the answer has none of the series {self.info.dialect.value} exposes"
        return None

    async def _read_progress(self) -> Any:
        """The dialect's progress answer, read before ``/metrics`` (a request the server
        counts only at its end is then seen running, or already in the counters: never in
        neither); a failed read is ``None``."""
        try:
            found = await dialect_for(self.info.dialect).progress(
                self.client, self.info, self._progress, self.last_scrape
            )
        except Exception:  # progress is extra information: never a reason to lose the window
            found = None
        self._progress = found
        return found

    async def _complete_progress(self, progress: Any, scrape: Scrape, ends: float) -> Any:
        """The dialect's progress answer completed after the scrape (a request it shows that
        the read before it skipped), by the scrape's deadline (loop time ``ends``); as it was
        when that fails, or when there is none (a dialect without one: every scrape of vLLM,
        SGLang, TensorRT-LLM)."""
        if progress is None:
            return None
        try:
            async with asyncio.timeout_at(ends):
                found = await dialect_for(self.info.dialect).progress_after(
                    self.client, self.info, progress, scrape
                )
        except Exception:  # progress is extra information: never a reason to lose the window
            return progress
        self._progress = found
        return found

    async def _read_side(self, t: float, scrape: Scrape) -> None:
        """Refresh the dialect's side figures when :data:`SIDE_EVERY_S` has passed; a failed
        read keeps the last ones (they are lifetime figures, not this window's)."""
        if self._side_at is not None and t - self._side_at < SIDE_EVERY_S:
            return
        self._side_at = t
        try:
            found = await dialect_for(self.info.dialect).side_figures(
                self.client, self.info, scrape
            )
        except Exception:  # extra figures are never a reason to lose the window
            return
        self._side = {**self._side, **found}

    def _status_notes(self, status: int, body: str) -> dict[str, str]:
        off = dialect_for(self.info.dialect).metrics_off_reason(status)
        if off is not None:
            return {"error": off, "metrics": off}
        route = self.client.route
        unloaded = None if route is None else unloaded_reason(route, status, body)
        if unloaded is not None:
            return {"error": unloaded}
        excerpt = " ".join(body.split())[:120]
        return {"error": f"{self.client.endpoint.url(self._path)}: HTTP {status} {excerpt}".strip()}

    def _window(self, snap: _Snapshot) -> MetricsWindow:
        t, scrape = snap.t, snap.scrape
        prev = self._prev
        dialect = dialect_for(self.info.dialect)
        b = WindowBuilder()
        if scrape.error:
            b.notes["parse"] = scrape.error
        b.notes.update(dialect.scrape_notes(scrape))
        restarted = prev is not None and _restarted(prev, snap)
        if restarted:
            b.notes["restart"] = (
                "the server restarted between scrapes (a counter went backwards); "
                "the window starts again from this scrape"
            )
        start = None if (prev is None or restarted) else prev
        dt = 0.0 if start is None else t - start.t
        if start is not None and dt <= 0:
            start = None
            dt = 0.0
        if start is None and not restarted:
            b.notes["window"] = "first scrape: windowed values need a second one"
        b.progress = snap.progress
        b.prev_progress = None if start is None else start.progress
        dialect.derive_window(b, scrape, None if start is None else start.scrape, dt, self.info)
        for name, (value, source) in self._side.items():
            if name not in b.values:
                b.set(name, value, source)
                b.notes.pop(name, None)
        self._prev = snap
        self.last_scrape = scrape
        values = b.values
        buckets = values.get("latency_buckets")
        if buckets is not None:
            values = {**values, "latency_buckets": _shared(tuple(buckets.items()))}
        return MetricsWindow(
            t=t,
            dt=dt,
            restarted=restarted,
            sources=_shared(tuple(b.sources.items())),
            notes=_shared(tuple(b.notes.items())),
            **values,
        )


@lru_cache(maxsize=256)
def _shared(items: tuple[tuple[str, Any], ...]) -> Mapping[str, Any]:
    """One mapping for equal contents. A window says where each figure comes from (and what is
    missing) in the very words of windows before it; the monitor keeps 1,800 windows for the
    advisor, which would otherwise carry kilobytes of the same text each. Not to be mutated."""
    return dict(items)


def _restarted(prev: _Snapshot, cur: _Snapshot) -> bool:
    """A new process start header, a ``_created`` that moved or a counter that went back."""
    if prev.start_header and cur.start_header and prev.start_header != cur.start_header:
        return True
    before, now = prev.scrape.samples, cur.scrape.samples
    if len(before) == len(now):
        # The reader hands back the very sample object of a series whose line did not change,
        # in the order of the exposition: only the samples that changed need a look, and
        # while each of those is the same series as before, no lookup by key is needed.
        for old, new in zip(before, now, strict=True):
            if old is new:
                continue
            if old.key != new.key or not new.key:
                return _restarted_by_key(before, now)
            if _went_back(new.name, old.value, new.value):
                return True
        return False
    return _restarted_by_key(before, now)


def _restarted_by_key(before: tuple[Sample, ...], now: tuple[Sample, ...]) -> bool:
    """:func:`_restarted` for scrapes whose series do not line up: matched by series key."""
    earlier = {series_key(s): s for s in before if s.name.endswith(_WATCHED_SUFFIXES)}
    for sample in now:
        if not sample.name.endswith(_WATCHED_SUFFIXES):
            continue
        old = earlier.get(series_key(sample))
        if old is not None and _went_back(sample.name, old.value, sample.value):
            return True
    return False


def _went_back(name: str, old: float, new: float) -> bool:
    kind = _kind(name)
    if kind is _CREATED:
        return abs(old - new) > _RESTART_EPS
    if kind is _MONOTONIC:
        return new < old - _RESTART_EPS
    return False


_CREATED, _MONOTONIC, _OTHER = "created", "monotonic", "other"


@lru_cache(maxsize=4096)
def _kind(name: str) -> str:
    """What a change of the value of samples so named can mean (a server exposes the same
    names every scrape: remembered)."""
    if name.endswith("_created"):
        return _CREATED
    if name.endswith(_MONOTONIC_SUFFIXES):
        return _MONOTONIC
    return _OTHER


__all__ = ["MetricsWatcher", "summed_counters"]
