"""The host's CPU read from ``/proc`` and ``/sys``: the parsers of each file, and a sampler that
turns successive readings into :class:`~specwatch.core.host.HostSpan` figures.

Cheap by construction: a reading is ``/proc/stat``, ``/proc/loadavg``, the cpufreq files of at
most :data:`MAX_FREQ_CPUS` cores and the server's threads' ``schedstat``; the scan of every
process (``/proc/[pid]/stat``, for the few that competed with the server) happens at most every
``scan_interval_s``. Every read is bounded in size; an unreadable file leaves its figure
``None`` with the reason, never an exception. Call it off the UI thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from specwatch.core.host import (
    NAME_LIMIT,
    Competitor,
    CpuTimes,
    HostReading,
    HostSpan,
    ProcessCpu,
    ServerCpu,
    competitors_between,
    host_span,
)
from specwatch.core.identity import ServerIdentity
from specwatch.core.sanitize import sanitize_line

STAT_LIMIT = 1 << 20
"""Most bytes read of ``/proc/stat`` (its ``intr`` line grows with the interrupts)."""
SMALL_LIMIT = 4096
"""Most bytes read of a one-line file (``loadavg``, ``[pid]/stat``, ``schedstat``, cpufreq)."""
MAX_FREQ_CPUS = 64
"""Cores whose frequency is read (a mean over the first ones)."""
MAX_THREADS = 1024
"""Threads of the server whose scheduler times are summed."""
MAX_PROCESSES = 4096
"""Processes read on a scan."""
SCAN_INTERVAL_S = 5.0
"""Least time between two scans of every process."""
NO_CPUFREQ = "n/a: no cpufreq on this host (a VM or container hides it)"


def _read(path: str | Path, limit: int = SMALL_LIMIT) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("ascii", "replace")
    except OSError:
        return None


def parse_stat(text: str) -> tuple[CpuTimes | None, int | None, int]:
    """``/proc/stat``: all cores' times, ``procs_running``, and how many ``cpuN`` lines."""
    cpu: CpuTimes | None = None
    running: int | None = None
    cores = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:] if x.isdigit()]
            if len(v) >= 4:
                v += [0] * (8 - len(v))
                # guest and guest_nice are already inside user and nice.
                cpu = CpuTimes(busy=v[0] + v[1] + v[2] + v[5] + v[6], idle=v[3] + v[4], steal=v[7])
        elif line.startswith("cpu") and line[3:4].isdigit():
            cores += 1
        elif line.startswith("procs_running "):
            word = line.split()[1]
            running = int(word) if word.isdigit() else None
    return cpu, running, cores


def parse_loadavg(text: str) -> float | None:
    """``/proc/loadavg``'s one-minute load."""
    words = text.split()
    try:
        return float(words[0]) if words else None
    except ValueError:
        return None


def parse_pid_stat(text: str) -> tuple[str, int] | None:
    """``/proc/[pid]/stat``: the process name (sanitised, bounded) and utime + stime ticks."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        return None
    rest = text[close + 1 :].split()
    # rest[0] is the state (field 3); utime and stime are fields 14 and 15.
    if len(rest) < 13 or not rest[11].isdigit() or not rest[12].isdigit():
        return None
    return sanitize_line(text[open_ + 1 : close], NAME_LIMIT), int(rest[11]) + int(rest[12])


def parse_schedstat(text: str) -> tuple[int, int] | None:
    """``/proc/[pid]/task/[tid]/schedstat``: nanoseconds on a CPU and waiting for one."""
    words = text.split()
    if len(words) < 2 or not words[0].isdigit() or not words[1].isdigit():
        return None
    return int(words[0]), int(words[1])


def _ticks() -> int:
    with contextlib.suppress(ValueError, OSError, AttributeError):
        return int(os.sysconf("SC_CLK_TCK"))
    return 100


class HostSampler:
    """Readings of this host's CPU, and the figures between each reading and the one before.

    Args:
        proc: Where ``/proc`` is (tests point it at captured files).
        cpu_sys: Where ``/sys/devices/system/cpu`` is.
        clock: Monotonic clock.
        scan_interval_s: Least time between two scans of every process.
    """

    def __init__(
        self,
        *,
        proc: Path = Path("/proc"),
        cpu_sys: Path = Path("/sys/devices/system/cpu"),
        clock: Callable[[], float] = time.monotonic,
        scan_interval_s: float = SCAN_INTERVAL_S,
    ) -> None:
        self.proc = proc
        self.cpu_sys = cpu_sys
        self.clock = clock
        self.scan_interval_s = scan_interval_s
        self.clock_ticks = _ticks()
        self.server_pids: frozenset[int] = frozenset()
        """The server's process and its children (``ServerIdentity.pids``)."""
        self.server_local = False
        self._lock = threading.Lock()
        self._last: HostReading | None = None
        self._scans: list[HostReading] = []
        """The last two readings with a scan."""

    def set_server(self, pids: Iterable[int], local: bool | None = None) -> None:
        """Follow these processes as the server's (its pid and its children)."""
        with self._lock:
            self.server_pids = frozenset(p for p in pids if p > 0)
            self.server_local = bool(self.server_pids) if local is None else local

    def read(self, scan: bool = False) -> HostReading:
        """The counters now; every process too when ``scan``."""
        missing: dict[str, str] = {}
        stat = _read(self.proc / "stat", STAT_LIMIT)
        cpu, running, cores = parse_stat(stat) if stat is not None else (None, None, 0)
        if stat is None:
            missing["cpu"] = "n/a: /proc/stat is not readable"
        load_text = _read(self.proc / "loadavg")
        load = parse_loadavg(load_text) if load_text is not None else None
        freq, governor = self._frequency(missing)
        return HostReading(
            t=self.clock(),
            cores=cores or os.cpu_count(),
            clock_ticks=self.clock_ticks,
            cpu=cpu,
            procs_running=running,
            load1=load,
            freq_mhz=freq,
            governor=governor,
            server=self._server(),
            processes=self._scan() if scan else None,
            missing=missing,
        )

    def _frequency(self, missing: dict[str, str]) -> tuple[float | None, str | None]:
        mhz: list[float] = []
        for n in range(MAX_FREQ_CPUS):
            text = _read(self.cpu_sys / f"cpu{n}" / "cpufreq" / "scaling_cur_freq")
            if text is None:
                break
            with contextlib.suppress(ValueError):
                mhz.append(int(text.strip()) / 1000.0)
        gov = _read(self.cpu_sys / "cpu0" / "cpufreq" / "scaling_governor")
        governor = sanitize_line(gov.strip(), NAME_LIMIT) if gov else None
        if not mhz:
            missing["freq_mhz"] = NO_CPUFREQ
        if governor is None:
            missing["governor"] = NO_CPUFREQ
        return (sum(mhz) / len(mhz) if mhz else None), governor

    def _server(self) -> ServerCpu | None:
        run = wait = threads = 0
        waited = True
        for pid in sorted(self.server_pids):
            try:
                tids = sorted(os.listdir(self.proc / str(pid) / "task"))[:MAX_THREADS]
            except OSError:
                continue
            for tid in tids:
                text = _read(os.path.join(self.proc, str(pid), "task", tid, "schedstat"))
                parsed = parse_schedstat(text) if text is not None else None
                if parsed is None:
                    waited = False
                    continue
                run, wait, threads = run + parsed[0], wait + parsed[1], threads + 1
        if not threads:
            return None
        return ServerCpu(run_ns=run, wait_ns=wait if waited else None, threads=threads)

    def _scan(self) -> tuple[ProcessCpu, ...]:
        out: list[ProcessCpu] = []
        try:
            names = os.listdir(self.proc)
        except OSError:
            return ()
        for name in names:
            if not name.isdigit():
                continue
            # a string, not a Path: pathlib interns every part, and the ever-new pids of a
            # busy host grew the interpreter's table of interned strings (seen under tracemalloc)
            text = _read(os.path.join(self.proc, name, "stat"))
            parsed = parse_pid_stat(text) if text is not None else None
            if parsed is not None:
                out.append(ProcessCpu(int(name), parsed[0], parsed[1]))
            if len(out) >= MAX_PROCESSES:
                break
        return tuple(out)

    @property
    def last_t(self) -> float | None:
        """When the latest reading was taken (``None`` before the first)."""
        last = self._last
        return None if last is None else last.t

    def sample(self, force_scan: bool = False) -> HostSpan | None:
        """Read now; the figures since the previous reading (``None`` on the first).

        The span names the processes that competed with the server between the last two scans
        when this reading scanned; a scan happens when ``scan_interval_s`` passed since the
        last one (or ``force_scan`` and a second passed).
        """
        with self._lock:
            now = self.clock()
            since = now - self._scans[-1].t if self._scans else None
            scan = since is None or since >= self.scan_interval_s or (force_scan and since >= 1.0)
            reading = self.read(scan=scan)
            before, self._last = self._last, reading
            competitors: tuple[Competitor, ...] = ()
            if reading.processes is not None:
                self._scans = [*self._scans[-1:], reading]
                if len(self._scans) == 2:
                    a, b = self._scans
                    assert a.processes is not None and b.processes is not None
                    competitors = competitors_between(
                        a.processes, b.processes, b.t - a.t, self.clock_ticks, self.server_pids
                    )
            if before is None:
                return None
            return host_span(
                before, reading, server_local=self.server_local, competitors=competitors
            )


def sampler_for(identity: ServerIdentity | None) -> HostSampler:
    """A sampler following the server process of ``identity`` (none: the host alone)."""
    sampler = HostSampler()
    if identity is not None and identity.pid is not None:
        sampler.set_server(identity.pids or (identity.pid,))
    return sampler


__all__ = [
    "MAX_FREQ_CPUS",
    "SCAN_INTERVAL_S",
    "HostSampler",
    "parse_loadavg",
    "parse_pid_stat",
    "parse_schedstat",
    "parse_stat",
    "sampler_for",
]
