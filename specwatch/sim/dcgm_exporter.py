"""A simulated dcgm-exporter: ``/metrics`` in its format for the simulated GPUs, over aiohttp.

It has a real exporter's quirks: some fields absent (the fan of a passively cooled board,
the reliability counter), one field written as DCGM's "blank" sentinel, a space after each
label comma (as some versions write), ``Hostname``/``UUID``/``pci_bus_id``/``modelName`` and
empty Kubernetes labels; and a collection interval: values only change every
``update_interval_s`` seconds of the simulation clock, however often they are read.

:func:`start_dcgm_exporter` runs it on the caller's event loop (the simulator);
:class:`SimDcgmExporter` runs it on its own thread (tests, and callers without a loop).
"""

from __future__ import annotations

import asyncio
import math
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from specwatch.sim.gpus import SimGpus
from specwatch.sim.loop_thread import LoopThread

DRIVER_VERSION = "570.133.20"
INT64_NOT_SUPPORTED = 9223372036854775794
"""DCGM_INT64_NOT_SUPPORTED (blank + 2): what DCGM writes for a field a board lacks."""
_MIB = 1024**2

DEFAULT_ABSENT: frozenset[str] = frozenset(
    {"DCGM_FI_DEV_FAN_SPEED", "DCGM_FI_DEV_RELIABILITY_VIOLATION"}
)
DEFAULT_BLANK: Mapping[str, int] = {"DCGM_FI_DEV_LOW_UTIL_VIOLATION": INT64_NOT_SUPPORTED}


@dataclass(frozen=True, slots=True)
class DcgmQuirks:
    """How the simulated exporter departs from a tidy exposition."""

    absent: frozenset[str] = DEFAULT_ABSENT
    """Fields left out, as a default counters CSV leaves many out."""
    blank: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_BLANK))
    """Fields written with a sentinel value instead of a reading."""
    spaced_labels: bool = True
    """A space after each label comma."""
    old_throttle_name: bool = False
    """Write ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` (exporters before 3.3)."""
    kubernetes_labels: bool = True
    """Add empty ``container``/``namespace``/``pod`` labels."""


def render_dcgm(
    gpus: SimGpus,
    t: float,
    hostname: str = "sim-node",
    quirks: DcgmQuirks | None = None,
) -> str:
    """The exposition for ``gpus`` at simulation time ``t``."""
    q = quirks or DcgmQuirks()
    spec = gpus.spec
    states = gpus.states(t)
    rows: dict[str, list[tuple[str, float | int]]] = {}

    def put(name: str, labels: str, value: float | int) -> None:
        if name in q.absent:
            return
        rows.setdefault(name, []).append((labels, q.blank.get(name, value)))

    sep = ", " if q.spaced_labels else ","
    for state in states:
        label_pairs = [
            ("gpu", str(state.index)),
            ("UUID", state.uuid),
            ("pci_bus_id", state.pci_bus_id),
            ("device", f"nvidia{state.index}"),
            ("modelName", spec.name),
            ("Hostname", hostname),
            ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION),
        ]
        if q.kubernetes_labels:
            label_pairs += [("container", ""), ("namespace", ""), ("pod", "")]
        labels = sep.join(f'{k}="{v}"' for k, v in label_pairs)
        if state.lost:
            put("DCGM_FI_DEV_XID_ERRORS", labels, 79)
            continue
        board = gpus.gpus[state.index]
        limit_w = board.power_limit_w
        app_sm, app_mem = board.app_clocks_mhz or (spec.max_sm_clock_mhz, spec.max_mem_clock_mhz)
        used_mib = state.mem_used_bytes // _MIB
        total_mib = spec.mem_total_bytes // _MIB
        reasons = (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
            if q.old_throttle_name
            else "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
        )
        for name, value in (
            ("DCGM_FI_DEV_SM_CLOCK", state.sm_clock_mhz),
            ("DCGM_FI_DEV_MEM_CLOCK", state.mem_clock_mhz),
            ("DCGM_FI_DEV_MAX_SM_CLOCK", spec.max_sm_clock_mhz),
            ("DCGM_FI_DEV_MAX_MEM_CLOCK", spec.max_mem_clock_mhz),
            ("DCGM_FI_DEV_APP_SM_CLOCK", app_sm),
            ("DCGM_FI_DEV_APP_MEM_CLOCK", app_mem),
            ("DCGM_FI_DEV_PERSISTENCE_MODE", 1),
            ("DCGM_FI_DEV_GPU_TEMP", round(state.temp_c)),
            ("DCGM_FI_DEV_MEMORY_TEMP", round(state.hbm_temp_c)),
            ("DCGM_FI_DEV_SLOWDOWN_TEMP", spec.slowdown_temp_c),
            ("DCGM_FI_DEV_SHUTDOWN_TEMP", spec.shutdown_temp_c),
            ("DCGM_FI_DEV_POWER_USAGE", round(state.power_w, 3)),
            ("DCGM_FI_DEV_POWER_MGMT_LIMIT", limit_w),
            ("DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", spec.power_limit_w),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", int(state.energy_j * 1000)),
            (reasons, state.reasons),
            ("DCGM_FI_DEV_GPU_UTIL", state.util_gpu_pct),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", state.util_mem_pct),
            ("DCGM_FI_DEV_FB_USED", used_mib),
            ("DCGM_FI_DEV_FB_FREE", total_mib - used_mib),
            ("DCGM_FI_DEV_FB_TOTAL", total_mib),
            ("DCGM_FI_DEV_PCIE_LINK_GEN", state.pcie_gen),
            ("DCGM_FI_DEV_PCIE_LINK_WIDTH", state.pcie_width),
            ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", spec.max_pcie_gen),
            ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", spec.max_pcie_width),
            ("DCGM_FI_DEV_FAN_SPEED", 0),
            ("DCGM_FI_PROF_DRAM_ACTIVE", round(state.dram_active, 4)),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", round(state.tensor_active, 4)),
            ("DCGM_FI_DEV_POWER_VIOLATION", state.power_violation_ns),
            ("DCGM_FI_DEV_THERMAL_VIOLATION", state.thermal_violation_ns),
            ("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", 0),
            ("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", 0),
            ("DCGM_FI_DEV_LOW_UTIL_VIOLATION", 0),
            ("DCGM_FI_DEV_RELIABILITY_VIOLATION", 0),
            ("DCGM_FI_DEV_XID_ERRORS", 0),
            ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0),
        ):
            put(name, labels, value)
    lines: list[str] = []
    for name, series in rows.items():
        kind = "counter" if name.endswith(("_VIOLATION", "_CONSUMPTION", "_COUNTER")) else "gauge"
        lines.append(f"# HELP {name} {name.removeprefix('DCGM_FI_DEV_').lower()} (simulated).")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{{{labels}}} {_number(v)}" for labels, v in series)
    return "\n".join(lines) + "\n"


def _number(value: float | int) -> str:
    if isinstance(value, int) or (math.isfinite(value) and value.is_integer()):
        return str(int(value))
    return repr(float(value))


class DcgmCollector:
    """Holds the latest collection and re-collects when the update interval has passed.

    Collection happens at the first read after the interval is due (the simulated GPUs are
    integrated lazily, so a collection can only be taken "now"); due times stay on the grid
    ``start + k * update_interval_s`` so a reader polling faster sees changes every interval.
    """

    def __init__(
        self,
        gpus: SimGpus,
        clock: Callable[[], float],
        update_interval_s: float = 1.0,
        hostname: str = "sim-node",
        quirks: DcgmQuirks | None = None,
    ) -> None:
        if not update_interval_s > 0:
            raise ValueError(f"update interval must be positive, got {update_interval_s!r}")
        self.gpus = gpus
        self.clock = clock
        self.update_interval_s = update_interval_s
        self.hostname = hostname
        self.quirks = quirks or DcgmQuirks()
        self._start = clock()
        self._due = self._start
        self._text = ""
        self._lock = threading.Lock()

    def exposition(self) -> str:
        """The current exposition text (collected anew only when due)."""
        with self._lock:
            now = self.clock()
            if now >= self._due:
                self._text = render_dcgm(self.gpus, now, self.hostname, self.quirks)
                periods = math.floor((now - self._start) / self.update_interval_s) + 1
                self._due = self._start + periods * self.update_interval_s
            return self._text


def dcgm_app(collector: DcgmCollector) -> web.Application:
    """An aiohttp app serving ``GET /metrics`` from ``collector``."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=collector.exposition(), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


@dataclass
class DcgmExporterSite:
    """A running exporter on an event loop."""

    url: str
    """``http://host:port/metrics``."""
    port: int
    collector: DcgmCollector
    runner: web.AppRunner

    async def close(self) -> None:
        """Stop serving."""
        await self.runner.cleanup()


async def start_dcgm_exporter(
    gpus: SimGpus,
    clock: Callable[[], float],
    port: int = 0,
    host: str = "127.0.0.1",
    update_interval_s: float = 1.0,
    hostname: str = "sim-node",
    quirks: DcgmQuirks | None = None,
) -> DcgmExporterSite:
    """Serve the simulated exporter on the running loop (port 0 picks a free one)."""
    collector = DcgmCollector(gpus, clock, update_interval_s, hostname, quirks)
    runner = web.AppRunner(dcgm_app(collector), handle_signals=False, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
        await web.SockSite(runner, sock).start()
    except BaseException:
        sock.close()
        await runner.cleanup()
        raise
    bound = int(sock.getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    return DcgmExporterSite(f"http://{shown}:{bound}/metrics", bound, collector, runner)


class SimDcgmExporter(LoopThread):
    """The simulated exporter on its own thread and loop; a context manager.

    Args are those of :func:`start_dcgm_exporter`.
    """

    thread_name = "sim-dcgm"
    what = "simulated dcgm-exporter"

    def __init__(
        self,
        gpus: SimGpus,
        clock: Callable[[], float],
        port: int = 0,
        host: str = "127.0.0.1",
        update_interval_s: float = 1.0,
        hostname: str = "sim-node",
        quirks: DcgmQuirks | None = None,
    ) -> None:
        super().__init__()
        self._args = (gpus, clock, port, host, update_interval_s, hostname, quirks)
        self.site: DcgmExporterSite | None = None

    @property
    def url(self) -> str:
        """``http://host:port/metrics`` once started."""
        return self.site.url if self.site is not None else ""

    def start(self) -> str:
        """Start serving; returns the URL once the port listens."""
        self._start_thread()
        return self.url

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        self.site = await start_dcgm_exporter(*self._args)
        self._serving()
        await self._stopping.wait()
        await self.site.close()
