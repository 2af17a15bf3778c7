"""A fleet through Prometheus: every server and GPU it scrapes, joined, in a constant number
of queries per refresh (see :mod:`specwatch.sources.prometheus.queries`).

Counters go through ``rate()`` over a window of at least two scrape intervals (four by default,
like Grafana's ``$__rate_interval``), the intervals read from ``/api/v1/targets``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specwatch.core.fleet import (
    FleetGpu,
    FleetServer,
    FleetTotals,
    NodeJoin,
    fleet_totals,
    is_target,
    join_gpus,
)
from specwatch.core.sanitize import sanitize_line
from specwatch.sources.prometheus.api import (
    CUT_WHY,
    MAX_SERIES,
    PrometheusClient,
    RangeSeries,
    VectorSample,
    off_loop,
)
from specwatch.sources.prometheus.model_names import ModelNames, target_address
from specwatch.sources.prometheus.queries import (
    derive_gpus,
    derive_servers,
    gpu_query,
    label_matcher,
    server_gauges_query,
    server_rates_query,
)

DEFAULT_SCRAPE_S = 15.0
"""Assumed scrape interval when ``/api/v1/targets`` does not say (a query front end)."""
MIN_INTERVALS = 2
TARGETS_MAX_AGE_S = 300.0
MAX_SERVERS = 10_000
"""The largest fleet shown: past it, the first servers by address and one line saying so."""


@dataclass(frozen=True, slots=True)
class FleetReading:
    """One refresh of the whole fleet."""

    t: float
    """The source's clock (monotonic by default)."""
    at: float
    """Unix seconds at which Prometheus evaluated the queries."""
    window_s: float
    """The ``rate()`` window."""
    servers: tuple[FleetServer, ...]
    gpus: tuple[FleetGpu, ...]
    joins: tuple[NodeJoin, ...]
    totals: FleetTotals
    queries: int
    """HTTP requests to Prometheus this refresh cost (targets included when re-read)."""
    cost_s: float
    """CPU seconds of the calling thread (the event loop) during the refresh: requests, parsing,
    derivation, and any other task that ran on that loop meanwhile. Other threads (an
    in-process simulator) are not counted."""
    errors: tuple[str, ...] = ()
    """One line per query that failed; the other parts of the reading still stand."""
    skipped: str | None = None
    """One line naming the series left out as unusable (a bad ``instance``, a label that is
    not text); ``None``: none."""


@dataclass(frozen=True, slots=True)
class FleetHistory:
    """Figures over a past range, one point per step, for graphs at start-up."""

    step_s: float
    servers: dict[str, tuple[FleetServer, ...]] = field(default_factory=dict)
    """Server instance -> its figures at each step (``window.t`` is the unix time)."""
    gpus: dict[str, tuple[FleetGpu, ...]] = field(default_factory=dict)
    """GPU key -> its samples at each step (``sample.t`` is the unix time)."""
    queries: int = 0


class PrometheusSource:
    """Reads servers and GPUs from one Prometheus.

    Args:
        client: The API client (owned by the caller).
        server_match: A label matcher (``'{job="vllm"}'``) narrowing the servers.
        gpu_match: A label matcher narrowing the dcgm-exporter series.
        pairs: Explicit ``(server target, exporter target)`` pairings
            (:func:`specwatch.core.fleet.parse_node_pair`).
        rate_window_s: The ``rate()`` window; by default four scrape intervals, and never
            under two.
        clock: Monotonic clock for :attr:`FleetReading.t`.
        models: Asks servers whose metrics name no model (llama.cpp) for it; ``None``: not
            asked, their model stays unknown.

    Raises:
        ValueError: A matcher that is not ``{...}``.
    """

    def __init__(
        self,
        client: PrometheusClient,
        server_match: str | None = None,
        gpu_match: str | None = None,
        pairs: Sequence[tuple[str, str]] = (),
        rate_window_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        models: ModelNames | None = None,
    ) -> None:
        self.client = client
        self.models = models
        self.server_match = label_matcher(server_match)
        self.gpu_match = label_matcher(gpu_match)
        self.pairs = tuple(pairs)
        self.rate_window_s = rate_window_s
        self.clock = clock
        self.scrape_interval_s: float | None = None
        """The longest ``scrapeInterval`` of the active targets (``None`` until read)."""
        self._targets_at: float | None = None
        self.addresses: dict[str, str] = {}
        """``instance`` → where Prometheus scrapes it (read with the targets)."""

    async def window_s(self) -> float:
        """The ``rate()`` window: ≥ 2 scrape intervals (targets re-read every 5 minutes)."""
        now = self.clock()
        if self._targets_at is None or now - self._targets_at > TARGETS_MAX_AGE_S:
            self._targets_at = now
            try:
                targets = await self.client.targets()
            except Exception:  # a query front end may not have /api/v1/targets
                targets = []
            intervals = [x.scrape_interval_s for x in targets if x.scrape_interval_s]
            self.addresses = {
                x.labels["instance"]: address
                for x in targets
                if "instance" in x.labels and (address := target_address(x.scrape_url))
            }
            self.scrape_interval_s = max(intervals) if intervals else None
        interval = self.scrape_interval_s or DEFAULT_SCRAPE_S
        floor = MIN_INTERVALS * interval
        return max(self.rate_window_s or 4 * interval, floor)

    async def refresh(self, at: float | None = None) -> FleetReading:
        """Read every server and GPU once (three queries, plus targets now and then).

        Args:
            at: Unix time to evaluate at (default: now, by Prometheus's clock).

        Never raises for a failed query: its error is in :attr:`FleetReading.errors`.
        """
        cpu0 = time.thread_time()
        sent0 = self.client.requests
        t = self.clock()
        window = await self.window_s()
        when = time.time() if at is None else at
        errors: list[str] = []
        gauges = await self._query(server_gauges_query(self.server_match), when, errors)
        cut_before = self.client.skipped.get(CUT_WHY, 0)
        rates = await self._query(server_rates_query(window, self.server_match), when, errors)
        rates_cut = self.client.skipped.get(CUT_WHY, 0) > cut_before
        gpu_samples = await self._query(gpu_query(self.gpu_match), when, errors)
        usable_gauges, usable_rates = self._usable(gauges), self._usable(rates)
        # thousands of servers take a while to join: off the event loop a screen is drawn on
        servers, gpus, joins, found, spent = await off_loop(
            self._derive, usable_gauges, usable_rates, gpu_samples, t, window
        )
        if self.models is not None:
            servers = await self.models.fill(servers, self.addresses)
        skipped = self.client.take_skipped()
        if found > MAX_SERVERS:
            too_many = (
                f"fleet too large: {found} servers, the first {MAX_SERVERS} by address shown:"
                " narrow it with --server-match"
            )
            skipped = too_many if skipped is None else sanitize_line(f"{too_many}; {skipped}", 400)
        blank = sum(s.window.gen_tok_s is None for s in servers)
        if blank and (rates_cut or found > MAX_SERVERS) and not errors:
            why = (
                f"their rates were past the first {MAX_SERIES} series of the answer"
                if rates_cut
                else "the rates answer held none for them"
            )
            # Said first: a cut line is cut at its end on a narrow screen.
            line = f"tok/s – on {blank} of the {len(servers)} servers shown: {why}"
            skipped = sanitize_line(line if skipped is None else f"{line}; {skipped}", 400)
        return FleetReading(
            t=t,
            at=when,
            window_s=window,
            servers=tuple(servers),
            gpus=tuple(gpus),
            joins=tuple(joins),
            totals=fleet_totals(servers),
            queries=self.client.requests - sent0,
            cost_s=time.thread_time() - cpu0 + spent,
            errors=tuple(errors),
            skipped=skipped,
        )

    async def history(self, start: float, end: float, step_s: float) -> FleetHistory:
        """Server figures and GPU samples over ``[start, end]`` (two range queries).

        ``step_s`` is the graph's column width; it grows so that no series is longer than
        the client's point limit.

        Raises:
            PrometheusError: A range query failed.
        """
        sent0 = self.client.requests
        window = await self.window_s()
        sent_targets = self.client.requests - sent0
        rates = await self.client.query_range(
            server_rates_query(max(window, step_s), self.server_match), start, end, step_s
        )
        gpu_series = await self.client.query_range(gpu_query(self.gpu_match), start, end, step_s)
        servers, gpus = await off_loop(self._history_of, rates, gpu_series, window, step_s)
        return FleetHistory(
            step_s=step_s,
            servers={k: tuple(v) for k, v in servers.items()},
            gpus={k: tuple(v) for k, v in gpus.items()},
            queries=self.client.requests - sent0 - sent_targets,
        )

    def _history_of(
        self,
        rates: Sequence[RangeSeries],
        gpu_series: Sequence[RangeSeries],
        window: float,
        step_s: float,
    ) -> tuple[dict[str, list[FleetServer]], dict[str, list[FleetGpu]]]:
        servers: dict[str, list[FleetServer]] = {}
        for at, vector in _by_time(rates):
            for s in derive_servers([], self._usable(vector), at, max(window, step_s)):
                servers.setdefault(s.instance, []).append(s)
        gpus: dict[str, list[FleetGpu]] = {}
        for at, vector in _by_time(gpu_series):
            for g in derive_gpus(vector, at):
                gpus.setdefault(g.key, []).append(g)
        return servers, gpus

    def _derive(
        self,
        gauges: list[VectorSample],
        rates: list[VectorSample],
        gpu_samples: list[VectorSample],
        t: float,
        window: float,
    ) -> tuple[list[FleetServer], list[FleetGpu], list[NodeJoin], int, float]:
        """Servers (of the first :data:`MAX_SERVERS` addresses), GPUs, their joins, how many
        addresses were found, and the CPU seconds this took (on the calling thread)."""
        cpu0 = time.thread_time()
        servers, gpus, joins, found = self._derive_all(gauges, rates, gpu_samples, t, window)
        return servers, gpus, joins, found, time.thread_time() - cpu0

    def _derive_all(
        self,
        gauges: list[VectorSample],
        rates: list[VectorSample],
        gpu_samples: list[VectorSample],
        t: float,
        window: float,
    ) -> tuple[list[FleetServer], list[FleetGpu], list[NodeJoin], int]:
        instances = {s.labels.get("instance", "") for s in (*gauges, *rates)}
        found = len(instances)
        if found > MAX_SERVERS:
            kept = set(sorted(instances)[:MAX_SERVERS])
            gauges = [s for s in gauges if s.labels.get("instance", "") in kept]
            rates = [s for s in rates if s.labels.get("instance", "") in kept]
        servers = derive_servers(gauges, rates, t, window)
        gpus = derive_gpus(gpu_samples, t)
        joins = join_gpus(servers, gpus, self.pairs)
        return servers, gpus, joins, found

    def _usable(self, samples: Sequence[VectorSample]) -> list[VectorSample]:
        """Server series whose ``instance`` is a ``host:port`` (the others counted as left out)."""
        out: list[VectorSample] = []
        for s in samples:
            if is_target(s.labels.get("instance", "")):
                out.append(s)
            else:
                self.client.skip("with an instance that is not host:port")
        return out

    async def _query(self, expr: str, at: float, errors: list[str]) -> list[VectorSample]:
        try:
            return await self.client.query(expr, at)
        except Exception as exc:  # one failed group must not blank the others
            errors.append(sanitize_line(str(exc), 400))
            return []


def _by_time(series: Sequence[RangeSeries]) -> list[tuple[float, list[VectorSample]]]:
    """A matrix as one instant vector per timestamp, in time order."""
    steps: dict[float, list[VectorSample]] = {}
    for s in series:
        for at, value in s.points:
            steps.setdefault(at, []).append(VectorSample(s.labels, at, value))
    return sorted(steps.items())


__all__ = ["DEFAULT_SCRAPE_S", "FleetHistory", "FleetReading", "PrometheusSource"]
