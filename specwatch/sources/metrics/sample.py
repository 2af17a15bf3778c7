"""One exposed sample of a ``/metrics`` page, below both the parser and the replica rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Sample(NamedTuple):
    """One exposed sample (a named tuple: a scrape makes thousands, a tuple is cheap to make)."""

    name: str
    labels: Mapping[str, str]
    value: float
    key: str = ""
    """The series as text (see :func:`~specwatch.sources.metrics.prom.series_key`); empty when
    not worked out yet."""
