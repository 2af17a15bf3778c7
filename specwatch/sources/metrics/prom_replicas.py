"""Which series of a name count (replicas once), and how a histogram's buckets line up.

Both answers depend only on the samples' labels, and a live watch asks them about the same
series every second: :class:`MetricsReader` keeps one labels mapping per series from scrape to
scrape, so the answers are remembered by the identity of those mappings (kept alive with the
answer, so an identity cannot be reused while remembered). Samples built anew each time (a full
parse) simply miss and are worked out as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from operator import is_, itemgetter, lt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.sources.metrics.sample import Sample

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


__all__ = ["REMEMBERED", "REPLICA_LABELS", "bound", "bucket_bounds", "dedupe_replicas"]
