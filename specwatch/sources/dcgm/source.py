"""GPU source over dcgm-exporter: any node's GPUs, in the same samples NVML gives.

:class:`DcgmGpuSource` has the public shape of :class:`specwatch.sources.nvml.sampler.GpuSampler`
(``open`` -> ``GpuInventory``, ``sample`` -> ``GpuTick``, a background thread with ``on_tick``,
``latest``, ``history``) so a session can use either. It reads one or more exporters; GPUs are
numbered across them in the order of the URLs, and each keeps its node name (the ``Hostname``
label, else the URL's host) in :attr:`DcgmGpuSource.gpu_info`.

The exporter's collection interval is inferred from how often the values change between polls
(:class:`CollectionTracker`); a collection coarser than the view gives
:attr:`DcgmGpuSource.collection_warning`. A throttle that came and went between two
collections still shows in the growth of its violation counter: its reason bit is added to
``clock_event_reasons`` until the next collection (``fold_violations``). :func:`dcgm_origin` is
what a front end says about these GPUs: their nodes and the gaps.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from specwatch.core.gpu import GpuInventory, GpuOrigin, GpuSample, GpuStatic, GpuTick, SystemInfo
from specwatch.core.redaction import strip_userinfo
from specwatch.sources.dcgm.fetch import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT_S,
    DcgmFetcher,
    DcgmFetchError,
)
from specwatch.sources.dcgm.fields import BY_NAME, VIOLATION_BITS
from specwatch.sources.dcgm.parse import (
    MAX_GPUS,
    DcgmGpu,
    DcgmReader,
    dcgm_url,
    extras,
    not_exported,
    signature,
    to_sample,
    to_static,
    url_host,
)
from specwatch.sources.gpu_reader import GpuTickHistory, TickLoop

# --- how often an exporter collects, inferred from its answers --------------------------------

COARSE_FACTOR = 1.5
"""A collection interval this many view intervals or more is warned about."""
_GAPS_KEPT = 8


@dataclass
class CollectionTracker:
    """One exporter's value changes: its collection interval and violation shares per gap.

    The exporter does not publish its collection interval (30 s by default): the median gap
    between changes of its values is that interval, and one coarser than the view is worth a
    warning. The violation counters are cumulative, so the share of each gap a GPU spent under
    a throttle is known even when the throttle came and went between two collections.
    """

    last_sig: int | None = None
    last_change_t: float | None = None
    changes_seen: int = 0
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=_GAPS_KEPT))
    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    """The violation counters at the last change, by GPU key."""
    shares: dict[str, dict[str, float]] = field(default_factory=dict)
    """Share of the last gap under each violation (short name), by GPU key."""

    def observe(self, gpus: Sequence[DcgmGpu], t: float) -> None:
        """Take one answer's GPUs, read at ``t``; nothing happens when no value changed."""
        sig = signature(gpus)
        if sig == self.last_sig:
            return
        if self.last_change_t is not None:
            gap = t - self.last_change_t
            # The first change only ends a gap that began before the first poll.
            if self.changes_seen >= 1 and gap > 0:
                self.gaps.append(gap)
            self.changes_seen += 1
            if gap > 0:
                self.shares = {
                    g.key: violation_shares(self.counters.get(g.key, {}), g, gap) for g in gpus
                }
        self.last_sig = sig
        self.last_change_t = t
        self.counters = {
            g.key: {n: v for n, v in g.values.items() if n in VIOLATION_BITS} for g in gpus
        }

    def interval(self) -> float | None:
        """The inferred collection interval (``None`` until two gaps were seen)."""
        return statistics.median(self.gaps) if len(self.gaps) >= 2 else None

    def coarse_note(self, node: str, view_s: float, now: float) -> str | None:
        """Why ``node`` looks coarser than a ``view_s`` view, or ``None``."""
        interval = self.interval()
        if interval is not None and interval >= COARSE_FACTOR * view_s:
            return f"{node} updates about every {interval:.3g} s"
        if interval is None and self.last_change_t is not None:
            still = now - self.last_change_t
            if still >= max(2 * view_s, COARSE_FACTOR * view_s) and self.changes_seen < 3:
                return f"{node} unchanged for {still:.3g} s"
        return None


def coarse_warning(notes: Sequence[str], view_s: float) -> str | None:
    """The warning for the exporters in ``notes`` (``None`` when there are none)."""
    if not notes:
        return None
    return (
        f"dcgm-exporter: {'; '.join(notes)}, coarser than the {view_s:g} s view (throttles "
        "between collections show through the violation counters); run the exporter with "
        "-c 1000 (DCGM_EXPORTER_INTERVAL) for 1 s readings"
    )


def violation_shares(before: Mapping[str, float], gpu: DcgmGpu, gap_s: float) -> dict[str, float]:
    """Share of ``gap_s`` each violation counter of ``gpu`` grew by since ``before``."""
    out: dict[str, float] = {}
    for name in VIOLATION_BITS:
        now = gpu.values.get(name)
        was = before.get(name)
        if now is None or was is None:
            continue
        grown_s = max(0.0, now - was) * BY_NAME[name].scale * 1e-9
        short = name.removeprefix("DCGM_FI_DEV_").removesuffix("_VIOLATION").lower()
        out[short] = min(1.0, grown_s / gap_s)
    return out


# --- what the source tells beyond GpuSample: where each GPU lives, how each exporter answered


@dataclass(frozen=True, slots=True)
class DcgmGpuInfo:
    """Where one of specwatch's GPUs lives."""

    index: int
    """specwatch's index (unique across nodes)."""
    node: str
    """``Hostname`` label, else the exporter URL's host."""
    url: str
    node_gpu: int | None
    """The GPU's index on its node (the exporter's ``gpu`` label)."""
    key: str
    not_exported: Mapping[str, str] = field(default_factory=dict)
    """specwatch field -> ``"n/s: not exported (DCGM_FI_...)"`` for fields the exporter omits."""
    k8s: Mapping[str, str] = field(default_factory=dict)
    """Non-empty ``pod`` / ``namespace`` / ``container`` labels."""


@dataclass(frozen=True, slots=True)
class DcgmGpuExtra:
    """DCGM readings of one GPU at one tick that ``GpuSample`` has no field for."""

    index: int
    exported_reasons: int | None
    """``clock_event_reasons`` as the exporter sent it (before violation bits were added)."""
    violation_share: Mapping[str, float]
    """``"power"``, ``"thermal"``... -> share of time throttled over the last collection."""
    values: Mapping[str, int | float]
    """``xid``, ``pcie_replay``, ``fb_free`` and the other ``*_violation_ns`` counters."""


@dataclass(frozen=True, slots=True)
class DcgmEndpointState:
    """One exporter as the last poll saw it."""

    url: str
    node: str
    error: str | None
    """Why the last poll failed (``None``: it answered)."""
    parse_error: str | None
    gpus: int
    collection_interval_s: float | None
    """Inferred from how often values change; ``None`` until three changes were seen."""
    unchanged_s: float | None
    """Seconds since the values last changed."""


Fetch = Callable[[str, float, int], str]
"""``(url, timeout_s, max_bytes) -> body``; raises :class:`DcgmFetchError` (tests inject one)."""


@dataclass
class _Endpoint:
    url: str
    node: str
    keys: dict[str, None] = field(default_factory=dict)
    """The GPU keys seen, in the order first seen (a dict: a set that keeps order)."""
    gpus: dict[str, DcgmGpu] = field(default_factory=dict)
    error: str | None = "not polled yet"
    parse_error: str | None = None
    note: str | None = None
    """One line when the last answer was cut to the parser's limits."""
    collection: CollectionTracker = field(default_factory=CollectionTracker)
    reader: DcgmReader = field(default_factory=DcgmReader)
    """Remembers the exporter's series: a later answer costs a lookup and a ``float()`` a line."""


class DcgmGpuSource(TickLoop):
    """GPUs read from dcgm-exporter endpoints, as ``GpuInventory`` and ``GpuTick``.

    Args:
        urls: Exporter addresses (``host``, ``host:port`` or a URL; see ``dcgm_url``).
        interval_s: Seconds between background polls (the view interval).
        on_tick: Called on the poller thread after each background tick.
        clock: Monotonic seconds for tick timestamps and interval inference.
        history: How many ticks the bounded history keeps.
        timeout_s: Wall-clock limit for one exporter's answer.
        max_bytes: Size limit for one answer.
        fetch: Replaces the HTTP fetch, one exporter a call (tests).
        fold_violations: Add the reason bit of a violation counter that grew since the last
            collection to ``clock_event_reasons``.
    """

    thread_name = "specwatch-dcgm"

    def __init__(
        self,
        urls: Sequence[str] | str,
        interval_s: float = 1.0,
        on_tick: Callable[[GpuTick], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        history: int = 3600,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        fetch: Fetch | None = None,
        fold_violations: bool = True,
    ) -> None:
        super().__init__(interval_s, on_tick)
        specs = [urls] if isinstance(urls, str) else list(urls)
        if not specs:
            raise ValueError("no dcgm-exporter address given")
        self._fetch_urls = [dcgm_url(s) for s in specs]
        """With any ``user:pass@`` (sent as basic auth); every shown URL has it withheld."""
        self._endpoints = [_Endpoint(strip_userinfo(u), url_host(u)) for u in self._fetch_urls]
        self._clock = clock
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._fetch = fetch
        self._fetcher = DcgmFetcher()
        """Kept-alive clients of the exporters (when no ``fetch`` is given)."""
        self._fold = fold_violations
        self._history: GpuTickHistory = GpuTickHistory(history)
        self._slots: list[tuple[int, str]] = []
        self._statics: list[GpuStatic] = []
        self._poll_lock = threading.Lock()
        self.inventory: GpuInventory | None = None
        """What ``open()`` found; replaced when GPUs appear or their static fields change."""
        self.latest: GpuTick | None = None
        self.latest_extras: tuple[DcgmGpuExtra, ...] = ()
        """Per-GPU DCGM readings without a ``GpuSample`` field, for the latest tick."""
        self.gpu_info: tuple[DcgmGpuInfo, ...] = ()
        """Node, URL and omitted fields of each GPU, by specwatch index."""
        self.open_cost_ms: float | None = None

    @property
    def urls(self) -> tuple[str, ...]:
        """The exporters' ``/metrics`` URLs."""
        return tuple(e.url for e in self._endpoints)

    # --- lifecycle (as GpuSampler) ------------------------------------------------------

    def open(self) -> GpuInventory:
        """Poll every exporter once and number the GPUs found. Never raises."""
        with self._poll_lock:
            if self.inventory is not None and self.inventory.available:
                return self.inventory
            started = time.perf_counter()
            self._poll_locked(self._clock())
            self.open_cost_ms = (time.perf_counter() - started) * 1000.0
            assert self.inventory is not None
            return self.inventory

    def sample(self) -> GpuTick:
        """Poll every exporter now on the calling thread. Never raises."""
        with self._poll_lock:
            tick = self._poll_locked(self._clock())
            self._history.append(tick)
            self.latest = tick
            return tick

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (joining it). Safe to call repeatedly."""
        self._end_thread(timeout_s)
        with self._poll_lock:  # after a poll in flight
            self._fetcher.close()

    @property
    def history(self) -> GpuTickHistory:
        """The bounded tick history, oldest first."""
        return self._history

    def ticks_since(self, t: float) -> list[GpuTick]:
        """Ticks with ``tick.t >= t``, oldest first."""
        return self._history.since(lambda tick: tick.t >= t)

    # --- DCGM specifics -----------------------------------------------------------------

    def node_of(self, index: int) -> str | None:
        """The node name of specwatch GPU ``index``."""
        return self.gpu_info[index].node if 0 <= index < len(self.gpu_info) else None

    def missing_fields(self, index: int) -> Mapping[str, str]:
        """specwatch field -> reason for the fields GPU ``index``'s exporter does not send."""
        return self.gpu_info[index].not_exported if 0 <= index < len(self.gpu_info) else {}

    @property
    def endpoints(self) -> tuple[DcgmEndpointState, ...]:
        """Each exporter as the last poll saw it."""
        now = self._clock()
        return tuple(
            DcgmEndpointState(
                url=e.url,
                node=e.node,
                error=e.error,
                parse_error=e.parse_error,
                gpus=len(e.keys),
                collection_interval_s=e.collection.interval(),
                unchanged_s=None
                if e.collection.last_change_t is None
                else now - e.collection.last_change_t,
            )
            for e in self._endpoints
        )

    @property
    def collection_interval_s(self) -> float | None:
        """The coarsest inferred exporter collection interval (``None`` until inferred)."""
        known = [i for i in (e.collection.interval() for e in self._endpoints) if i is not None]
        return max(known) if known else None

    @property
    def collection_warning(self) -> str | None:
        """A note when an exporter collects more coarsely than the view interval."""
        view, now = self._interval_s, self._clock()
        notes = [e.collection.coarse_note(e.node, view, now) for e in self._endpoints]
        return coarse_warning([n for n in notes if n is not None], view)

    # --- polling ------------------------------------------------------------------------

    def _poll_locked(self, t: float) -> GpuTick:
        wall = time.time()
        started = time.perf_counter()
        bodies = self._fetch_all()
        for endpoint, body in zip(self._endpoints, bodies, strict=True):
            self._absorb(endpoint, body, t)
        statics_changed = self._number_new_gpus()
        samples: list[GpuSample] = []
        extra_rows: list[DcgmGpuExtra] = []
        infos = list(self.gpu_info)
        for index, (ei, key) in enumerate(self._slots):
            endpoint = self._endpoints[ei]
            gpu = endpoint.gpus.get(key)
            if endpoint.error is not None or gpu is None:
                why = endpoint.error or "not in the exporter's answer"
                reason = f"N/A: {endpoint.node}: {why}"
                samples.append(GpuSample(index=index, t=t, missing=_all_sample_fields(reason)))
                continue
            shares = endpoint.collection.shares.get(key, {})
            bits = 0
            if self._fold:
                for name, share in shares.items():
                    if share > 0 and name != "low_util":
                        bits |= VIOLATION_BITS[f"DCGM_FI_DEV_{name.upper()}_VIOLATION"]
            samples.append(to_sample(gpu, index, t, extra_reasons=bits))
            reasons = gpu.values.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
            extra_rows.append(
                DcgmGpuExtra(
                    index=index,
                    exported_reasons=None if reasons is None else round(reasons),
                    violation_share=dict(shares),
                    values=extras(gpu),
                )
            )
            statics_changed |= self._refresh_static(index, gpu, infos)
        self.gpu_info = tuple(infos)
        if statics_changed or self.inventory is None:
            self.inventory = self._inventory()
        self.latest_extras = tuple(extra_rows)
        errors = [f"{e.node}: {e.error}" for e in self._endpoints if e.error is not None]
        errors += [f"{e.node}: {e.note}" for e in self._endpoints if e.note and e.error is None]
        cost_ms = (time.perf_counter() - started) * 1000.0
        return GpuTick(
            t=t,
            wall_time=wall,
            samples=tuple(samples),
            cost_ms=cost_ms,
            error="; ".join(errors) if errors else None,
        )

    def _fetch_all(self) -> list[str | DcgmFetchError]:
        urls = self._fetch_urls
        fetch = self._fetch
        if fetch is None:
            return self._fetcher.fetch_all(urls, self._timeout_s, self._max_bytes)

        def one(url: str) -> str | DcgmFetchError:
            try:
                return fetch(url, self._timeout_s, self._max_bytes)
            except DcgmFetchError as exc:
                return exc
            except Exception as exc:  # an injected fetch must not end the poller
                return DcgmFetchError(f"{type(exc).__name__}: {exc}")

        return [one(url) for url in urls]

    def _absorb(self, endpoint: _Endpoint, body: str | DcgmFetchError, t: float) -> None:
        if isinstance(body, DcgmFetchError):
            endpoint.error = str(body) or "unreadable"
            return
        parsed = endpoint.reader.parse(body)
        endpoint.parse_error = parsed.error
        endpoint.note = parsed.note
        if not parsed.gpus:
            endpoint.error = "no DCGM GPU series in the answer (is this a dcgm-exporter?)"
            return
        endpoint.error = None
        endpoint.gpus = {g.key: g for g in parsed.gpus}
        for g in parsed.gpus:
            # GPUs that come and go between answers must not grow the numbering without bound
            if g.key not in endpoint.keys and len(endpoint.keys) < MAX_GPUS:
                endpoint.keys[g.key] = None
        first = parsed.gpus[0]
        if first.hostname:
            endpoint.node = first.hostname
        endpoint.collection.observe(parsed.gpus, t)

    def _number_new_gpus(self) -> bool:
        known = set(self._slots)
        added = False
        for ei, endpoint in enumerate(self._endpoints):
            for key in endpoint.keys:
                if (ei, key) not in known:
                    self._slots.append((ei, key))
                    added = True
        while len(self._statics) < len(self._slots):
            self._statics.append(GpuStatic(index=len(self._statics)))
        return added

    def _refresh_static(self, index: int, gpu: DcgmGpu, infos: list[DcgmGpuInfo]) -> bool:
        static = to_static(gpu, index)
        ei, _ = self._slots[index]
        endpoint = self._endpoints[ei]
        info = DcgmGpuInfo(
            index=index,
            node=gpu.hostname or endpoint.node,
            url=endpoint.url,
            node_gpu=gpu.gpu,
            key=gpu.key,
            not_exported=not_exported(gpu),
            k8s=dict(gpu.k8s),
        )
        infos.extend([info] * (len(self._slots) - len(infos)))
        changed = infos[index] != info or self._statics[index] != static
        infos[index] = info
        self._statics[index] = static
        return changed

    def _inventory(self) -> GpuInventory:
        reachable = [e for e in self._endpoints if e.error is None]
        drivers = sorted(
            {g.driver_version for e in reachable for g in e.gpus.values() if g.driver_version}
        )
        system = SystemInfo(driver_version=", ".join(drivers) or None)
        if not self._slots:
            why = "; ".join(f"{e.url}: {e.error}" for e in self._endpoints)
            return GpuInventory(
                available=False, reason=f"dcgm-exporter unavailable: {why}", system=system
            )
        statics = tuple(self._statics)
        return GpuInventory(available=True, system=system, gpus=statics)


def _all_sample_fields(reason: str) -> dict[str, str]:
    names = set(GpuSample.__dataclass_fields__) - {"index", "t", "lost", "missing"}
    return dict.fromkeys(sorted(names), reason)


def dcgm_origin(source: DcgmGpuSource) -> GpuOrigin:
    """Where ``source``'s GPUs are, what its exporters leave out, how coarsely they collect."""
    not_sent = sorted({name for info in source.gpu_info for name in info.not_exported})
    interval = source.collection_interval_s if source.collection_warning else None
    return GpuOrigin(
        source="dcgm",
        nodes=tuple(info.node for info in source.gpu_info),
        not_exported=tuple(not_sent),
        # Two significant digits: a jittery estimate must not re-emit the inventory every tick.
        collection_interval_s=None if interval is None else float(f"{interval:.2g}"),
        view_interval_s=source.interval_s,
    )


__all__ = [
    "COARSE_FACTOR",
    "CollectionTracker",
    "DcgmEndpointState",
    "DcgmGpuExtra",
    "DcgmGpuInfo",
    "DcgmGpuSource",
    "Fetch",
    "coarse_warning",
    "dcgm_origin",
    "violation_shares",
]
