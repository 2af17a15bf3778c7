"""The telemetry base: counters a simulated server keeps and their Prometheus exposition.

Each server's ``*_metrics`` module subclasses :class:`Telemetry`: the engine calls its
``on_*`` hooks with the server's own update timing, and :meth:`Telemetry.families` builds that
server's metric families (names and labels per imitated version) with ``prometheus_client``
(no hand formatting). One :class:`Telemetry` lives for one server lifetime (a restart makes a
new one).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.truth import StepRecord


@dataclass(slots=True)
class Hist:
    """A cumulative histogram the way prometheus_client keeps one."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    """Per bucket (not cumulative); the last one is ``+Inf``."""
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: int = 1, sum_value: float | None = None) -> None:
        """Record ``value`` ``times`` times; ``sum_value`` (default value × times) goes to _sum."""
        if times <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.n += times
        self.total += value * times if sum_value is None else sum_value

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs ending with ``+Inf``."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class Telemetry:
    """Counters of one server lifetime; this base counts nothing and exposes no series.

    Args:
        config: the imitated server.
        start_t: when the model finished loading (the counters' start).
    """

    def __init__(self, config: SimConfig, start_t: float) -> None:
        self.config = config
        self.start_t = start_t

    # --- engine listener (see ``specwatch.sim.engine.EngineListener``) ---------------------

    def on_prefill(self, req: SimRequest, t: float) -> None:
        """``req`` got its first token at ``t``."""

    def on_step(
        self, t: float, step: StepRecord, decoded: list[tuple[SimRequest, int, int, int]]
    ) -> None:
        """A batch step ended; ``decoded`` holds (request, tokens, accepted, proposed)."""

    def on_finish(self, req: SimRequest, t: float) -> None:
        """``req`` finished at ``t``."""

    # --- exposition ------------------------------------------------------------------------

    def families(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> list[Metric]:
        """The metric families of a scrape at ``t`` (running requests, waiting count, KV use)."""
        return []

    def exposition(
        self, running: list[SimRequest], waiting: int, t: float, created_unix: float, kv: float
    ) -> bytes:
        """The ``/metrics`` body of a scrape at ``t``."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self.families(running, waiting, t, created_unix, kv)))
        return generate_latest(registry)


class _Collector:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


# --- family builders -------------------------------------------------------------------------


def gauge(name: str, doc: str, labels: dict[str, str], value: float) -> GaugeMetricFamily:
    """A gauge family with one series."""
    g = GaugeMetricFamily(name, doc, labels=list(labels))
    g.add_metric(list(labels.values()), value)
    return g


def counter(
    name: str,
    doc: str,
    series: Sequence[tuple[dict[str, str], float]],
    created: float | None = None,
) -> CounterMetricFamily:
    """A counter family; the label names are those of the first series."""
    labelnames = list(series[0][0]) if series else []
    c = CounterMetricFamily(name, doc, labels=labelnames)
    for labels, value in series:
        c.add_metric([labels[k] for k in labelnames], value, created=created)
    return c


def histogram(
    name: str,
    doc: str,
    series: Sequence[tuple[dict[str, str], Hist]],
    created: float | None = None,
) -> HistogramMetricFamily:
    """A histogram family; the label names are those of the first series."""
    labelnames = list(series[0][0]) if series else []
    h = HistogramMetricFamily(name, doc, labels=labelnames)
    for labels, hist in series:
        values = [labels[k] for k in labelnames]
        h.add_metric(values, hist.cumulative(), hist.total)
        if created is not None:
            h.samples.append(Sample(name + "_created", dict(labels), created, None, None))
    return h
