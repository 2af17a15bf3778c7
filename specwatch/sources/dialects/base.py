"""The protocol every server dialect implements, and the registry that finds them.

A dialect is everything specwatch knows about one server family: how to recognise it and read
its speculative setup, which ``/metrics`` series give which windowed number (and how their
names changed between versions), how to ask for a stream and read its chunks, and how to get an
accept length out of counter deltas over a benchmark run. The machinery in
``sources/{detect,metrics,stream}.py`` is the same for every server and asks the dialect.
How a family's series combine across labels (replicas, parallel schedulers, breakdowns, series
set apart) is one rule for every dialect, in :mod:`specwatch.sources.metrics.prom`.

A module of this package that binds a :class:`ServerDialect` to the name ``DIALECT`` is a
dialect; the registry (:func:`all_dialects`) imports every module of the package and keeps
those. Adding a server is one module here (plus its member of
:class:`specwatch.core.server.Dialect`).
"""

from __future__ import annotations

import abc
import functools
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.server import Dialect, ServerInfo
from specwatch.core.values import as_float
from specwatch.sources.dialects.llamacpp_timings import decode_steps, spec_from_timings
from specwatch.sources.identity.server_queries import scrape_metrics

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape
    from specwatch.sources.metrics.window_builder import WindowBuilder
    from specwatch.sources.streams.accumulator import StreamAccumulator


ONE_CHUNK_PER_STEP = (
    "one chunk per engine step; chunks the client fell behind on are merged by the "
    "server, so steps can be undercounted"
)
"""The step note of servers that send one chunk per engine step."""


SIDE_EVERY_S = 10.0
"""Seconds between two reads of a dialect's :meth:`ServerDialect.side_figures`: lifetime
figures, and each read asks the server's scheduler for its state."""


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """One generation to stream, independent of the server."""

    prompt: str
    max_tokens: int
    temperature: float
    ignore_eos: bool


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """How a dialect streams: the requests to try in order and how tokens are counted."""

    attempts: tuple[tuple[str, dict[str, Any]], ...]
    """``(path, JSON body)``; the next one is tried when a path answers 404/405."""
    count_source: str
    """Where exact token counts come from, e.g. ``"meta_info.completion_tokens"``."""


class ServerDialect(abc.ABC):
    """One server family. Subclass it in a module of ``sources/dialects/`` named after the
    server and bind an instance to the module-level name ``DIALECT``; the registry finds it."""

    dialect: ClassVar[Dialect]
    """The name used in ``ServerInfo``, snapshots and on the command line."""
    owned_by: ClassVar[tuple[str, ...]] = ()
    """``/v1/models`` ``owned_by`` values that name this server."""
    fingerprint_order: ClassVar[int] = 100
    """When ``owned_by`` says nothing, dialects are asked to :meth:`recognize` in this order."""
    metrics_off_statuses: ClassVar[tuple[int, ...]] = ()
    """``/metrics`` statuses that mean the server runs without metrics."""
    metrics_off_text: ClassVar[str] = ""
    """The reason shown when metrics are off."""
    stream_in_bursts: ClassVar[bool] = False
    """Events of one verify step arrive as a burst (one event per token), not one chunk."""
    metrics_path: ClassVar[str] = "/metrics"
    """Where the Prometheus text is (TensorRT-LLM: ``/prometheus/metrics``; its ``/metrics``
    is JSON drained on read and never asked)."""
    wanted_families: ClassVar[tuple[str, ...]] = ()
    """``/metrics`` family names or name prefixes the live watch reads; the rest of a scrape is
    skipped unparsed. Empty: keep everything."""

    async def recognize(self, client: ServerClient) -> bool:
        """Whether endpoints only this server has answer (used when ``owned_by`` is generic)."""
        return False

    @abc.abstractmethod
    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Version, model, speculative setup and metrics state of a server of this dialect.

        Raises:
            ServerError: The server cannot be reached or is still loading.
        """

    def metrics_off_reason(self, status: int) -> str | None:
        """Why a ``/metrics`` status means metrics are off; ``None`` when it does not."""
        return self.metrics_off_text if status in self.metrics_off_statuses else None

    async def metrics_state(
        self, client: ServerClient, off_by_config: bool
    ) -> tuple[bool | None, str | None, Scrape | None]:
        """``(metrics_enabled, metrics_reason, scrape)``; no request when the config says off."""
        if off_by_config:
            return False, self.metrics_off_text, None
        status, scrape, detail = await scrape_metrics(client, self.metrics_path)
        reason = self.metrics_off_reason(status)
        if reason is not None:
            return False, reason, None
        if scrape is None:
            return None, detail, None
        return True, None, scrape

    async def side_figures(
        self, client: ServerClient, info: ServerInfo, scrape: Scrape
    ) -> dict[str, tuple[float, str]]:
        """Window fields ``/metrics`` lacks that a passive info endpoint gives, as
        ``name -> (value, source)``; asked at most every :data:`SIDE_EVERY_S` seconds, and never
        of an endpoint that makes the server do model work. None by default."""
        return {}

    async def progress(self, client: ServerClient, info: ServerInfo, last: Any) -> Any:
        """What the server says of the requests it is running, read at every scrape just before
        ``/metrics`` and handed to :meth:`derive_window` beside it (``WindowBuilder.progress``):
        for servers whose counters move only when a request ends. ``last`` is the previous
        answer. One bounded, passive request at most; none by default."""
        return None

    def scrape_notes(self, scrape: Scrape) -> dict[str, str]:
        """Notes a scrape deserves before any number is derived (e.g. no series of ours)."""
        return {}

    @abc.abstractmethod
    def derive_window(
        self, b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
    ) -> None:
        """Fill ``b`` from the current scrape and the one ``dt`` seconds before (or none)."""

    @abc.abstractmethod
    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """The requests that stream ``request`` on this server."""

    @abc.abstractmethod
    def parse_chunk(self, acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
        """Read one decoded stream event that arrived at clock time ``t`` into ``acc``."""

    def server_decode_steps(self, stats: Mapping[str, Any]) -> int | None:
        """The decode-step count the server reported for a bursty stream, if any."""
        return decode_steps(stats) if self.stream_in_bursts else None

    def step_note(self) -> str | None:
        """How steps are counted when each chunk is one engine step (``None``: bursts)."""
        return None

    def spec_figures(
        self, info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """The server's own per-request accept length and draft acceptance rate."""
        if "timings" in stats:
            return spec_from_timings(stats, notes)
        spec = stats.get("speculative_decoding")
        if isinstance(spec, Mapping):
            return as_float(spec.get("mean_acceptance_length")), as_float(
                spec.get("draft_acceptance_rate")
            )
        self.no_spec_stats(notes)
        return None, None

    def no_spec_stats(self, notes: dict[str, str]) -> None:
        """Say why a stream carried no speculative stats."""
        notes.setdefault("draft_acceptance_rate", "the server reports no speculative stats")
        notes.setdefault("accept_length", "the server reports no speculative stats")

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """Tokens per verify step from counter deltas over a run, bonus token included."""
        return None


@functools.cache
def all_dialects() -> tuple[ServerDialect, ...]:
    """Every dialect, in the order they are asked to recognise a server."""
    found: list[ServerDialect] = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{info.name}")
        dialect = getattr(module, "DIALECT", None)
        if isinstance(dialect, ServerDialect):
            found.append(dialect)
    return tuple(sorted(found, key=lambda d: (d.fingerprint_order, d.dialect.value)))


def dialect_for(dialect: Dialect) -> ServerDialect:
    """The module that speaks ``dialect``.

    Raises:
        KeyError: No module speaks it.
    """
    for candidate in all_dialects():
        if candidate.dialect is dialect:
            return candidate
    raise KeyError(f"no module in specwatch.sources.dialects speaks {dialect.value}")


def dialect_owning(owner: str) -> ServerDialect | None:
    """The dialect a ``/v1/models`` ``owned_by`` value names, if any."""
    owner = owner.lower()
    for candidate in all_dialects():
        if owner in candidate.owned_by:
            return candidate
    return None


__all__ = [
    "ONE_CHUNK_PER_STEP",
    "SIDE_EVERY_S",
    "ServerDialect",
    "StreamPlan",
    "StreamRequest",
    "all_dialects",
    "dialect_for",
    "dialect_owning",
]
