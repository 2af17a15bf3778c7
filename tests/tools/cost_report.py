#!/usr/bin/env python3
"""What the monitor costs: every figure of the cost table with its target, PASS or MISS.

    .venv/bin/python tests/tools/cost_report.py                 # 60 s per CPU mode
    .venv/bin/python tests/tools/cost_report.py --quick         # 10 s per mode, fewer repeats
    .venv/bin/python tests/tools/cost_report.py --only app vllmstat --repeat 3
    .venv/bin/python tests/tools/cost_report.py --rss-hour      # and the RSS over an hour

The gates (issue 39): the whole app at the default rates costs at most 1.5% of a core; beside
vllmstat 0.9.1 watching the same simulated vLLM, at most 0.35x its CPU; the monitor's RSS grows
at most 5 MiB from minute 5 to minute 60 and stays at most 80 MiB (``--rss-hour``: a real
``specwatch --url`` on a pseudo-terminal for an hour; ``--rss-at 0.2 0.5`` for a short try).
The exit status is 1 when a gate misses (``--strict``: when any figure misses).

The parts: sampling without the UI, the app with 64 GPUs, the ``/metrics`` read beside
``prometheus_client``'s full parse, a dcgm-exporter poll beside a full parse, RSS growth over
10^6 GPU samples on a stepped clock, ``--help`` and the first frame beside ``python -c pass``,
the benchmark client's chunk rate beside a bare httpx + orjson loop, and the profile trace's
streaming read beside ``json.load`` (``--only trace``; 100 MB, 20 MB with ``--quick``).

Absolute figures move between machines and with other load on them; read the ratios across
machines and the absolute figures within one run. ``--repeat N`` runs the CPU modes and the
side by side N times in turn and judges the medians, printing the range beside each. CPU figures
exclude the simulated GPUs' own physics (``cost_children.py``).

specwatch's children run on a venv with only its runtime dependencies (``pyproject.toml``'s
``[project] dependencies``, built once under ``~/.cache/specwatch-bench/``), importing specwatch
from this tree, as a user's ``pip install`` has it; ``--dev-venv`` measures with this interpreter
instead. Start-up figures are taken with specwatch's bytecode compiled first, as an installed
copy has it. Beside vllmstat both run without GPUs (``--no-gpu``); specwatch's default (NVML
tried) is shown for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.tools import cost_children as kids  # noqa: E402

VLLMSTAT = "vllmstat==0.9.1"
VENV = Path.home() / ".cache" / "specwatch-bench" / "vllmstat-0.9.1"

APP_CORE_PCT = 1.5
VLLMSTAT_RATIO = 0.35
RSS_GROWTH_MIB = 5.0
RSS_LEVEL_MIB = 80.0
METRICS_400KB_US = 2000.0
DCGM_RATIO = 10.0
GROWTH_MB = 5.0
HELP_S = 0.3
FIRST_FRAME_S = 0.6
CHUNK_RATIO = 0.9
CHUNKS_PER_S = 20_000


class Row(NamedTuple):
    """One line of the table."""

    figure: str
    value: str
    target: str
    ok: bool | None
    """``None``: not judged (not measured, the value says why; or shown for reference)."""
    gate: bool = False
    """One of issue 39's gates, which decide the exit status."""


CPU_MODES = {
    "app": ("whole app, 160x48, 8 GPUs, defaults", "app", 8, APP_CORE_PCT, True),
    "bare": ("sampling without UI, 8 GPUs", "bare", 8, 0.4, False),
    "app64": ("whole app, 64 GPUs (8 nodes)", "app", 64, 2.0, False),
}
"""``--only`` name -> figure, child, GPUs, target % of a core, whether it is a gate."""


def _runs(values: Sequence[float], unit: str = "") -> str:
    """`` (median of 3: 0.9-1.1%)`` for repeated figures, nothing for one."""
    if len(values) < 2:
        return ""
    return f" (median of {len(values)}: {min(values):.2f}-{max(values):.2f}{unit})"


def cpu_rows(seconds: float, only: Sequence[str], repeat: int) -> list[Row]:
    """The CPU modes in ``only``; each ``repeat`` times in turn, the median judged. The peak RSS
    of the whole app is judged against the RSS level gate's bound too."""
    chosen = {name: CPU_MODES[name] for name in CPU_MODES if name in only}
    if not chosen:
        return []
    pcts: dict[str, list[float]] = {name: [] for name in chosen}
    peaks: dict[str, list[float]] = {name: [] for name in chosen}
    sim, url, _ = kids.start_sim()
    try:
        for _ in range(repeat):
            for name in sorted(chosen, key=lambda n: chosen[n][1] != "bare"):
                _, mode, gpus, _, _ = chosen[name]
                r = kids.run_child(mode, url, seconds, gpus)
                pcts[name].append((r["cpu_s"] - r["sim_gpu_cpu_s"]) / r["wall_s"] * 100.0)
                peaks[name].append(r["peak_rss_mib"])
    finally:
        kids.stop_sim(sim)
    rows: list[Row] = []
    for name, (label, _, _, target, gate) in chosen.items():
        pct = statistics.median(pcts[name])
        value = f"{pct:.2f}% of a core{_runs(pcts[name], '%')}"
        rows.append(Row(label, value, f"<= {target:.1f}%", pct <= target, gate))
        if name == "app":
            peak = statistics.median(peaks[name])
            rows.append(
                Row(
                    "  its peak RSS",
                    f"{peak:.0f} MiB",
                    f"<= {RSS_LEVEL_MIB:.0f} MiB",
                    peak <= RSS_LEVEL_MIB,
                )
            )
    return rows


def _best(fn: Callable[[], object], repeats: int, clock: Callable[[], float]) -> float:
    """The least disturbed of ``repeats`` timings of ``fn``, seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def metrics_rows(quick: bool) -> list[Row]:
    """µs per later scrape (a live watch's steady state) beside the full parse, for SGLang's
    exposition and a vLLM with data-parallel engines that makes it about 400 KB."""
    from specwatch.sim.presets import preset
    from specwatch.sources.dialects.base import dialect_for
    from specwatch.sources.metrics.parse import MetricsReader, parse_metrics
    from tests.exposition_cases import sim_exposition

    repeats = 5 if quick else 30
    rows: list[Row] = []
    cases: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
        ("SGLang 0.5.23", "sglang", "0.5.23", {}),
        ("vLLM 0.33, 14 DP engines", "vllm", "0.33.0", {"dp_engines": 14}),
    )
    for label, dialect, version, overrides in cases:
        texts = [sim_exposition(dialect, version, t, **overrides) for t in (20.0, 21.0)]
        wanted = dialect_for(preset(dialect, version, **overrides).dialect).wanted_families
        reader = MetricsReader(wanted)
        reader.parse(texts[0])

        def later(reader: MetricsReader = reader, texts: list[str] = texts) -> object:
            texts.reverse()  # a live watch reads a text whose numbers moved since the last
            return reader.parse(texts[0])

        def full(text: str = texts[1]) -> object:
            return parse_metrics(text)

        us = _best(later, repeats, time.perf_counter) * 1e6
        full_us = _best(full, max(3, repeats // 5), time.perf_counter) * 1e6
        kept, lines = len(reader.parse(texts[1]).samples), len(parse_metrics(texts[1]).samples)
        size = len(texts[1].encode())
        value = f"{us:.0f} µs (full parse {full_us:.0f} µs, {kept}/{lines} samples kept)"
        big = size > 200_000
        target = f"<= {METRICS_400KB_US:.0f} µs" if big else "-"
        rows.append(
            Row(
                f"/metrics read, {size / 1024:.0f} KB ({label})",
                value,
                target,
                us <= METRICS_400KB_US or not big,
            )
        )
    return rows


def dcgm_rows(quick: bool) -> list[Row]:
    """CPU per dcgm-exporter poll of 8 simulated GPUs: a later poll of the remembering reader
    beside the whole answer through ``prometheus_client``, as every poll cost before it."""
    from prometheus_client.parser import text_string_to_metric_families

    from specwatch.core.sanitize import clean_labels
    from specwatch.sources.dcgm.parse import DcgmReader, group_gpus
    from tests.exposition_cases import sim_dcgm_answers

    texts = list(sim_dcgm_answers(8))

    def full(text: str = texts[1]) -> object:
        kept = [
            ln
            for ln in text.splitlines()
            if ln.startswith(("DCGM_", "# TYPE DCGM_", "# HELP DCGM_"))
        ]
        samples: list[tuple[str, Mapping[str, str], float]] = []
        for family in text_string_to_metric_families("\n".join(kept) + "\n"):
            for s in family.samples:
                samples.append(
                    (s.name.removesuffix("_total"), clean_labels(s.labels) or {}, s.value)
                )
        return group_gpus(samples)

    reader = DcgmReader()
    reader.parse(texts[0])

    def later() -> object:
        texts.reverse()
        return reader.parse(texts[0])

    n = 5 if quick else 25
    full_ms = _best(full, n, time.process_time) * 1e3
    later_ms = _best(later, n * 4, time.process_time) * 1e3
    ratio = full_ms / later_ms if later_ms > 0 else float("inf")
    value = f"{later_ms:.2f} ms ({ratio:.0f}x less than a full parse, {full_ms:.1f} ms)"
    return [
        Row("dcgm-exporter poll read, 8 GPUs", value, f">= {DCGM_RATIO:.0f}x", ratio >= DCGM_RATIO)
    ]


def memory_rows(quick: bool) -> list[Row]:
    """RSS growth of the GPU sampler over many samples of 8 simulated GPUs, the clock stepped a
    second a tick (``--quick``: one simulated hour, when the bounded history has just filled)."""
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sim.gpus import SimGpus
    from specwatch.sources.nvml.sampler import GpuSampler

    now = [1000.0]
    gpus = SimGpus(8, seed=1, start_t=now[0])
    states = gpus.states
    memo: dict[float | None, Any] = {}

    def states_once(t: float | None = None) -> Any:
        # the boards change only when the clock moves: one answer a tick stands in for the driver
        if t not in memo:
            memo.clear()
            memo[t] = states(t)
        return memo[t]

    gpus.states = states_once  # type: ignore[method-assign]
    sampler = GpuSampler(nvml=FakeNvml(gpus, clock=lambda: now[0]), clock=lambda: now[0])
    ticks = 3600 if quick else 10**6 // 8
    before = 0.0
    for i in range(ticks):
        if i == 200:
            gc.collect()
            before = _rss_mb()
        now[0] += 1.0
        gpus.advance_to(now[0], load=0.5 + 0.5 * ((i // 300) % 2))
        sampler.sample()
    gc.collect()
    growth = _rss_mb() - before
    value = f"+{growth:.1f} MB over {ticks * 8:,} GPU samples"
    return [Row("RSS growth, GPU sampler", value, f"< {GROWTH_MB:.0f} MB", growth < GROWTH_MB)]


def _rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _median_wall_s(argv: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=kids.env())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def start_rows(quick: bool) -> list[Row]:
    """``--help`` and the first frame of ``specwatch --url``, each beside ``python -c pass``."""
    bare = _median_wall_s([kids.PYTHON, "-c", "pass"])
    helped = _median_wall_s([kids.PYTHON, "-m", "specwatch", "--help"])
    rows = [
        Row(
            "specwatch --help",
            f"{helped:.3f} s (python -c pass {bare:.3f} s)",
            f"<= {HELP_S:.1f} s",
            helped <= HELP_S,
        )
    ]
    sim, url, _ = kids.start_sim()
    try:
        frames = [_first_frame_s(url) for _ in range(1 if quick else 3)]
    finally:
        kids.stop_sim(sim)
    known = sorted(f for f in frames if f is not None)
    target = f"<= {FIRST_FRAME_S:.1f} s"
    if not known:
        return [*rows, Row("first frame of specwatch --url", "no frame in 10 s", target, False)]
    frame = known[len(known) // 2]
    value = f"{frame:.3f} s (median of {len(known)}; python -c pass {bare:.3f} s)"
    return [*rows, Row("first frame of specwatch --url", value, target, frame <= FIRST_FRAME_S)]


def _first_frame_s(url: str) -> float | None:
    """Seconds from exec to the GPU pane's title on the pseudo-terminal."""
    t0 = time.perf_counter()
    pid, fd = kids.spawn([kids.PYTHON, "-m", "specwatch", "--url", url])
    seen = b""
    try:
        while time.perf_counter() - t0 < 10.0:
            chunk = kids.drain(fd, 0.05)
            if chunk is None:
                return None
            seen = seen[-64:] + chunk
            if b"GPUs" in seen:
                return time.perf_counter() - t0
        return None
    finally:
        kids.stop(pid, fd)


def chunk_rows(quick: bool) -> list[Row]:
    """Chunks a second the benchmark client reads from a replay server offering 20,000 a
    second, beside a bare httpx + orjson loop (best of each; a client that cannot keep up slows
    the sender through TCP)."""
    chunks = CHUNKS_PER_S * (1 if quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.json"
        template.write_text(json.dumps(kids.record_stream()))
        server, url = kids.start_replay(template, chunks, CHUNKS_PER_S)
        try:
            rates = {"bare": 0.0, "ours": 0.0}
            for _ in range(2 if quick else 3):
                for name in rates:
                    t0 = time.perf_counter()
                    read = _bare_loop(url) if name == "bare" else _bench_client(url, chunks)
                    got = asyncio.run(read)
                    if got < chunks:
                        raise RuntimeError(f"{name}: {got} of {chunks} chunks")
                    rates[name] = max(rates[name], chunks / (time.perf_counter() - t0))
        finally:
            kids.stop_sim(server)
    ratio = rates["ours"] / rates["bare"]
    value = f"{ratio:.2f}x ({rates['ours']:,.0f} vs {rates['bare']:,.0f} chunks/s, "
    value += f"offered {CHUNKS_PER_S:,}/s)"
    return [Row("bench client chunk rate", value, f">= {CHUNK_RATIO}x", ratio >= CHUNK_RATIO)]


async def _bare_loop(url: str) -> int:
    import httpx
    import orjson

    body = {"model": kids.MODEL, "prompt": "hi", "max_tokens": 1, "stream": True}
    n = 0
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{url}/v1/completions", json=body) as r,
    ):
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                orjson.loads(line[6:])
                n += 1
    return n


async def _bench_client(url: str, chunks: int) -> int:
    from specwatch.core.server import Dialect, ServerInfo, SpecConfig
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import parse_endpoint
    from specwatch.sources.stream import stream_completion

    spec = SpecConfig(enabled=False)
    info = ServerInfo(
        base_url=url, dialect=Dialect.VLLM, version="0.33.0", model=kids.MODEL, spec=spec
    )
    async with ServerClient(parse_endpoint(url), timeout_s=30) as client:
        result = await stream_completion(client, info, "hi", chunks)
    if result.error:
        raise RuntimeError(result.error)
    return result.completion_tokens


def watch_cost(argv: list[str], seconds: float, core: int) -> tuple[float, float]:
    """CPU % of one core and RSS (MiB) of a monitor on the pseudo-terminal, pinned to ``core``."""
    pid, fd = kids.spawn(argv, core)
    try:
        t_end = time.monotonic() + kids.WARMUP_S + seconds
        start: tuple[float, float] | None = None
        while time.monotonic() < t_end:
            if start is None and time.monotonic() >= t_end - seconds:
                start = (kids.proc_cpu_s(pid), time.monotonic())
            if kids.drain(fd, 0.1) is None:
                break
        if start is None:
            raise RuntimeError(f"{argv[0]} ended before the measured window")
        cpu, wall = kids.proc_cpu_s(pid) - start[0], time.monotonic() - start[1]
        rss = kids.proc_rss_mib(pid)
    finally:
        kids.stop(pid, fd)
    return cpu / wall * 100.0, rss


def vllmstat_rows(seconds: float, repeat: int) -> list[Row]:
    """specwatch beside vllmstat 0.9.1 on one simulated vLLM, each pinned to the same core in
    turn (``repeat`` rounds: medians judged, each ratio within its own round)."""
    label = "beside vllmstat 0.9.1 (CPU ratio)"
    exe = _vllmstat()
    if not exe.startswith("/"):
        return [Row(label, f"not measured: {exe}", f"<= {VLLMSTAT_RATIO}x", None, True)]
    sim, url, _ = kids.start_sim("vllm")
    rounds: list[tuple[tuple[float, float], ...]] = []
    try:
        core = min(os.sched_getaffinity(0))
        mine = [kids.PYTHON, "-m", "specwatch", "--url", url, "--interval", "1"]
        for _ in range(repeat):
            theirs = watch_cost([exe, "-u", url, "-i", "1", "--no-gpu"], seconds, core)
            ours = watch_cost([*mine, "--no-gpu"], seconds, core)
            tried = watch_cost(mine, seconds, core)
            rounds.append((theirs, ours, tried))
    finally:
        kids.stop_sim(sim)
    med = statistics.median
    ratios = [o[0] / t[0] if t[0] > 0 else float("inf") for t, o, _ in rounds]
    ratio = med(ratios)
    (t_cpu, t_rss), (o_cpu, o_rss), (x_cpu, x_rss) = (
        (med(r[i][0] for r in rounds), med(r[i][1] for r in rounds)) for i in range(3)
    )
    return [
        Row(
            label,
            f"{ratio:.2f}x{_runs(ratios, 'x')} (specwatch {o_cpu:.2f}%, "
            f"vllmstat {t_cpu:.2f}% of core {core})",
            f"<= {VLLMSTAT_RATIO}x",
            ratio <= VLLMSTAT_RATIO,
            True,
        ),
        Row(
            "  RSS beside vllmstat's",
            f"specwatch {o_rss:.1f} MiB, vllmstat {t_rss:.1f} MiB",
            "(for reference)",
            None,
        ),
        Row(
            "  specwatch without --no-gpu (NVML tried)",
            f"{x_cpu / t_cpu:.2f}x CPU ({x_cpu:.2f}%), {x_rss:.1f} MiB",
            "(for reference)",
            None,
        ),
    ]


def rss_hour_rows(marks_min: Sequence[float]) -> list[Row]:
    """RSS of a real ``specwatch --url`` (the simulator's server, its GPUs through the
    simulator's dcgm-exporter) on the pseudo-terminal at the two marks, in minutes."""
    first, last = sorted(marks_min)
    sim, url, dcgm = kids.start_sim(dcgm=True)
    pid, fd = kids.spawn([kids.PYTHON, "-m", "specwatch", "--url", url, "--dcgm", dcgm])
    readings: list[float] = []
    try:
        t0 = time.monotonic()
        for mark in (first, last):
            while time.monotonic() - t0 < mark * 60.0:
                if kids.drain(fd, 0.5) is None:
                    raise RuntimeError(f"the monitor ended after {time.monotonic() - t0:.0f} s")
            readings.append(kids.proc_rss_mib(pid))
    finally:
        kids.stop(pid, fd)
        kids.stop_sim(sim)
    growth = readings[1] - readings[0]
    span = f"minute {first:g} to {last:g}"
    return [
        Row(
            f"monitor RSS growth, {span}",
            f"{growth:+.1f} MiB ({readings[0]:.1f} -> {readings[1]:.1f} MiB)",
            f"<= {RSS_GROWTH_MIB:.0f} MiB",
            growth <= RSS_GROWTH_MIB,
            True,
        ),
        Row(
            f"monitor RSS at minute {last:g}",
            f"{readings[1]:.1f} MiB",
            f"<= {RSS_LEVEL_MIB:.0f} MiB",
            readings[1] <= RSS_LEVEL_MIB,
            True,
        ),
    ]


def trace_rows(quick: bool) -> list[Row]:
    """Reading a profile trace: ``read_rank`` beside ``json.load`` of the same file, in one run."""
    mb = 20.0 if quick else 100.0

    def child(mode: str, *more: str) -> str:
        argv = [kids.PYTHON, kids.__file__, mode, "--trace", str(path), *more]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cost-TP-0.trace.json"
        steps = int(child("trace-make", "--mb", str(mb)))
        size = path.stat().st_size / 1e6
        read = {mode: json.loads(child(mode)) for mode in ("trace-read", "trace-stdlib")}
    ours, std = read["trace-read"], read["trace-stdlib"]
    return [
        Row(
            f"profile trace read, {size:.0f} MB, {steps} eager steps",
            f"{size / ours['seconds']:.1f} MB/s, peak {ours['peak_mib']:.0f} MiB (json.load "
            f"{size / std['seconds']:.1f} MB/s, peak {std['peak_mib']:.0f} MiB: "
            f"{std['seconds'] / ours['seconds']:.2f}x the speed, "
            f"{ours['peak_mib'] / std['peak_mib']:.2f}x the memory)",
            "(for reference)",
            None,
        )
    ]


def runtime_python() -> str:
    """A Python whose venv holds specwatch's runtime dependencies and nothing else (built once
    per dependency list); the measured children import specwatch from this tree."""
    import hashlib

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    stamp = hashlib.sha256("\n".join(sorted(deps)).encode()).hexdigest()[:12]
    python = VENV.parent / f"runtime-{stamp}" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *deps], check=True)
    return str(python)


def _vllmstat() -> str:
    """The vllmstat executable (installed into its own venv), or why there is none."""
    exe = VENV / "bin" / "vllmstat"
    if exe.exists():
        return str(exe)
    index = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "vllmstat"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not re.search(r"\b0\.9\.1\b", index.stdout):
        return "pip index versions vllmstat does not list 0.9.1"
    if subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True).returncode:
        return "could not create a venv for vllmstat"
    pip = subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", VLLMSTAT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if pip.returncode != 0 or not exe.exists():
        return f"pip install {VLLMSTAT} failed: {pip.stderr.strip()[-120:]}"
    return str(exe)


STEPS: dict[str, Callable[[argparse.Namespace, float], list[Row]]] = {
    "vllmstat": lambda a, seconds: vllmstat_rows(seconds, a.repeat),
    "metrics": lambda a, seconds: metrics_rows(a.quick),
    "dcgm": lambda a, seconds: dcgm_rows(a.quick),
    "memory": lambda a, seconds: memory_rows(a.quick),
    "start": lambda a, seconds: start_rows(a.quick),
    "chunk": lambda a, seconds: chunk_rows(a.quick),
    "trace": lambda a, seconds: trace_rows(a.quick),
    "hour": lambda a, seconds: rss_hour_rows(a.rss_at),
}
"""``--only`` name -> the rows it measures, after the CPU modes, in this order; ``hour`` runs
only when asked for (``--rss-hour`` or ``--only hour``)."""


def print_table(rows: Sequence[Row], title: str) -> None:
    """The gates first, then the parts, one row a line."""
    print(title)
    width = max(len(r.figure) for r in rows)
    for heading, gate in (("gates (issue 39)", True), ("parts", False)):
        chosen = [r for r in rows if r.gate is gate]
        if chosen:
            print(f"{heading}:")
        for r in chosen:
            verdict = "n/a" if r.ok is None else ("PASS" if r.ok else "MISS")
            print(f"  {r.figure:<{width}}  {verdict:4}  {r.target:>15}  {r.value}")
    if not any(r.gate and r.figure.startswith("monitor RSS") for r in rows):
        print("(the RSS gates over an hour: --rss-hour)")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table; exit 1 when a gate misses (``--strict``: any figure)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="10 s per CPU mode, fewer repeats")
    p.add_argument("--seconds", type=float, help="measured seconds per CPU mode (default 60)")
    p.add_argument("--only", nargs="+", choices=(*CPU_MODES, *STEPS), help="only these figures")
    p.add_argument("--skip-vllmstat", action="store_true", help="leave out the side by side")
    p.add_argument(
        "--repeat", type=int, default=1, help="rounds of the CPU modes and the side by side"
    )
    p.add_argument("--rss-hour", action="store_true", help="also the monitor's RSS over an hour")
    p.add_argument(
        "--rss-at",
        type=float,
        nargs=2,
        default=(5.0, 60.0),
        metavar=("MIN", "MIN"),
        help="the two minutes the RSS is read at (default: 5 60)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when any figure misses")
    p.add_argument("--dev-venv", action="store_true", help="measure with this interpreter")
    args = p.parse_args(argv)
    args.repeat = max(1, args.repeat)
    seconds = args.seconds or (10.0 if args.quick else 60.0)
    compileall.compile_dir(str(ROOT / "specwatch"), quiet=1)
    if not args.dev_venv:
        kids.PYTHON = runtime_python()
    only = set(args.only or {*CPU_MODES, *STEPS} - {"hour"})
    if args.rss_hour:
        only.add("hour")
    if args.skip_vllmstat:
        only.discard("vllmstat")
    rows = cpu_rows(seconds, [m for m in CPU_MODES if m in only], args.repeat)
    for name, step in STEPS.items():
        if name in only:
            rows.extend(step(args, seconds))
    venv = "dev venv" if args.dev_venv else "runtime-only venv"
    rounds = f", {args.repeat} rounds" if args.repeat > 1 else ""
    run = "quick" if args.quick else "full"
    print_table(rows, f"specwatch cost, {run} run, {seconds:g} s per CPU mode, {venv}{rounds}")
    missed = [r for r in rows if r.ok is False and (r.gate or args.strict)]
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
