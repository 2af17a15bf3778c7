"""dcgm-exporter ``/metrics`` text to GPUs and their DCGM values, and those to the GPU samples
and static facts NVML gives (pure: no I/O; :func:`to_sample`, :func:`to_static`).

Only ``DCGM_`` lines are parsed (a node exporter or the exporter's own Go metrics on the same
port cost nothing). :class:`DcgmReader` reads them with the ``/metrics`` reader
(:class:`~specwatch.sources.metrics.parse.MetricsReader`): a series met for the first time
goes through ``prometheus_client``'s parser, a known one costs a lookup and a ``float()``, and a
line the parser rejects costs only itself. An exporter's label sets stay the same between polls,
so a later poll costs a small share of a full parse (``cost_report.py --only dcgm``).

A DCGM "blank" sentinel (a value near 2^63, 2^47 for doubles, or 2^31 for 32-bit gauges) means
the board does not support the field: it becomes ``None`` with an ``"n/s"`` reason, never a
number. A field the exporter does not send at all is ``None`` with :data:`NOT_EXPORTED` in its
reason, so the pane can say which fields to add to the exporter's counters CSV.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.redaction import strip_userinfo
from specwatch.core.sanitize import clean_labels, sanitize_line
from specwatch.sources.dcgm.fields import BY_NAME, FIELDS, MIB, OLD_NAMES, FieldMap
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


# --- a GPU's DCGM values as specwatch's samples and static facts ------------------------------


_NO_SOURCE = {
    "pstate": "n/s: dcgm-exporter has no P-state field",
    "locked_sm_clock_mhz": "n/s: DCGM has no locked-clock field",
    "locked_mem_clock_mhz": "n/s: DCGM has no locked-clock field",
}
_DEFAULT_APP = (
    ("default_app_sm_clock_mhz", "app_sm_clock_mhz", "max_sm_clock_mhz"),
    ("default_app_mem_clock_mhz", "app_mem_clock_mhz", "max_mem_clock_mhz"),
)
"""DCGM has no default-application-clock field. On the data-centre boards DCGM serves (A100 and
later) the default application clocks are the maximum clocks, so the maximum stands in: an
application clock below it is one someone set (``nvidia-smi -ac``), NVML's ``app`` policy."""
_LABEL_STATICS = (("name", "modelName"), ("uuid", "UUID"), ("pci_bus_id", "pci_bus_id"))
_FIELDS_OF_SAMPLE = frozenset(GpuSample.__dataclass_fields__) - {"index", "t", "lost", "missing"}
_FIELDS_OF_STATIC = frozenset(GpuStatic.__dataclass_fields__) - {"index", "missing"}


def not_exported(gpu: DcgmGpu) -> dict[str, str]:
    """specwatch field -> reason, for every field ``gpu``'s exporter does not send at all."""
    return dict(_absent_of(frozenset(gpu.values), gpu.blank, _no_labels(gpu)))


def _no_labels(gpu: DcgmGpu) -> tuple[bool, bool, bool]:
    return gpu.model is None, gpu.uuid is None, gpu.pci_bus_id is None


@functools.lru_cache(maxsize=1024)
def _absent_of(
    values: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> Mapping[str, str]:
    # every GPU of a fleet has one of a few shapes: 80,000 GPUs spent seconds here otherwise
    out: dict[str, str] = {}
    for fmap in FIELDS:
        if fmap.dcgm not in values and fmap.dcgm not in blank:
            out[fmap.target] = f"{NOT_EXPORTED} ({fmap.dcgm})"
    if "mem_total_bytes" in out and {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} <= values:
        del out["mem_total_bytes"]  # used + free stands in for the total
    for (name, _), missing in zip(_LABEL_STATICS, no_label, strict=True):
        if missing:
            out[name] = f"{NOT_EXPORTED} (label)"
    return MappingProxyType(out)


def _convert(fmap: FieldMap, value: float) -> int | float:
    scaled = value * fmap.scale
    if fmap.integer:
        return round(scaled)
    return float(scaled)


@functools.lru_cache(maxsize=1024)
def _shape(
    sent: frozenset[str],
    blank: frozenset[str],
    no_label: tuple[bool, bool, bool],
    targets: frozenset[str],
) -> tuple[tuple[FieldMap, ...], Mapping[str, str]]:
    """The fields of ``targets`` a GPU of this shape has (in :data:`FIELDS` order) and the
    reasons for those it lacks; worked out once per shape, not per GPU."""
    present: list[FieldMap] = []
    missing: dict[str, str] = {}
    absent = _absent_of(sent, blank, no_label)
    for fmap in FIELDS:
        if fmap.target not in targets:
            continue
        if fmap.dcgm in sent:
            present.append(fmap)
        elif fmap.dcgm in blank:
            missing[fmap.target] = BLANK
        elif fmap.target in absent:
            missing[fmap.target] = absent[fmap.target]
    for name, reason in _NO_SOURCE.items():
        if name in targets:
            missing[name] = reason
    return tuple(present), MappingProxyType(missing)


@functools.lru_cache(maxsize=1024)
def _static_shape(
    sent: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> tuple[tuple[FieldMap, ...], tuple[tuple[str, str], ...], Mapping[str, str]]:
    """The static fields a GPU of this shape has, the ``(default, maximum)`` clocks that stand
    in for each other, and the reasons for the rest: one map for every GPU of the shape."""
    present, reasons = _shape(sent, blank, no_label, _FIELDS_OF_STATIC)
    missing = dict(reasons)
    for (name, _), absent in zip(_LABEL_STATICS, no_label, strict=True):
        if absent:
            missing[name] = f"{NOT_EXPORTED} (label)"
    have = {f.target for f in present}
    defaults = tuple((d, top) for d, app, top in _DEFAULT_APP if app in have and top in have)
    given = have | {name for name, _ in _LABEL_STATICS} | {d for d, _ in defaults}
    for name in sorted(_FIELDS_OF_STATIC - given - set(missing)):
        missing[name] = f"{NOT_EXPORTED} (no DCGM field)"
    return present, defaults, missing


def to_static(gpu: DcgmGpu, index: int) -> GpuStatic:
    """The ``GpuStatic`` for ``gpu`` at specwatch's ``index`` (labels give name, UUID, bus id).

    Its ``missing`` map is shared by every GPU of the same shape (80,000 GPUs of a fleet have a
    few shapes): read-only, as its ``Mapping`` type says.
    """
    present, defaults, missing = _static_shape(frozenset(gpu.values), gpu.blank, _no_labels(gpu))
    values: dict[str, Any] = {f.target: _convert(f, gpu.values[f.dcgm]) for f in present}
    if "persistence_mode" in values:
        values["persistence_mode"] = bool(values["persistence_mode"])
    for default, top in defaults:
        values[default] = values[top]
    return GpuStatic(
        index=index,
        missing=missing,
        name=gpu.model,
        uuid=gpu.uuid,
        pci_bus_id=gpu.pci_bus_id,
        **values,
    )


@functools.lru_cache(maxsize=1024)
def _sample_shape(
    sent: frozenset[str], blank: frozenset[str], no_label: tuple[bool, bool, bool]
) -> tuple[tuple[FieldMap, ...], bool, Mapping[str, str]]:
    """The sample fields a GPU of this shape has, whether its memory total is worked out from
    used + free, and the reasons for the rest (one map for every GPU of the shape)."""
    present, reasons = _shape(sent, blank, no_label, _FIELDS_OF_SAMPLE)
    total_of_parts = (
        "mem_total_bytes" not in {f.target for f in present}
        and {
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
        }
        <= sent
    )
    missing = dict(reasons)
    if total_of_parts:
        missing.pop("mem_total_bytes", None)
    return present, total_of_parts, missing


def to_sample(gpu: DcgmGpu, index: int, t: float, extra_reasons: int = 0) -> GpuSample:
    """The ``GpuSample`` for ``gpu`` at specwatch's ``index`` and time ``t``.

    Args:
        gpu: The parsed GPU.
        index: specwatch's GPU index (unique across nodes).
        t: Monotonic seconds of the poll.
        extra_reasons: Reason bits to add (from violation counters that grew since the last
            collection: a throttle that came and went between samples).

    As with :func:`to_static`, ``missing`` may be shared with other GPUs of the same shape.
    """
    if gpu.lost:
        reason = f"N/A: GPU is lost (XID {XID_GPU_FELL_OFF_BUS})"
        return GpuSample(
            index=index, t=t, lost=True, missing=dict.fromkeys(_FIELDS_OF_SAMPLE, reason)
        )
    present, total_of_parts, missing = _sample_shape(
        frozenset(gpu.values), gpu.blank, _no_labels(gpu)
    )
    values: dict[str, Any] = {f.target: _convert(f, gpu.values[f.dcgm]) for f in present}
    if total_of_parts:
        used, free = gpu.values["DCGM_FI_DEV_FB_USED"], gpu.values["DCGM_FI_DEV_FB_FREE"]
        reserved = gpu.values.get("DCGM_FI_DEV_FB_RESERVED", 0.0)
        values["mem_total_bytes"] = round((used + free + reserved) * MIB)
    if extra_reasons:
        values["clock_event_reasons"] = int(values.get("clock_event_reasons") or 0) | extra_reasons
        if "clock_event_reasons" in missing:
            missing = {k: v for k, v in missing.items() if k != "clock_event_reasons"}
    return GpuSample(index=index, t=t, missing=missing, **values)


def extras(gpu: DcgmGpu) -> dict[str, int | float]:
    """The DCGM readings with no ``GpuSample`` home (XID, other violation counters, replays)."""
    out: dict[str, int | float] = {}
    for fmap in FIELDS:
        if fmap.target.startswith("extra:") and fmap.dcgm in gpu.values:
            out[fmap.target.removeprefix("extra:")] = _convert(fmap, gpu.values[fmap.dcgm])
    return out


__all__ = [
    "BLANK",
    "MAX_GPUS",
    "MAX_SERIES",
    "NOT_EXPORTED",
    "DcgmExposition",
    "DcgmGpu",
    "DcgmReader",
    "dcgm_url",
    "extras",
    "group_gpus",
    "is_blank",
    "not_exported",
    "parse_dcgm",
    "signature",
    "to_sample",
    "to_static",
    "url_host",
]
