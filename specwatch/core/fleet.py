"""A fleet: several servers and their GPUs, how GPUs join servers, exact fleet totals, and the
fleet screen's rows (a server's figures beside its node's slowest clock and hottest GPU).

Pure: no I/O. The Prometheus source fills these; the UI, probe and bench read them.

Fleet totals are computed from summed rates, never as a mean of per-server means: tok/s is a
sum, the accept length is Σ(tokens in verify steps) / Σ(verify steps), the draft acceptance
rate Σaccepted / Σproposed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from specwatch.core.gpu import GpuSample, GpuStatic, clock_fraction, held_busy, sample_busy
from specwatch.core.redaction import strip_userinfo
from specwatch.core.server import Dialect, MetricsWindow

POD_LABELS = ("pod", "namespace")
"""Labels that name a Kubernetes pod on both sides (server series and dcgm-exporter series)."""
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}
_PLAIN_TARGET = re.compile(r"[A-Za-z0-9_.-]+(?::[0-9]*)?")


@dataclass(frozen=True, slots=True)
class ServerRates:
    """Per-second counter rates behind a server's windowed figures (for exact fleet sums).

    A verify step yields ``step_tokens / verify_steps`` tokens on average (bonus included).
    """

    gen_tok_s: float | None = None
    step_tokens_per_s: float | None = None
    """Tokens produced by verify steps (vLLM and llama.cpp: accepted + drafts)."""
    verify_steps_per_s: float | None = None
    """Verify steps per second (vLLM and llama.cpp: drafts; SGLang: spec_verify_calls)."""
    accepted_per_s: float | None = None
    draft_tokens_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class FleetServer:
    """One inference server as Prometheus sees it."""

    instance: str
    """The scrape target's ``instance`` label (usually ``host:port``)."""
    job: str
    dialect: Dialect
    model: str | None
    window: MetricsWindow
    """Windowed figures under the metrics-window names (``gen_tok_s``, ``accept_length``...)."""
    rates: ServerRates = field(default_factory=ServerRates)
    labels: Mapping[str, str] = field(default_factory=dict)
    """Join labels where present (``pod``, ``namespace``)."""
    model_note: str | None = None
    """Where ``model`` came from when not the metrics' label, or why it is ``None`` (llama.cpp's
    metrics name no model: ``"not in metrics"``)."""


@dataclass(frozen=True, slots=True)
class FleetGpu:
    """One GPU of a dcgm-exporter, as Prometheus sees it."""

    key: str
    """Unique in the fleet: ``exporter instance/UUID`` (or ``/gpu index`` without a UUID)."""
    instance: str
    """The exporter scrape target's ``instance`` label."""
    hostname: str | None
    """DCGM's ``Hostname`` label: the node the GPU is in."""
    static: GpuStatic
    sample: GpuSample
    labels: Mapping[str, str] = field(default_factory=dict)
    """Join labels where present (``pod``, ``namespace``: the pod using the GPU)."""
    source: str = "prometheus"


@dataclass(frozen=True, slots=True)
class NodeJoin:
    """The GPUs a server runs on, and how that was decided."""

    server: str
    """The server's ``instance``."""
    gpus: tuple[str, ...]
    """:attr:`FleetGpu.key` values."""
    via: str | None
    """``"pair"`` (an explicit SERVER=DCGM pairing), ``"pod"``, ``"host"``, or ``None``."""


@dataclass(frozen=True, slots=True)
class FleetTotals:
    """Exact aggregates over the servers that report each figure."""

    servers: int
    gen_tok_s: float | None
    accept_length: float | None
    """Σ verify-step tokens / Σ verify steps."""
    draft_acceptance_rate: float | None
    """Σ accepted / Σ proposed draft tokens (servers that count both)."""
    requests_running: float | None
    requests_waiting: float | None


@functools.lru_cache(maxsize=1 << 16)
def host_of(address: str) -> str:
    """The host of ``host:port``, ``[v6]:port`` or a URL; lower case, loopback as 127.0.0.1."""
    text = address.strip()
    if _PLAIN_TARGET.fullmatch(text) is not None:  # what urlsplit gives, at a fifth of its cost
        host = text.partition(":")[0].lower()
        return "127.0.0.1" if host in _LOOPBACK else host
    if "://" not in text:
        text = "http://" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        host = ""
    host = host.lower()
    return "127.0.0.1" if host in _LOOPBACK else host


@functools.lru_cache(maxsize=1 << 16)
def target_of(address: str) -> str:
    """``host:port`` of a URL or target (loopback as 127.0.0.1; the scheme's port if none)."""
    text = address.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # "[" or "]" in a label: no port, and host_of gives no host
        parts, port = urlsplit("http://"), None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    host = host_of(text)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_TARGET = re.compile(r"(?:[\w.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?")


def is_target(instance: str) -> bool:
    """Whether ``instance`` is a ``host[:port]`` a server can be reached at (a label such as
    ``bad[host]:8000`` or one full of escapes is not)."""
    return _TARGET.fullmatch(instance) is not None


def parse_node_pair(text: str) -> tuple[str, str]:
    """``SERVER_URL=DCGM_URL`` as ``(server target, exporter target)``, both ``host:port``.

    Raises:
        ValueError: Not two non-empty addresses joined by ``=``.
    """
    server, sep, dcgm = text.partition("=")
    if not sep or not server.strip() or not dcgm.strip():
        raise ValueError(f"expected SERVER_URL=DCGM_URL, got {strip_userinfo(text)!r}")
    return target_of(server), target_of(dcgm)


def _pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    pod = labels.get("pod") or ""
    return (pod, labels.get("namespace") or "") if pod else None


def _is_ip(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host


class _GpuIndex:
    """The fleet's GPUs keyed by each join label, so a join is linear in the fleet's size."""

    def __init__(self, gpus: Sequence[FleetGpu]) -> None:
        self.keys = [g.key for g in gpus]
        self.by_target: dict[str, list[int]] = {}
        self.by_pod: dict[str, list[tuple[str, int]]] = {}
        self.by_host: dict[str, list[int]] = {}
        self.by_short: dict[str, list[tuple[str, int]]] = {}
        for i, g in enumerate(gpus):
            self.by_target.setdefault(target_of(g.instance), []).append(i)
            pod = _pod_of(g.labels)
            if pod is not None:
                self.by_pod.setdefault(pod[0], []).append((pod[1], i))
            # Both hosts: DCGM's Hostname is often not the address the servers are reached at
            # (a container's name, or the simulator's one name for every node).
            hosts = {host_of(g.hostname) if g.hostname else "", host_of(g.instance)} - {""}
            for host in hosts:
                self.by_host.setdefault(host, []).append(i)
                if not _is_ip(host):
                    self.by_short.setdefault(host.split(".", 1)[0], []).append((host, i))

    def pick(self, indices: set[int] | list[int]) -> tuple[str, ...]:
        return tuple(self.keys[i] for i in sorted(indices))

    def on_targets(self, targets: set[str]) -> tuple[str, ...]:
        return self.pick({i for t in targets for i in self.by_target.get(t, ())})

    def in_pod(self, pod: tuple[str, str]) -> tuple[str, ...]:
        name, namespace = pod
        return self.pick(
            [i for ns, i in self.by_pod.get(name, ()) if not (namespace and ns) or ns == namespace]
        )

    def on_host(self, host: str) -> tuple[str, ...]:
        if not host:
            return ()
        found = set(self.by_host.get(host, ()))
        if not _is_ip(host):
            # A node's short name matches its FQDN ("node1" vs "node1.dc.example"), IPs never do.
            for other, i in self.by_short.get(host.split(".", 1)[0], ()):
                if "." not in host or "." not in other:
                    found.add(i)
        return self.pick(found)


def join_gpus(
    servers: Sequence[FleetServer],
    gpus: Sequence[FleetGpu],
    pairs: Sequence[tuple[str, str]] = (),
) -> list[NodeJoin]:
    """Which GPUs each server runs on.

    In order of precedence: an explicit pairing (from :func:`parse_node_pair`) of the server's
    target with an exporter target; the same pod (``pod`` and, where both have it,
    ``namespace``); the same host (the server's host against DCGM's ``Hostname`` label and
    against the exporter target's host). A server may share its node's GPUs with other
    servers. The GPUs are indexed by each of these first, so the work grows with the fleet,
    not with its square.
    """
    paired: dict[str, set[str]] = {}
    for server_target, exporter_target in pairs:
        paired.setdefault(target_of(server_target), set()).add(target_of(exporter_target))
    index = _GpuIndex(gpus)
    out: list[NodeJoin] = []
    for server in servers:
        exporters = paired.get(target_of(server.instance)) if paired else None
        if exporters is not None:
            out.append(NodeJoin(server.instance, index.on_targets(exporters), "pair"))
            continue
        pod = _pod_of(server.labels)
        if pod is not None:
            keys = index.in_pod(pod)
            if keys:
                out.append(NodeJoin(server.instance, keys, "pod"))
                continue
        keys = index.on_host(host_of(server.instance))
        out.append(NodeJoin(server.instance, keys, "host" if keys else None))
    return out


def _sum(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def fleet_totals(servers: Sequence[FleetServer]) -> FleetTotals:
    """Exact aggregates: sums of rates, ratios of summed rates (see the module docstring)."""
    step_tokens = 0.0
    steps = 0.0
    accepted = 0.0
    proposed = 0.0
    for s in servers:
        r = s.rates
        if r.step_tokens_per_s is not None and r.verify_steps_per_s is not None:
            step_tokens += r.step_tokens_per_s
            steps += r.verify_steps_per_s
        if r.accepted_per_s is not None and r.draft_tokens_per_s is not None:
            accepted += r.accepted_per_s
            proposed += r.draft_tokens_per_s
    return FleetTotals(
        servers=len(servers),
        gen_tok_s=_sum([s.window.gen_tok_s for s in servers]),
        accept_length=step_tokens / steps if steps > 0 else None,
        draft_acceptance_rate=accepted / proposed if proposed > 0 else None,
        requests_running=_sum([s.window.requests_running for s in servers]),
        requests_waiting=_sum([s.window.requests_waiting for s in servers]),
    )


# --- the fleet screen's rows: a server's figures and its node's GPUs --------------------------


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One server's line on the fleet screen."""

    server: FleetServer
    gpus: tuple[str, ...]
    """:attr:`~specwatch.core.fleet.FleetGpu.key` of its node's GPUs."""
    joined_by: str | None
    """``"pair"``, ``"pod"``, ``"host"``, or ``None`` (no GPUs joined)."""
    slowest_clock: float | None
    """The node's lowest SM clock / board maximum (1.0 at the maximum)."""
    hottest_c: float | None
    stale: bool = False
    """The server was in an earlier reading but not in the latest: its last figures."""


def node_pace(gpus: Sequence[FleetGpu]) -> tuple[float | None, float | None]:
    """``(slowest SM clock fraction, hottest temperature)`` of a node's GPUs (lost ones aside)."""
    live = [g for g in gpus if not g.sample.lost]
    fractions = [
        f
        for g in live
        if (f := clock_fraction(g.sample.sm_clock_mhz, g.static.max_sm_clock_mhz)) is not None
    ]
    temps = [g.sample.temp_c for g in live if g.sample.temp_c is not None]
    return (min(fractions) if fractions else None, max(temps) if temps else None)


def held_gpus(gpus: Sequence[FleetGpu], last_busy: dict[str, GpuSample]) -> list[FleetGpu]:
    """``gpus`` with a short idle spell shown as each GPU's last busy sample, as the
    single-server GPU pane shows it (:func:`~specwatch.core.gpu.held_busy`): one idle
    sample between batches is not the node's pace. ``last_busy`` (by GPU key) is updated."""
    out: list[FleetGpu] = []
    for g in gpus:
        if sample_busy(g.sample):
            last_busy[g.key] = g.sample
        shown = held_busy(g.sample, last_busy.get(g.key))
        out.append(g if shown is g.sample else replace(g, sample=shown))
    return out


def fleet_rows(
    servers: Sequence[FleetServer], gpus: Sequence[FleetGpu], joins: Sequence[NodeJoin]
) -> list[FleetRow]:
    """A row per server, in the order given."""
    by_key: Mapping[str, FleetGpu] = {g.key: g for g in gpus}
    by_server = {j.server: j for j in joins}
    rows: list[FleetRow] = []
    for s in servers:
        join = by_server.get(s.instance)
        keys = join.gpus if join is not None else ()
        slowest, hottest = node_pace([by_key[k] for k in keys if k in by_key])
        rows.append(FleetRow(s, keys, join.via if join else None, slowest, hottest))
    return rows


def with_gone(rows: Sequence[FleetRow], before: Sequence[FleetRow]) -> list[FleetRow]:
    """``rows`` followed by the rows of ``before`` whose server is missing now, marked stale."""
    present = {r.server.instance for r in rows}
    gone = [r for r in before if r.server.instance not in present]
    return [*rows, *(replace(r, stale=True) for r in gone)]


__all__ = [
    "POD_LABELS",
    "FleetGpu",
    "FleetRow",
    "FleetServer",
    "FleetTotals",
    "NodeJoin",
    "ServerRates",
    "fleet_rows",
    "fleet_totals",
    "held_gpus",
    "host_of",
    "is_target",
    "join_gpus",
    "node_pace",
    "parse_node_pair",
    "target_of",
    "with_gone",
]
