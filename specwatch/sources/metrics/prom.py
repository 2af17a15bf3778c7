"""Prometheus text exposition: parsing (with ``prometheus_client``'s parser) and selection helpers.

:func:`parse_metrics` never raises: on input the parser rejects, it parses line by line, keeps
every sample it can and says what it dropped in :attr:`Scrape.error`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import add, itemgetter
from typing import cast

from prometheus_client.parser import text_string_to_metric_families

from specwatch.sources.metrics.prom_replicas import (
    _NO_BOUND,
    bound,
    bucket_bounds,
    dedupe_replicas,
)
from specwatch.sources.metrics.sample import Sample

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


def _families(text: str) -> tuple[list[Sample], dict[str, str]]:
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            labels = dict(s.labels)
            samples.append(Sample(s.name, labels, float(s.value), make_series_key(s.name, labels)))
    return samples, types


def parse_metrics(text: str) -> Scrape:
    """Parse a Prometheus text exposition; never raises.

    When ``prometheus_client`` rejects the text as a whole, every line is parsed on its own
    (with its family's ``# TYPE`` line), so one bad or truncated line costs only itself.
    """
    try:
        samples, types = _families(text)
        return Scrape(tuple(samples), types)
    except Exception as exc:  # the parser raises assorted types on bad input
        first_error = _describe(exc)
    samples = []
    types = {}
    bad: list[str] = []
    type_line: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                type_line[parts[2]] = line
            continue
        name = re.split(r"[\s{]", line, maxsplit=1)[0]
        header = _type_header_for(name, type_line)
        try:
            got, got_types = _families(f"{header}{line}\n")
        except Exception:
            bad.append(line)
            continue
        samples.extend(got)
        for fam, typ in got_types.items():
            types.setdefault(fam, typ)
    error = (
        unparseable_note(bad)
        if bad
        else f"/metrics parse error ({first_error}); recovered line by line"
    )
    return Scrape(tuple(samples), types, error)


def unparseable_note(bad: list[str]) -> str:
    """What a scrape says about the lines it could not parse (``bad`` is not empty)."""
    shown = bad[0]
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{len(bad)} unparseable line(s) in /metrics, first: {shown!r}"


def _type_header_for(name: str, type_line: Mapping[str, str]) -> str:
    for suffix in ("", "_total", "_bucket", "_sum", "_count", "_created"):
        if suffix and not name.endswith(suffix):
            continue
        base = name[: len(name) - len(suffix)] if suffix else name
        for candidate in (base, base + "_total") if suffix != "_total" else (name, base):
            if candidate in type_line:
                return type_line[candidate] + "\n"
    return ""


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "Histogram",
    "LabelMatch",
    "Scrape",
    "make_series_key",
    "parse_metrics",
    "series_key",
    "unparseable_note",
]
