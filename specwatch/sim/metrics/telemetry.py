"""The telemetry base: counters a simulated server keeps and their Prometheus exposition.

Each server's ``*_metrics`` module subclasses :class:`Telemetry`: the engine calls its
``on_*`` hooks with the server's own update timing, and :meth:`Telemetry.families` builds that
server's metric families with ``prometheus_client`` (no hand formatting), most of them from a
table of :class:`Family` rows (name, kind, help, the counter it shows, the versions that have
it) that :func:`write` turns into families. One :class:`Telemetry` lives for one server lifetime
(a restart makes a new one).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

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

Series = Sequence[tuple[dict[str, str], float]]
"""``(labels, value)`` of each series of a family."""


@dataclass(frozen=True, slots=True)
class Family:
    """One row of a dialect's table: a metric family and where its values come from."""

    kind: Literal["counter", "gauge", "histogram"]
    name: str
    doc: str
    source: str
    """The attribute of each labelled holder that holds the value: a number, a :class:`Hist`,
    a mapping from values of the :attr:`by` label to numbers, or ``None`` (no series for that
    holder; a family no holder has is left out)."""
    by: str = ""
    when: Callable[[SimConfig], bool] | None = None
    """Whether the imitated server has the family (``None``: every version)."""


def since(version: str) -> Callable[[SimConfig], bool]:
    """A :attr:`Family.when` for a family ``version`` introduced."""
    return lambda config: config.at_least(version)


def until(version: str) -> Callable[[SimConfig], bool]:
    """A :attr:`Family.when` for a family ``version`` removed."""
    return lambda config: not config.at_least(version)


def write(
    table: Sequence[Family],
    config: SimConfig,
    holders: Sequence[tuple[dict[str, str], object]],
    created: float | None = None,
) -> list[Metric]:
    """The families of ``table`` that ``config``'s server has, one series per labelled holder
    (per mapping key with :attr:`Family.by`), in table order."""
    out: list[Metric] = []
    for family in table:
        if family.when is not None and not family.when(config):
            continue
        found = [(labels, getattr(holder, family.source)) for labels, holder in holders]
        values = [(labels, value) for labels, value in found if value is not None]
        if not values:
            continue
        if family.kind == "histogram":
            out.append(histogram(family.name, family.doc, values, created))
            continue
        series: list[tuple[dict[str, str], float]] = []
        for labels, value in values:
            if family.by:
                series += [({**labels, family.by: k}, float(v)) for k, v in value.items()]
            else:
                series.append((labels, float(value)))
        if family.kind == "gauge":
            out.append(gauge(family.name, family.doc, series))
        else:
            out.append(counter(family.name, family.doc, series, created))
    return out


def gauge(name: str, doc: str, series: Series) -> GaugeMetricFamily:
    """A gauge family; the label names are those of the first series."""
    g = GaugeMetricFamily(name, doc, labels=list(series[0][0]) if series else [])
    for labels, value in series:
        g.add_metric(list(labels.values()), value)
    return g


def counter(
    name: str, doc: str, series: Series, created: float | None = None
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
