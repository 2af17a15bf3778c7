"""One parsed ``/metrics`` page (:class:`Scrape`), and the one rule for adding up its series.

A :class:`Scrape` holds the page's samples indexed by name and answers a dialect's questions
(a total, a mean, a histogram). Which series of a name count is decided here for every dialect:

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

Which series count and how a histogram's buckets line up depend only on the samples' labels,
and a live watch asks about the same series every second: :class:`MetricsReader
<specwatch.sources.metrics.parse.MetricsReader>` keeps one labels mapping per series from scrape
to scrape, so the answers are remembered by the identity of those mappings (kept alive with the
answer, so an identity cannot be reused while remembered). Samples built anew each time (a full
parse) simply miss and are worked out as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby, repeat
from operator import add, is_, itemgetter, lt
from typing import NamedTuple, cast


class Sample(NamedTuple):
    """One exposed sample (a named tuple: a scrape makes thousands, a tuple is cheap to make)."""

    name: str
    labels: Mapping[str, str]
    value: float
    key: str = ""
    """The series as text (see :func:`~specwatch.sources.metrics.prom.series_key`); empty when
    not worked out yet."""


REPLICA_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
"""Labels whose series repeat the same numbers (every TP rank sees the same batch): keep one."""
REMEMBERED = 128
"""Answers remembered per question (more than the names a dialect asks about per scrape)."""

_LABELS = itemgetter(1)
_NO_REPLICA_LABEL = frozenset(REPLICA_LABELS).isdisjoint
"""Whether labels carry none of :data:`REPLICA_LABELS` (one C call per sample)."""
_NO_BOUND = math.nan
"""The bound of a bucket without a usable ``le`` (skipped)."""


class _SameLabels:
    """The labels mappings of a list of samples, equal to another such list only when it holds
    the very same mappings (kept alive here, so an identity cannot be reused meanwhile)."""

    __slots__ = ("_hash", "labels")

    def __init__(self, samples: Sequence[Sample]) -> None:
        self.labels: tuple[Mapping[str, str], ...] = tuple(map(_LABELS, samples))
        self._hash = hash(tuple(map(id, self.labels)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _SameLabels)
            and len(other.labels) == len(self.labels)
            and all(map(is_, other.labels, self.labels))
        )


def dedupe_replicas(samples: list[Sample]) -> list[Sample]:
    """Keep, of series that differ only in replica labels, the lowest-ranked one.

    The answer may be ``samples`` itself: callers must not change it.
    """
    if len(samples) < 2:
        return samples
    keep = _kept(_SameLabels(samples))
    return samples if keep is None else [samples[i] for i in keep]


@lru_cache(maxsize=REMEMBERED)
def _kept(same: _SameLabels) -> tuple[int, ...] | None:
    """Indexes of the samples :func:`dedupe_replicas` keeps (``None``: all)."""
    labels = same.labels
    if all(map(_NO_REPLICA_LABEL, labels)):
        return None
    best: dict[tuple[tuple[str, str], ...], int] = {}
    for i, one in enumerate(labels):
        group = tuple(sorted((k, v) for k, v in one.items() if k not in REPLICA_LABELS))
        current = best.get(group)
        if current is None or _rank_key(one) < _rank_key(labels[current]):
            best[group] = i
    return tuple(best.values())


def _rank_key(labels: Mapping[str, str]) -> tuple[int, ...]:
    key: list[int] = []
    for label in REPLICA_LABELS:
        value = labels.get(label, "0")
        key.append(int(value) if value.isdigit() else 1 << 30)
    return tuple(key)


def bucket_bounds(buckets: list[Sample]) -> tuple[float, ...] | None:
    """The ``le`` bounds of ``buckets`` when every one is usable and they strictly increase
    (then each bucket is its own bound, in order); ``None`` otherwise."""
    return _bounds(_SameLabels(buckets))


@lru_cache(maxsize=REMEMBERED)
def _bounds(same: _SameLabels) -> tuple[float, ...] | None:
    bounds = tuple(bound(labels.get("le", "nan")) for labels in same.labels)
    if all(le is not _NO_BOUND for le in bounds) and all(map(lt, bounds, bounds[1:])):
        return bounds
    return None


@lru_cache(maxsize=4096)
def bound(text: str) -> float:
    """The bound an ``le`` label gives (:data:`_NO_BOUND` when it gives none)."""
    try:
        le = float(text)
    except ValueError:
        return _NO_BOUND
    return _NO_BOUND if math.isnan(le) else le


LabelMatch = Mapping[str, "str | re.Pattern[str]"]


@dataclass(frozen=True, slots=True)
class Histogram:
    """A histogram summed over its series: cumulative bucket counts by upper bound."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]
    """``(le, cumulative count)`` sorted by ``le``; the last ``le`` is ``inf``."""

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations between ``earlier`` and this one (buckets matched by bound)."""
        before = dict(earlier.buckets)
        return Histogram(
            sum=self.sum - earlier.sum,
            count=self.count - earlier.count,
            buckets=tuple((le, c - before.get(le, 0.0)) for le, c in self.buckets),
        )

    @property
    def mean(self) -> float | None:
        """``sum / count``, or ``None`` with no observations."""
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile by linear interpolation inside buckets (as PromQL does).

        ``None`` with no observations; an answer in the ``+Inf`` bucket is clamped to the highest
        finite bound.
        """
        if not self.buckets or self.count <= 0:
            return None
        total = self.buckets[-1][1]
        if total <= 0:
            return None
        rank = q * total
        prev_le, prev_c = 0.0, 0.0
        for le, c in self.buckets:
            if c >= rank:
                if math.isinf(le):
                    return prev_le
                if c == prev_c:
                    return le
                return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
            prev_le, prev_c = le, c
        return prev_le


_NAME = itemgetter(0)
"""A :class:`Sample`'s name."""
_VALUE = itemgetter(2)
"""A :class:`Sample`'s value."""


@dataclass(frozen=True, slots=True)
class Scrape:
    """One parsed ``/metrics`` body."""

    samples: tuple[Sample, ...]
    types: Mapping[str, str] = field(default_factory=dict)
    """Declared family types by family name (as the parser names them, ``_total`` stripped)."""
    error: str | None = None
    """What could not be parsed (the samples above are everything that could)."""
    _by_name: dict[str, list[Sample]] = field(init=False, repr=False, compare=False)
    _memo: dict[tuple[object, ...], object] = field(init=False, repr=False, compare=False)
    """Answers already worked out: a window asks the previous scrape what it asked it as the
    current one a scrape ago (a scrape never changes)."""

    def __post_init__(self) -> None:
        # A dialect asks for a few dozen names per scrape; an index beats a scan per question.
        # Samples of one name come in runs (a family's lines are grouped), so grouping runs
        # in C beats a lookup per sample on a 400 KB exposition.
        index: dict[str, list[Sample]] = {}
        for name, run in groupby(self.samples, _NAME):
            got = index.get(name)
            if got is None:
                index[name] = list(run)
            else:
                got.extend(run)
        object.__setattr__(self, "_by_name", index)
        object.__setattr__(self, "_memo", {})

    def names(self) -> set[str]:
        """All sample names present."""
        return set(self._by_name)

    def has(self, name: str) -> bool:
        """Whether any sample is named ``name``."""
        return name in self._by_name

    def has_prefix(self, prefix: str) -> bool:
        """Whether any sample name starts with ``prefix``."""
        return any(name.startswith(prefix) for name in self._by_name)

    def select(self, name: str, where: LabelMatch | None = None) -> list[Sample]:
        """Samples named ``name`` whose labels match ``where`` (exact strings or regexes)."""
        found = self._by_name.get(name, [])
        if not where:
            return list(found)
        return [s for s in found if _matches(s.labels, where)]

    def total(self, name: str, where: LabelMatch | None = None) -> float | None:
        """Sum over engines / DP ranks of ``name``; replicated TP/PP/EP ranks counted once.

        ``None`` when no series matches.
        """
        memo = ("total", name, _where_key(where) if where else None)
        if memo in self._memo:
            return cast("float | None", self._memo[memo])
        chosen = self._chosen(name, where)
        total = math.fsum(map(_VALUE, chosen)) if chosen else None
        self._memo[memo] = total
        return total

    def _chosen(self, name: str, where: LabelMatch | None) -> list[Sample]:
        """:meth:`select` with replicas once (maybe the index's own list: not to be changed)."""
        if where:
            return dedupe_replicas(self.select(name, where))
        return dedupe_replicas(self._by_name.get(name, _NONE))

    def mean(self, name: str, where: LabelMatch | None = None) -> float | None:
        """Mean over engines / DP ranks (for ratio gauges); replicas counted once."""
        chosen = self._chosen(name, where)
        if not chosen:
            return None
        return math.fsum(map(_VALUE, chosen)) / len(chosen)

    def by_label(self, name: str, label: str, where: LabelMatch | None = None) -> dict[str, float]:
        """``label`` value -> sum over the other labels (replicas counted once)."""
        memo = ("by_label", name, label, _where_key(where))
        known = self._memo.get(memo)
        if known is not None:
            return dict(cast("dict[str, float]", known))
        out: dict[str, float] = {}
        for s in self._chosen(name, where):
            if label in s.labels:
                out[s.labels[label]] = out.get(s.labels[label], 0.0) + s.value
        self._memo[memo] = dict(out)
        return out

    def histogram(self, name: str, where: LabelMatch | None = None) -> Histogram | None:
        """The histogram family ``name`` (without suffix) summed over its series."""
        memo = ("histogram", name, _where_key(where))
        if memo in self._memo:
            return cast("Histogram | None", self._memo[memo])
        found = self._histogram(name, where)
        self._memo[memo] = found
        return found

    def _histogram(self, name: str, where: LabelMatch | None) -> Histogram | None:
        count = self.total(f"{name}_count", where)
        if count is None:
            return None
        total = self.total(f"{name}_sum", where) or 0.0
        chosen = self._chosen(f"{name}_bucket", where)
        bounds = bucket_bounds(chosen)
        if bounds is not None:  # one series: each bucket its own bound, in order
            counts = map(add, repeat(0.0), map(_VALUE, chosen))
            return Histogram(
                sum=total, count=count, buckets=tuple(zip(bounds, counts, strict=True))
            )
        buckets: dict[float, float] = {}
        for s in chosen:
            le = bound(s.labels.get("le", "nan"))
            if le is _NO_BOUND:
                continue
            buckets[le] = buckets.get(le, 0.0) + s.value
        return Histogram(sum=total, count=count, buckets=tuple(sorted(buckets.items())))


def series_key(sample: Sample) -> str:
    """A stable text key for one series: ``name{a="1",b="2"}``."""
    if sample.key:
        return sample.key
    return make_series_key(sample.name, sample.labels)


def make_series_key(name: str, labels: Mapping[str, str]) -> str:
    """The text of :func:`series_key` for ``name`` and ``labels``."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


_NONE: list[Sample] = []
"""No samples (shared: never changed)."""


def _where_key(where: LabelMatch | None) -> tuple[tuple[str, object], ...] | None:
    """``where`` as a key of :attr:`Scrape._memo` (patterns compare by pattern and flags)."""
    return tuple(sorted(where.items(), key=itemgetter(0))) if where else None


def _matches(labels: Mapping[str, str], where: LabelMatch | None) -> bool:
    if not where:
        return True
    for key, want in where.items():
        have = labels.get(key)
        if have is None:
            return False
        if isinstance(want, str):
            if have != want:
                return False
        elif not want.fullmatch(have):
            return False
    return True


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
    "REMEMBERED",
    "REPLICA_LABELS",
    "SCHEDULER_LABELS",
    "SERVING_ENGINE_TYPES",
    "Histogram",
    "LabelMatch",
    "Sample",
    "Scrape",
    "bound",
    "bucket_bounds",
    "count",
    "dedupe_replicas",
    "gauge_series",
    "make_series_key",
    "mean_of",
    "per_scheduler",
    "per_scheduler_delta",
    "ratio_mean",
    "scheduler_of",
    "series",
    "series_key",
]
