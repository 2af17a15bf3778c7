"""A fleet read directly: several servers' ``/metrics`` and dcgm-exporters, no Prometheus.

For a handful of servers given as ``--url A --url B [--dcgm D] [--node A=D]``. Each refresh
scrapes every server once (concurrently) and every exporter once, and answers with the same
:class:`~specwatch.sources.prometheus.fleet.FleetReading` the Prometheus source gives, so the fleet
screen, ``probe`` and the totals do not care where a fleet came from.

A server's figures are its metrics watcher's window (the single-server screen's); its rates for
the exact fleet totals come from the same two scrapes' raw counters, through the Prometheus
source's own derivation (:func:`~specwatch.sources.prometheus.queries.derive_servers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from specwatch.core.fleet import (
    FleetGpu,
    FleetServer,
    ServerRates,
    fleet_totals,
    join_gpus,
    target_of,
)
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import ServerInfo
from specwatch.sources.prometheus.api import VectorSample
from specwatch.sources.prometheus.fleet import FleetHistory, FleetReading
from specwatch.sources.prometheus.queries import COUNTERS, FIELD_LABEL, derive_servers

if TYPE_CHECKING:
    from specwatch.sources.dcgm.source import DcgmGpuSource
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import Endpoint
    from specwatch.sources.watcher import MetricsWatcher

DIRECT_JOB = "direct"
"""The ``job`` of a server read directly (Prometheus gives its scrape job's name)."""


def counter_rates(
    before: Mapping[str, float], after: Mapping[str, float], dt: float, dialect: str
) -> dict[str, float]:
    """Per-second rates of the fleet's counter fields between two summed scrapes (pure).

    Keys are :data:`~specwatch.sources.prometheus.queries.COUNTERS` fields of ``dialect``
    (``vllm:gen``...). A counter that went back (a restart) or is absent gives no rate.
    """
    out: dict[str, float] = {}
    if dt <= 0:
        return out
    for field, name, extra in COUNTERS:
        if not field.startswith(dialect + ":"):
            continue
        key = f"{name}{{{extra}}}" if extra else name
        a, b = before.get(key), after.get(key)
        if a is not None and b is not None and b >= a:
            out[field] = (b - a) / dt
    return out


class _Server:
    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.instance = target_of(endpoint.base_url)
        self.client: ServerClient | None = None
        self.info: ServerInfo | None = None
        self.watcher: MetricsWatcher | None = None
        self.counters: tuple[float, Mapping[str, float]] | None = None


class DirectFleetSource:
    """Servers and exporters read directly, as one fleet reading per refresh.

    Args:
        endpoints: The servers (``--url``, repeatable).
        dcgm: The exporters' GPU source (``--dcgm``), or ``None``.
        pairs: Explicit ``(server target, exporter target)`` pairings (``--node``).
        timeout_s: Per-request timeout for each server.
        clock: Monotonic seconds (the windows' ``t``).
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        dcgm: DcgmGpuSource | None = None,
        pairs: Sequence[tuple[str, str]] = (),
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.servers = [_Server(e) for e in endpoints]
        self.dcgm = dcgm
        self.pairs = tuple(pairs)
        self.timeout_s = timeout_s
        self.clock = clock
        self.requests = 0
        """HTTP requests sent so far (scrapes, detections, exporter polls)."""

    async def refresh(self, at: float | None = None) -> FleetReading:
        """Scrape every server and exporter once. Never raises: failures are in ``errors``."""
        cpu0 = time.thread_time()
        sent0 = self.requests
        t = self.clock()
        when = time.time() if at is None else at
        errors: list[str] = []
        results = await asyncio.gather(*(self._one(s, errors) for s in self.servers))
        servers = [s for s in results if s is not None]
        gpus = await self._gpus(errors)
        windows = [s.window.dt for s in servers if s.window.dt > 0]
        return FleetReading(
            t=t,
            at=when,
            window_s=max(windows) if windows else 0.0,
            servers=tuple(servers),
            gpus=tuple(gpus),
            joins=tuple(join_gpus(servers, gpus, self.pairs)),
            totals=fleet_totals(servers),
            queries=self.requests - sent0,
            cost_s=time.thread_time() - cpu0,
            errors=tuple(errors),
        )

    async def history(self, start: float, end: float, step_s: float) -> FleetHistory:
        """Nothing: a server's ``/metrics`` has no past (the graphs fill as it runs)."""
        return FleetHistory(step_s=step_s)

    async def _one(self, server: _Server, errors: list[str]) -> FleetServer | None:
        from specwatch.sources.detect import detect
        from specwatch.sources.http.client import ServerClient
        from specwatch.sources.watcher import MetricsWatcher

        if server.client is None:
            server.client = ServerClient(server.endpoint, timeout_s=self.timeout_s)
        if server.info is None or server.watcher is None:
            self.requests += 1
            try:
                server.info = await detect(server.client)
            except Exception as exc:  # down or loading: say so, try again next refresh
                errors.append(sanitize_line(f"{server.instance}: {exc}", 400))
                return None
            server.watcher = MetricsWatcher(server.client, server.info, clock=self.clock)
            server.counters = None
        info, watcher = server.info, server.watcher
        self.requests += 1
        window = await watcher.scrape()
        error = window.notes.get("error")
        if error:
            errors.append(sanitize_line(f"{server.instance}: {error}", 400))
            server.info = None  # detect again next time: it may have restarted as another
            return None
        now = (window.t, dict(watcher.last_counters))
        rates: dict[str, float] = {}
        if server.counters is not None:
            before_t, before = server.counters
            rates = counter_rates(before, now[1], now[0] - before_t, info.dialect.value)
        server.counters = now
        tagged = [
            VectorSample({"instance": server.instance, "job": DIRECT_JOB, FIELD_LABEL: f}, 0.0, v)
            for f, v in rates.items()
        ]
        derived = derive_servers([], tagged, window.t, window.dt)
        return FleetServer(
            instance=server.instance,
            job=DIRECT_JOB,
            dialect=info.dialect,
            model=info.model,
            window=window,
            rates=derived[0].rates if derived else ServerRates(),
        )

    async def _gpus(self, errors: list[str]) -> list[FleetGpu]:
        dcgm = self.dcgm
        if dcgm is None:
            return []
        self.requests += len(dcgm.urls)
        inventory = dcgm.inventory
        if inventory is None or not inventory.available:
            inventory = await asyncio.to_thread(dcgm.open)
        tick = await asyncio.to_thread(dcgm.sample)
        if tick.error:
            errors.append(sanitize_line(f"dcgm: {tick.error}", 400))
        inventory = dcgm.inventory or inventory
        statics = {g.index: g for g in inventory.gpus}
        where = {g.index: g for g in dcgm.gpu_info}
        out: list[FleetGpu] = []
        for sample in tick.samples:
            info = where.get(sample.index)
            static = statics.get(sample.index)
            if info is None or static is None:
                continue
            exporter = target_of(info.url)
            out.append(
                FleetGpu(
                    key=f"{exporter}/{static.uuid or info.node_gpu}",
                    instance=exporter,
                    hostname=info.node,
                    static=static,
                    sample=sample,
                    labels={k: v for k, v in info.k8s.items() if k in ("pod", "namespace")},
                    source="dcgm",
                )
            )
        return out

    async def aclose(self) -> None:
        """Close the servers' clients and stop the exporter source."""
        for s in self.servers:
            if s.client is not None:
                with contextlib.suppress(Exception):
                    await s.client.aclose()
        if self.dcgm is not None:
            with contextlib.suppress(Exception):
                self.dcgm.stop()


__all__ = ["DIRECT_JOB", "DirectFleetSource", "counter_rates"]
