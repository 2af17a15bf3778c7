"""dcgm-exporter ``/metrics`` text to GPUs and their DCGM values (pure: no I/O); they become
the GPU samples NVML produces in :mod:`specwatch.sources.dcgm.fields`.

Only ``DCGM_`` lines are parsed (a node exporter or the exporter's own Go metrics on the same
port cost nothing). :class:`DcgmReader` reads them with the ``/metrics`` reader
(:class:`~specwatch.sources.metrics.parse.MetricsReader`): a series met for the first time
goes through ``prometheus_client``'s parser, a known one costs a lookup and a ``float()``, and a
line the parser rejects costs only itself. An exporter's label sets stay the same between polls,
so a later poll of 8 GPUs costs about a thirtieth of a full parse
(``tests/tools/dcgm_parse_cost.py``).

A DCGM "blank" sentinel (a value near 2^63, 2^47 for doubles, or 2^31 for 32-bit gauges) means
the board does not support the field: it becomes ``None`` with an ``"n/s"`` reason, never a
number. A field the exporter does not send at all is ``None`` with :data:`NOT_EXPORTED` in its
reason, so the pane can say which fields to add to the exporter's counters CSV.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from specwatch.core.redaction import strip_userinfo
from specwatch.core.sanitize import clean_labels, sanitize_line
from specwatch.sources.dcgm.fields import BY_NAME, OLD_NAMES
from specwatch.sources.http.endpoint import host_problem
from specwatch.sources.metrics.parse import MetricsReader

DEFAULT_PORT = 9400
NOT_EXPORTED = "n/s: not exported"
"""Start of the reason for a field the exporter does not send (``"n/s: not exported (FIELD)"``)."""
BLANK = "n/s: DCGM blank (not supported)"
"""Reason for a field the exporter sends with DCGM's "blank" sentinel."""
XID_GPU_FELL_OFF_BUS = 79
MAX_SERIES = 20_000
"""DCGM series taken from one answer (16 GPUs x 7 MIG instances x every field is under 10,000)."""
MAX_GPUS = 1_024
"""GPUs taken from one exporter (a node has 8-16, MIG instances included in the series)."""

_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0  # 2^47: DCGM_FP64_BLANK and its NOT_FOUND/.. neighbours


def dcgm_url(spec: str) -> str:
    """The ``/metrics`` URL for ``--dcgm`` text.

    ``host`` -> ``http://host:9400/metrics``; ``host:port`` -> ``http://host:port/metrics``; a
    URL with a scheme is kept as given, with ``/metrics`` added when it has no path.
    """
    text = spec.strip()
    if not text:
        raise ValueError("empty dcgm-exporter address")
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {strip_userinfo(spec)!r}")
        url = text if parts.path not in ("", "/") else f"{text.rstrip('/')}/metrics"
    else:
        parts = urlsplit(f"http://{text}")
        if not parts.hostname:
            raise ValueError(f"no host in {strip_userinfo(spec)!r}")
        netloc = parts.netloc if parts.port is not None else f"{parts.netloc}:{DEFAULT_PORT}"
        path = parts.path if parts.path not in ("", "/") else "/metrics"
        url = f"http://{netloc}{path}"
    problem = host_problem(url)
    if problem is not None:
        raise ValueError(f"{problem} in {sanitize_line(strip_userinfo(spec), 120)!r}")
    return url


def url_host(url: str) -> str:
    """The host part of a URL (the node name when the exporter sends no ``Hostname``)."""
    return urlsplit(url).hostname or url


_OUT_OF_RANGE = 2.0**64
_K8S_LABELS = ("pod", "namespace", "container")
_NONE: frozenset[str] = frozenset()


def is_blank(value: float, counter: bool = False) -> bool:
    """Whether ``value`` is one of DCGM's blank / not-found / not-supported sentinels, or one
    no GPU can report (beyond ±2⁶⁴: ``-1e308`` would overflow every conversion)."""
    if math.isnan(value) or math.isinf(value) or abs(value) >= _OUT_OF_RANGE:
        return True
    if value >= _INT64_BLANK - 1024 or _FP64_BLANK <= value <= _FP64_BLANK + 16:
        return True
    return not counter and _INT32_BLANK <= value <= 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class DcgmGpu:
    """One GPU in one exposition: its identity labels and its field values."""

    key: str
    """``UUID`` when labelled, else ``gpu<N>``: stable across polls of one exporter."""
    gpu: int | None
    """The exporter's ``gpu`` label (the index on its node)."""
    uuid: str | None = None
    pci_bus_id: str | None = None
    model: str | None = None
    hostname: str | None = None
    device: str | None = None
    driver_version: str | None = None
    k8s: Mapping[str, str] = field(default_factory=dict)
    """Non-empty ``pod`` / ``namespace`` / ``container`` labels."""
    values: Mapping[str, float] = field(default_factory=dict)
    """DCGM field name (current spelling) -> value, sentinels left out."""
    blank: frozenset[str] = frozenset()
    """Fields sent with a sentinel."""

    @property
    def lost(self) -> bool:
        """The exporter reports XID 79 (fell off the bus) and no readings."""
        # the XID is then one of the values: no readings means it is the only one
        xid = self.values.get("DCGM_FI_DEV_XID_ERRORS")
        return xid == XID_GPU_FELL_OFF_BUS and len(self.values) == 1


@dataclass(frozen=True, slots=True)
class DcgmExposition:
    """One parsed dcgm-exporter body."""

    gpus: tuple[DcgmGpu, ...]
    error: str | None = None
    """What could not be parsed (everything else was kept)."""
    note: str | None = None
    """One line when the answer was larger than :data:`MAX_SERIES` or :data:`MAX_GPUS`."""


class DcgmReader:
    """Parses one exporter's answers, remembering its series between polls. Never raises."""

    def __init__(self) -> None:
        self._reader = MetricsReader(("DCGM_",))
        self._series: dict[str, tuple[str, dict[str, str]]] = {}
        """Series key -> its field name and sanitised labels (worked out once a series)."""

    def parse(self, text: str) -> DcgmExposition:
        """The GPUs in one answer of the exporter."""
        lines: list[str] = []
        series = 0
        for ln in text.splitlines():
            if not _wanted(ln):
                continue
            if not ln.startswith("#"):
                series += 1
                if series > MAX_SERIES:
                    continue  # counted, not kept
            lines.append(ln)
        scrape = self._reader.parse("\n".join(lines) + "\n")
        known = self._series
        if len(known) > MAX_SERIES:
            known.clear()  # label values that churn start the memory again
        samples: list[tuple[str, Mapping[str, str], float]] = []
        for s in scrape.samples:
            got = known.get(s.key)
            if got is None:
                # The parser names counter samples "<family>_total"; no DCGM field ends so.
                got = (s.name.removesuffix("_total"), clean_labels(s.labels) or {})
                known[s.key] = got
            samples.append((got[0], got[1], s.value))
        gpus, dropped = group_gpus(samples)
        notes = []
        if series > MAX_SERIES:
            notes.append(f"{series} DCGM series in one answer: the first {MAX_SERIES} taken")
        if dropped:
            notes.append(f"more than {MAX_GPUS} GPUs in one answer: the first {MAX_GPUS} taken")
        return DcgmExposition(gpus=tuple(gpus), error=scrape.error, note="; ".join(notes) or None)


def parse_dcgm(text: str) -> DcgmExposition:
    """Parse one dcgm-exporter exposition (a poller keeps a :class:`DcgmReader`); never raises."""
    return DcgmReader().parse(text)


def group_gpus(
    samples: Iterable[tuple[str, Mapping[str, str], float]], limit: int = MAX_GPUS
) -> tuple[list[DcgmGpu], int]:
    """One exporter's ``(name, labels, value)`` samples grouped into GPUs, in index order (at
    most ``limit``), and how many further GPUs were left out.

    The exposition parser and the Prometheus source (whose answers carry the same names and
    labels) both come through here, so DCGM's field names and blank sentinels have one home.
    """
    by_key: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    left_out: set[str] = set()
    for name, labels, value in samples:
        name = OLD_NAMES.get(name, name)
        gpu_label = labels.get("gpu", "").strip()
        uuid = labels.get("UUID") or labels.get("uuid") or None
        if not uuid and not gpu_label.isdigit():
            continue  # not a per-GPU series (e.g. a node-wide count)
        key = uuid or f"gpu{gpu_label}"
        entry = by_key.get(key)
        if entry is None:
            if len(order) >= limit:
                left_out.add(key)
                continue
            entry = {"labels": labels, "values": {}, "blank": set()}
            by_key[key] = entry
            order.append(key)
        fmap = BY_NAME.get(name)
        if is_blank(value, counter=fmap.counter if fmap else False):
            entry["blank"].add(name)
        elif name not in entry["values"]:
            # MIG series repeat device fields per instance: the first one stands.
            entry["values"][name] = value
    return sorted((_gpu(key, by_key[key]) for key in order), key=_gpu_order), len(left_out)


def _gpu_order(gpu: DcgmGpu) -> tuple[bool, int]:
    # By the exporter's index: a GPU with only an XID series would otherwise come last.
    return (gpu.gpu is None, gpu.gpu or 0)


def _wanted(line: str) -> bool:
    if line.startswith("DCGM_"):
        return True
    return line.startswith(("# TYPE DCGM_", "# HELP DCGM_"))


def _gpu(key: str, entry: dict[str, Any]) -> DcgmGpu:
    labels: Mapping[str, str] = entry["labels"]
    gpu_label = labels.get("gpu", "").strip()
    blank: set[str] = entry["blank"]
    values: dict[str, float] = entry["values"]
    return DcgmGpu(
        key=key,
        gpu=int(gpu_label) if gpu_label.isdigit() else None,
        uuid=labels.get("UUID") or labels.get("uuid") or None,
        pci_bus_id=labels.get("pci_bus_id") or None,
        model=labels.get("modelName") or None,
        hostname=labels.get("Hostname") or None,
        device=labels.get("device") or None,
        driver_version=labels.get("DCGM_FI_DRIVER_VERSION") or None,
        k8s={k: labels[k] for k in _K8S_LABELS if labels.get(k)},
        values=values,
        blank=frozenset(blank.difference(values)) if blank else _NONE,
    )


def signature(gpus: Iterable[DcgmGpu]) -> int:
    """A hash of every value: equal between two polls of one unchanged collection."""
    return hash(tuple((g.key, tuple(sorted(g.values.items()))) for g in gpus))


__all__ = [
    "BLANK",
    "MAX_GPUS",
    "MAX_SERIES",
    "NOT_EXPORTED",
    "DcgmExposition",
    "DcgmGpu",
    "DcgmReader",
    "dcgm_url",
    "group_gpus",
    "is_blank",
    "parse_dcgm",
    "signature",
    "url_host",
]
