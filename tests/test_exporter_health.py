"""The exporter's health series tell the truth: no error against a healthy server; a server that
hangs (SIGSTOP: the simulator and a real llama-server, each in a process of its own) or turns
to answering 200 with random bytes is ``up`` 0 within the poll deadline, counts errors, and has
its window and verdict series withdrawn until it answers again; the HTTP server answers a
fleet's 500 simultaneous scrapes and closes connections that stay silent."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.exporter.families import SessionCollector
from specwatch.exporter.readings import Readings
from specwatch.exporter.serve import Exporter
from specwatch.session.events import MetricsScraped, ServerWaiting
from specwatch.session.live import LiveSession
from specwatch.sources.http.client import POLL_DEADLINE_S
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.identity.code_origin import Deadline
from specwatch.sources.identity.process import listening_sockets, socket_owners
from tests.hostile import hostile_server
from tests.realserver import running_llama_server
from tests.session_world import Collector, drive_until, manual_sim

ROOT = Path(__file__).resolve().parent.parent
Series = dict[str, list[tuple[dict[str, str], float]]]
WINDOW = "specwatch_generation_tokens_per_second"
INTERVAL_S = 0.5
LOST_WITHIN_S = POLL_DEADLINE_S + INTERVAL_S + 2.5
"""From the freeze to ``up`` 0: one scrape's deadline, the interval before it, and slack for
two shared cores."""


def parse(text: str) -> Series:
    """An exposition's samples by name."""
    out: Series = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def scrape(readings: Readings) -> Series:
    """What a scrape of ``readings`` shows."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view))
    return parse(generate_latest(registry).decode())


def health(got: Series) -> tuple[float, float]:
    """(``up``, ``source_errors_total``) of the one server."""
    return got["specwatch_server_up"][0][1], got["specwatch_source_errors_total"][0][1]


async def test_a_healthy_server_counts_no_errors() -> None:
    with manual_sim() as sim:
        session = sim.session(None, metrics_interval_s=0.1)
        seen = Collector()
        session.subscribe(seen)
        exporter = Exporter.of(session)
        async with session:

            def windows() -> int:
                return sum(e.window.dt > 0 for e in seen.of(MetricsScraped))

            await drive_until(sim, lambda: windows() >= 5, 20)
            got = scrape(exporter.readings)
    assert health(got) == (1.0, 0.0)
    assert WINDOW in got


async def test_a_server_still_loading_at_start_counts_no_errors() -> None:
    # The demo's SGLang refuses connections while its model loads: the session waits (a refused
    # attempt a second) before the first window, and none of those is a failed read.
    with manual_sim(load_time_s=2.0) as sim:
        session = sim.session(None, metrics_interval_s=0.1)
        seen = Collector()
        session.subscribe(seen)
        exporter = Exporter.of(session)
        async with session:
            await drive_until(sim, lambda: bool(seen.of(ServerWaiting)), 20, step_s=0.0)
            assert scrape(exporter.readings)["specwatch_source_errors_total"][0][1] == 0.0

            def windows() -> int:
                return sum(e.window.dt > 0 for e in seen.of(MetricsScraped))

            await drive_until(sim, lambda: windows() >= 3, 30)
            got = scrape(exporter.readings)
    assert {e.state for e in seen.of(ServerWaiting)} >= {"refused", "ready"}
    assert health(got) == (1.0, 0.0)


async def capture_garbage_episode(
    healthy: int, after_s: float, every_s: float = 0.25
) -> tuple[list[tuple[float, float]], float, Series]:
    """A server that answers like a small vLLM, then 200 with random bytes on every path.

    Returns:
        (``up``, errors) every ``every_s`` from the ``healthy``-th sample after the first
        good window until ``after_s`` after the switch; seconds from the switch to ``up`` 0;
        the last scrape.
    """
    with hostile_server("quiet") as hostile:
        session = LiveSession([parse_endpoint(hostile.url)], None, 0.1, timeout_s=1.0)
        exporter = Exporter.of(session)
        samples: list[tuple[float, float]] = []
        async with session:
            end = time.monotonic() + 20
            while WINDOW not in (got := scrape(exporter.readings)):
                assert time.monotonic() < end, got
                await asyncio.sleep(0.05)
            for _ in range(healthy):
                samples.append(health(scrape(exporter.readings)))
                await asyncio.sleep(every_s)
            hostile.case = "garbage"
            switched = time.monotonic()
            lost_after: float | None = None
            while time.monotonic() - switched < after_s:
                got = scrape(exporter.readings)
                samples.append(health(got))
                if lost_after is None and samples[-1][0] == 0.0:
                    lost_after = time.monotonic() - switched
                await asyncio.sleep(every_s)
    assert lost_after is not None, samples
    return samples, lost_after, got


async def test_a_server_answering_random_bytes_is_down_and_stays_down() -> None:
    samples, lost_after, last = await capture_garbage_episode(healthy=3, after_s=4.0)
    assert samples[:3] == [(1.0, 0.0)] * 3
    assert lost_after <= LOST_WITHIN_S
    down = samples[next(i for i, (up, _) in enumerate(samples) if up == 0.0) :]
    assert {up for up, _ in down} == {0.0}, samples  # a re-detection never flips it back
    errors = [e for _, e in down]
    assert errors == sorted(errors) and errors[-1] >= 3
    for name in (WINDOW, "specwatch_accept_length", "specwatch_verdict"):
        assert name not in last


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pid_on(port: int) -> int:
    inodes = {inode for inode, _ in listening_sockets(port)}
    (pid,) = set(socket_owners(inodes, Deadline(5.0)))
    return pid


@contextmanager
def _exporter(url: str) -> Iterator[Callable[[], Series]]:
    """``specwatch exporter URL`` in a process; yields a scrape of it."""
    argv = [sys.executable, "-m", "specwatch", "exporter", url, "--listen", "127.0.0.1:0"]
    argv += ["--interval", str(INTERVAL_S), "--no-gpu"]
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        port = first.rsplit("127.0.0.1:", 1)[-1].split("/", 1)[0]
        assert port.isdigit(), first
        yield lambda: parse(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        finally:
            proc.kill()


def _until(cond: Callable[[Series], bool], get: Callable[[], Series], within_s: float) -> float:
    """Seconds until a scrape satisfies ``cond`` (fails after ``within_s``)."""
    start = time.monotonic()
    while not cond(got := get()):
        assert time.monotonic() - start < within_s, got
        time.sleep(0.1)  # polling the exporter for a condition, with a deadline
    return time.monotonic() - start


def _freeze_and_thaw(url: str, pid: int) -> None:
    with _exporter(url) as get:
        _until(lambda g: WINDOW in g and health(g) == (1.0, 0.0), get, 60)
        os.kill(pid, signal.SIGSTOP)
        try:
            lost = _until(lambda g: health(g)[0] == 0.0, get, 30)
            got = get()
        finally:
            os.kill(pid, signal.SIGCONT)
        assert lost <= LOST_WITHIN_S, lost
        assert health(got)[1] >= 1 and WINDOW not in got and "specwatch_verdict" not in got
        _until(lambda g: health(g)[0] == 1.0 and WINDOW in g, get, 60)


@pytest.mark.slow
def test_a_stopped_simulator_is_down_within_the_deadline() -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "specwatch", "sim", "--port", str(port), "--gpus", "1"]
    argv += ["--dialect", "vllm", "--no-dcgm", "--background", "1"]
    sim = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 30
        while not listening_sockets(port):
            assert sim.poll() is None and time.monotonic() < end
            time.sleep(0.1)  # waiting for the simulator's socket, with a deadline
        _freeze_and_thaw(url, sim.pid)
    finally:
        sim.kill()
        sim.wait(20)


@pytest.mark.slow
def test_a_stopped_llama_server_is_down_within_the_deadline() -> None:
    with running_llama_server("plain") as url:
        _freeze_and_thaw(url, _pid_on(int(url.rsplit(":", 1)[1])))


async def _raw_scrape(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    await writer.drain()
    body = await reader.read()
    writer.close()
    return body


async def test_five_hundred_simultaneous_scrapes_are_all_answered() -> None:
    readings = Readings([parse_endpoint("http://127.0.0.1:9")])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(readings.view))
    http, port = Exporter(readings, SessionCollector(readings.view), registry).serve("127.0.0.1", 0)
    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(_raw_scrape(port) for _ in range(500))), 30
        )
    finally:
        http.shutdown()
        http.server_close()
    assert sum(a.startswith(b"HTTP/1.0 200") for a in answers) == 500


async def test_a_silent_connection_is_closed() -> None:
    readings = Readings([])
    registry = CollectorRegistry(auto_describe=False)
    exporter = Exporter(readings, SessionCollector(readings.view), registry)
    http, port = exporter.serve("127.0.0.1", 0, idle_timeout_s=0.5)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        start = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
        assert time.monotonic() - start < 5
        writer.close()
        assert (await _raw_scrape(port)).startswith(b"HTTP/1.0 200")  # and it still serves
    finally:
        http.shutdown()
        http.server_close()
