"""The one rule for adding up a ``/metrics`` family's series, used by every dialect.

A server writes one family as many series that differ in labels, and the labels say what each
series is, so they say how the series combine:

- **Replicas** (:data:`REPLICA_LABELS`: ``tp_rank``, ``pp_rank``, ``moe_ep_rank``) repeat the
  same numbers (every tensor-parallel rank sees the same batch): counted once.
- **Parallel schedulers** (:data:`SCHEDULER_LABELS`: SGLang's ``dp_rank``, vLLM's ``engine``)
  are separate engines stepping side by side: counters and counts (requests, tokens, passes)
  sum; a rate per step is worked out per scheduler and then combined (Δt / Δpasses of two
  ranks stepping in parallel is not Δt over their summed passes); ratio gauges (KV usage, prefix
  hit rate, accept length) are a mean over schedulers, never a sum.
- **Breakdowns** (:data:`BREAKDOWN_LABELS`: SGLang's ``priority``) repeat a total split by a
  label: with ``--enable-priority-scheduling`` SGLang 0.5.23 writes ``num_running_reqs`` once
  with ``priority=""`` (the total) and again per priority. Where the total is there, the
  breakdown is dropped; where only the breakdown is, it sums to the total.
- **Series set apart** are not the serving engine's: another ``engine_type`` than the serving
  one (SGLang writes ``unified``, ``prefill``, ``decode`` or ``dynamic``), or, for a gauge, extra
  labels only some series carry (SGLang's ``--extra-metric-labels``): excluded.
- Any other label (``mode``, ``is_streaming``, ``le``) partitions a counter: its series sum.

Labels as SGLang writes them: ``scheduler_metrics_mixin.py`` ``init_metrics`` (0.5.23:
``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``, ``moe_ep_rank``, ``priority=""``
with priority scheduling, ``dp_rank`` when data-parallel, then the extra labels) and
``metrics_collector.py`` ``QueueCount`` (the per-priority breakdown).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from specwatch.sources.metrics.prom_replicas import REPLICA_LABELS, dedupe_replicas

if TYPE_CHECKING:
    from specwatch.sources.metrics.prom import LabelMatch, Scrape
    from specwatch.sources.metrics.sample import Sample

SCHEDULER_LABELS = ("dp_rank", "engine")
"""Labels of parallel schedulers: SGLang's data-parallel ranks, vLLM's data-parallel engines."""
BREAKDOWN_LABELS = ("priority",)
"""Labels that split a total the server also writes (as the empty value or no label)."""
SERVING_ENGINE_TYPES = ("unified", "decode", "dynamic", "prefill")
"""SGLang ``engine_type`` values, the serving one first: a server writes one; where a scrape
holds several (a PD pair behind one exporter) the decode side is where tokens are generated."""

_NOT_IDENTITY = frozenset((*REPLICA_LABELS, *SCHEDULER_LABELS))


def series(scrape: Scrape, name: str, where: LabelMatch | None = None) -> list[Sample]:
    """The series of ``name`` that count: replicas once, the serving engine type only, a
    breakdown dropped when its total is there."""
    found = scrape.select(name, where)
    if len(found) < 2:
        return found
    found = _serving_engine_type(found)
    for label in BREAKDOWN_LABELS:
        if any(not s.labels.get(label) for s in found) and any(s.labels.get(label) for s in found):
            found = [s for s in found if not s.labels.get(label)]
    return dedupe_replicas(found)


def gauge_series(scrape: Scrape, name: str, where: LabelMatch | None = None) -> list[Sample]:
    """:func:`series` of a gauge, less series set apart by labels only some carry.

    Of the groups of series alike but for scheduler labels, the one with the fewest labels
    (then the most series) is the serving engine's.
    """
    found = series(scrape, name, where)
    groups: dict[frozenset[tuple[str, str]], list[Sample]] = {}
    for s in found:
        key = frozenset((k, v) for k, v in s.labels.items() if k not in _NOT_IDENTITY)
        groups.setdefault(key, []).append(s)
    if len(groups) < 2:
        return found
    return min(groups.items(), key=lambda kv: (len(kv[0]), -len(kv[1])))[1]


def count(scrape: Scrape, name: str, where: LabelMatch | None = None) -> float | None:
    """A counter or count summed over schedulers and partitions (``None``: no series)."""
    found = series(scrape, name, where)
    return math.fsum(s.value for s in found) if found else None


def ratio_mean(scrape: Scrape, name: str, where: LabelMatch | None = None) -> float | None:
    """A ratio gauge as the mean over schedulers (``NaN`` series left out; ``None``: none)."""
    values = [s.value for s in gauge_series(scrape, name, where) if math.isfinite(s.value)]
    return math.fsum(values) / len(values) if values else None


def per_scheduler(
    scrape: Scrape, name: str, where: LabelMatch | None = None
) -> dict[tuple[str, ...], float]:
    """Scheduler (its :data:`SCHEDULER_LABELS` values) -> ``name`` summed over its partitions."""
    out: dict[tuple[str, ...], float] = {}
    for s in series(scrape, name, where):
        key = scheduler_of(s.labels)
        out[key] = out.get(key, 0.0) + s.value
    return out


def scheduler_of(labels: Mapping[str, str]) -> tuple[str, ...]:
    """Which parallel scheduler wrote a series (``("", "")`` for a lone one)."""
    return tuple(labels.get(label, "") for label in SCHEDULER_LABELS)


def per_scheduler_delta(
    cur: Scrape, prev: Scrape, name: str, where: LabelMatch | None = None
) -> dict[tuple[str, ...], float]:
    """Scheduler -> ``cur − prev`` of a counter (a scheduler new in ``cur`` counts from 0)."""
    before = per_scheduler(prev, name, where)
    return {k: v - before.get(k, 0.0) for k, v in per_scheduler(cur, name, where).items()}


def mean_of(values: Iterable[float]) -> float | None:
    """The mean of ``values`` (``None`` when there are none)."""
    got = list(values)
    return math.fsum(got) / len(got) if got else None


def _serving_engine_type(found: list[Sample]) -> list[Sample]:
    kinds = {s.labels.get("engine_type") for s in found}
    if len(kinds) < 2:
        return found
    serving = next((k for k in SERVING_ENGINE_TYPES if k in kinds), None)
    if serving is None:
        serving = min(k for k in kinds if k is not None)
    return [s for s in found if s.labels.get("engine_type", serving) == serving]


__all__ = [
    "BREAKDOWN_LABELS",
    "SCHEDULER_LABELS",
    "SERVING_ENGINE_TYPES",
    "count",
    "gauge_series",
    "mean_of",
    "per_scheduler",
    "per_scheduler_delta",
    "ratio_mean",
    "scheduler_of",
    "series",
]
