"""Probe, bench and the live session's poller against a hostile server over real sockets."""

from __future__ import annotations

import argparse
import asyncio
import io
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from specwatch.commands.bench import add_bench_arguments, run_bench
from specwatch.commands.probe import render_text
from specwatch.core.server import MetricsWindow
from specwatch.session.events import MetricsScraped, ServerReady, SessionEvent
from specwatch.session.live import ServerPoller
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import probe, probe_to_dict
from tests.hostile import hostile_server

ESC = "\x1b"
ROOT = Path(__file__).resolve().parents[1]


def _no_controls(text: str) -> None:
    """Nothing in ``text`` can act on a terminal (only newlines are left)."""
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]
    assert not bad, repr(text)
    assert "\u202e" not in text


async def _probe(case: str, **kw: float) -> tuple[str, dict[str, object], float]:
    with hostile_server(case, trickle_s=0.5) as server:
        t = time.monotonic()
        result = await probe(
            parse_endpoint(server.url, env={}),
            max_tokens=16,
            timeout_s=kw.get("timeout_s", 5.0),
            deadline_s=kw.get("deadline_s", 10.0),
            read_gpus=False,
        )
        took = time.monotonic() - t
    return render_text(result), probe_to_dict(result), took


async def test_escapes_in_every_server_field_are_made_visible() -> None:
    text, doc, _ = await _probe("escape")
    _no_controls(text)
    server = doc["server"]
    assert isinstance(server, dict)
    assert "\\x1b]0;PWNED" in str(server["model"]) and "\\x1b" in str(server["version"])
    assert "\\x1b[2J" in text  # the error body, shown but inert
    assert "HTTP 500" in text
    for value in (server["model"], server["version"], doc["error"]):
        assert ESC not in str(value)


@pytest.mark.parametrize(
    ("case", "problem", "words"),
    [
        ("banner", "not HTTP", "this port speaks SSH, not HTTP"),
        ("redirect", "redirected", "redirects to http://127.0.0.2:"),
        ("loading", "loading", "HTTP 503"),
        ("unauthorised", "authorisation required", "HTTP 401"),
        ("huge-json", "too large", "answer too large (over 16 MiB, limit 16 MiB)"),
        ("trickle", "no answer", "within the 2 s deadline"),
    ],
)
async def test_probe_names_the_fault_quickly(case: str, problem: str, words: str) -> None:
    text, doc, took = await _probe(case, timeout_s=30.0, deadline_s=2.0)
    assert f"server   {problem}: " in text and words in text
    assert doc["ok"] is False
    assert took < 5.0  # never the 30 s read timeout


async def test_redirect_to_another_origin_is_not_followed() -> None:
    with hostile_server("redirect") as server:
        await probe(parse_endpoint(server.url, env={}), max_tokens=4, read_gpus=False)
        assert [r.path for r in server.requests] == ["/v1/models"]  # nothing re-sent


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("endless", "more than max_tokens plus one speculative step"),
        ("quiet", "not finished within the 2 s deadline"),
        ("huge-event", "answer too large (over 1 MiB, limit 1 MiB)"),
    ],
)
async def test_stream_faults_are_cut_with_one_line(case: str, words: str) -> None:
    _text, doc, took = await _probe(case, deadline_s=2.0)
    stream = doc["stream"]
    assert isinstance(stream, dict)
    assert words in str(stream["error"])
    assert stream["completion_tokens"] <= 16 + 16
    assert took < 5.0


async def test_huge_metrics_is_refused_not_parsed() -> None:
    text, _doc, took = await _probe("huge-metrics")
    assert "answer too large (over 8 MiB, limit 8 MiB)" in text
    assert took < 5.0


# --- bench -------------------------------------------------------------------------------


def _bench(url: str, out: Path, *extra: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    args = parser.parse_args(
        [
            "--url",
            url,
            "-n",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "8",
            "--no-gpu",
            "--out",
            str(out),
            *extra,
        ]
    )
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run_bench(args, argv=["specwatch", "bench"], stdout=stdout, stderr=stderr)
    return status, stdout.getvalue(), stderr.getvalue()


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("escape", "HTTP 500"),
        ("endless", "more than max_tokens"),
        ("quiet", "not finished within the 2 s deadline"),
        ("banner", "this port speaks SSH, not HTTP"),
        ("huge-event", "answer too large"),
    ],
)
def test_bench_reports_the_fault_in_one_clean_line(tmp_path: Path, case: str, words: str) -> None:
    with hostile_server(case) as server:
        status, out, err = _bench(server.url, tmp_path, "--deadline", "2", "--timeout", "30")
    _no_controls(out + err)
    assert status == 1
    assert words in out + err


def test_bench_out_must_be_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    status, _, err = _bench("http://127.0.0.1:9", file)
    assert status == 2 and "--out must name a directory" in err and "is a file" in err


# --- the live session (the TUI's path) ----------------------------------------------------


async def _poll(case: str, until: Callable[[list[SessionEvent]], bool]) -> list[SessionEvent]:
    events: list[SessionEvent] = []
    seen = asyncio.Event()

    def emit(e: SessionEvent) -> None:
        events.append(e)
        if until(events):
            seen.set()

    with hostile_server(case, trickle_s=0.5) as server:
        poller = ServerPoller(
            parse_endpoint(server.url, env={}),
            emit,
            interval_s=0.05,
            timeout_s=30.0,
            deadline_s=1.0,
        )
        task = asyncio.create_task(poller.run())
        try:
            await asyncio.wait_for(seen.wait(), 20)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return events


def _windows(events: list[SessionEvent]) -> list[MetricsWindow]:
    return [e.window for e in events if isinstance(e, MetricsScraped)]


async def test_poller_shows_escapes_inert() -> None:
    events = await _poll("escape", lambda ev: len(_windows(ev)) >= 2)
    ready = [e for e in events if isinstance(e, ServerReady)]
    assert ready and ready[0].info.model is not None
    assert ESC not in ready[0].info.model and "\\x1b" in ready[0].info.model
    assert ready[0].info.version is not None and ESC not in ready[0].info.version


async def test_poller_reports_a_huge_metrics_without_parsing_it() -> None:
    t = time.monotonic()
    events = await _poll("huge-metrics", lambda ev: any("error" in w.notes for w in _windows(ev)))
    assert time.monotonic() - t < 10
    errors = [w.notes["error"] for w in _windows(events) if "error" in w.notes]
    assert "answer too large" in errors[0]


async def test_poller_gives_up_on_a_trickle_within_its_deadline() -> None:
    t = time.monotonic()
    events = await _poll("trickle", lambda ev: any(getattr(e, "detail", "") for e in ev))
    assert time.monotonic() - t < 5
    details = [getattr(e, "detail", "") for e in events]
    assert any("1 s deadline" in d for d in details), details


def test_the_fixture_serves_one_case_from_the_command_line_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.hostile", "escape", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "hostile case escape" in line
        url = line.split(" at ")[1].split()[0]
        model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        assert "\x1b]0;PWNED" in model
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_the_banner_case_speaks_ssh() -> None:
    import socket

    from tests.hostile import HostileServer

    server = HostileServer("banner")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            assert s.recv(64).startswith(b"SSH-2.0-")
    finally:
        server.stop()


def test_the_fixture_reports_a_busy_port() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "tests.hostile", "endless", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=ROOT,
        )
    assert done.returncode == 1
    assert "cannot serve" in done.stderr
