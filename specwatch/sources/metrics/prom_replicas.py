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
from operator import itemgetter, lt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.sources.metrics.prom import Sample

REPLICA_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
"""Labels whose series repeat the same numbers (every TP rank sees the same batch): keep one."""
MAX_PINNED = 20_000
"""Labels mappings kept alive by remembered answers at most; past it the memory starts again."""

_LABELS = itemgetter(1)
_NO_REPLICA_LABEL = frozenset(REPLICA_LABELS).isdisjoint
"""Whether labels carry none of :data:`REPLICA_LABELS` (one C call per sample)."""
_NO_BOUND = math.nan
"""The bound of a bucket without a usable ``le`` (skipped)."""
_BOUNDS: dict[str, float] = {}
"""``le`` text -> bound: a server repeats the same few dozen bounds every scrape."""


class _ByLabels:
    """Answers by the identities of a list of samples' labels mappings."""

    __slots__ = ("answers", "pinned")

    def __init__(self) -> None:
        self.answers: dict[tuple[int, ...], tuple[list[Mapping[str, str]], object]] = {}
        self.pinned = 0

    def put(self, key: tuple[int, ...], samples: Sequence[Sample], answer: object) -> None:
        if self.pinned + len(samples) > MAX_PINNED:
            self.answers.clear()
            self.pinned = 0
        self.answers[key] = (list(map(_LABELS, samples)), answer)
        self.pinned += len(samples)


_KEPT = _ByLabels()
"""Samples' labels -> indexes of the samples :func:`dedupe_replicas` keeps (``None``: all)."""
_LAYOUT = _ByLabels()
"""Bucket samples' labels -> their bounds, when strictly increasing (``None``: they are not)."""


def dedupe_replicas(samples: list[Sample]) -> list[Sample]:
    """Keep, of series that differ only in replica labels, the lowest-ranked one.

    The answer may be ``samples`` itself: callers must not change it.
    """
    if len(samples) < 2:
        return samples
    key = tuple(map(id, map(_LABELS, samples)))
    known = _KEPT.answers.get(key)
    if known is None:
        keep = _kept(samples)
        _KEPT.put(key, samples, keep)
    else:
        keep = known[1]  # type: ignore[assignment]
    return samples if keep is None else [samples[i] for i in keep]


def _kept(samples: list[Sample]) -> tuple[int, ...] | None:
    if all(map(_NO_REPLICA_LABEL, map(_LABELS, samples))):
        return None
    best: dict[tuple[tuple[str, str], ...], int] = {}
    for i, s in enumerate(samples):
        group = tuple(sorted((k, v) for k, v in s.labels.items() if k not in REPLICA_LABELS))
        current = best.get(group)
        if current is None or _rank_key(s.labels) < _rank_key(samples[current].labels):
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
    key = tuple(map(id, map(_LABELS, buckets)))
    known = _LAYOUT.answers.get(key)
    if known is not None:
        return known[1]  # type: ignore[return-value]
    bounds = tuple(bound(s.labels.get("le", "nan")) for s in buckets)
    ordered = (
        bounds
        if all(le is not _NO_BOUND for le in bounds) and all(map(lt, bounds, bounds[1:]))
        else None
    )
    _LAYOUT.put(key, buckets, ordered)
    return ordered


def bound(text: str) -> float:
    """The bound an ``le`` label gives (:data:`_NO_BOUND` when it gives none)."""
    le = _BOUNDS.get(text)
    if le is not None:
        return le
    try:
        le = float(text)
    except ValueError:
        le = _NO_BOUND
    if math.isnan(le):
        le = _NO_BOUND
    if len(_BOUNDS) < 4096:
        _BOUNDS[text] = le
    return le


__all__ = ["MAX_PINNED", "REPLICA_LABELS", "bound", "bucket_bounds", "dedupe_replicas"]
