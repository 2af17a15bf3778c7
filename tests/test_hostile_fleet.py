"""Hostile input on the fleet surfaces: keys, credentials, labels, bounded lines (issues 23, 28)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from specwatch.session.fleet_probe import FleetOptions, server_endpoint
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.server_errors import ServerError
from specwatch.ui.fleet_app import FleetChoice
from specwatch.ui.fleet_run import drill_session
from specwatch.ui.settings import AppSettings
from tests.loopback_http import serving

KEY = "sk-secret-key-0123456789"


@contextmanager
def recording_server(
    status: int = 200, body: bytes = b'{"data": []}', password: str | None = None
) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback HTTP server that records each request's headers and answers ``status``."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            code = status
            if password is not None and self.headers.get("Authorization") != _basic(password):
                code = 401
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url.removeprefix("http://"), seen


@pytest.fixture
def env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("SPECWATCH_API_KEY", KEY)


async def test_no_key_goes_to_an_address_prometheus_names(env_key: None) -> None:
    with recording_server() as (address, seen):
        options = FleetOptions(prometheus="http://127.0.0.1:9", api_key=KEY)
        endpoint = server_endpoint(address, options)
        async with ServerClient(endpoint) as client:
            await client.get("/v1/models")
        named = FleetOptions(prometheus="http://127.0.0.1:9", urls=(address,), api_key=KEY)
        async with ServerClient(server_endpoint(f"http://{address}", named)) as client:
            await client.get("/v1/models")
    assert "authorization" not in seen[0]
    assert seen[1]["authorization"] == f"Bearer {KEY}"


async def test_drill_down_sends_no_key_to_a_label_address(env_key: None) -> None:
    choice = FleetChoice("10.9.8.7:8000", "vllm", None, (), ())
    options = FleetOptions(prometheus="http://127.0.0.1:9", api_key=KEY, timeout_s=1.0)
    live = await drill_session(choice, options, _settings())
    assert live.endpoints[0].api_key is None
    named = FleetOptions(prometheus="http://127.0.0.1:9", urls=("http://10.9.8.7:8000",))
    live = await drill_session(choice, named, _settings())
    assert live.endpoints[0].api_key == KEY


async def test_a_keyed_label_address_says_how_to_reach_it(env_key: None) -> None:
    with recording_server(401) as (address, _):
        endpoint = server_endpoint(address, FleetOptions(prometheus="http://127.0.0.1:9"))
        async with ServerClient(endpoint) as client:
            with pytest.raises(ServerError) as info:
                await client.get("/v1/models")
    assert f"run specwatch --url http://{address} --api-key" in str(info.value)
    assert KEY not in str(info.value)


def _settings() -> AppSettings:
    return AppSettings()


def _basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"user:{password}".encode()).decode()


DCGM_BODY = (
    b'DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-a", Hostname="edge-7", modelName="L4"} 1500\n'
    b'DCGM_FI_DEV_GPU_TEMP{gpu="0", UUID="GPU-a", Hostname="edge-7", modelName="L4"} 61\n'
)


def _specwatch(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "specwatch", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_dcgm_credentials_are_sent_as_basic_auth_and_never_shown() -> None:
    with recording_server(body=DCGM_BODY, password="hunter2") as (address, seen):
        good = _specwatch(
            "probe",
            "--json",
            "--timeout",
            "2",
            "--dcgm",
            f"http://user:hunter2@{address}",
            "http://127.0.0.1:9",
        )
        bad = _specwatch(
            "probe",
            "--timeout",
            "2",
            "--dcgm",
            f"http://user:hunter3@{address}/metrics",
            "http://127.0.0.1:9",
        )
    doc = json.loads(good.stdout)
    assert [g["name"] for g in doc["gpus"]] == ["L4"]
    assert seen[0]["authorization"] == _basic("hunter2")
    assert "HTTP 401" in bad.stdout and f"http://user:…@{address}/metrics" in bad.stdout
    for out in (good.stdout, good.stderr, bad.stdout, bad.stderr):
        assert "hunter2" not in out and "hunter3" not in out


def test_dcgm_address_errors_withhold_the_password() -> None:
    from specwatch.core.fleet import parse_node_pair
    from specwatch.sources.dcgm.fetch import exporter_endpoint
    from specwatch.sources.dcgm.parse import dcgm_url
    from specwatch.sources.dcgm.source import DcgmGpuSource

    with pytest.raises(ValueError) as info:
        dcgm_url("ftp://u:hunter2@h:9400")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError) as info:
        parse_node_pair("http://u:hunter2@h:9400")
    assert "hunter2" not in str(info.value)
    endpoint = exporter_endpoint("http://u%40x:p%3Aw@h:9400/metrics")
    assert endpoint.base_url == "http://h:9400" and endpoint.basic_auth == ("u@x", "p:w")
    source = DcgmGpuSource("http://u:hunter2@h:9400")
    assert source.urls == ("http://u:…@h:9400/metrics",)


def _printable(text: str) -> None:
    """No byte of ``text`` can act on a terminal (newlines aside)."""
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]
    assert not bad and "\u202e" not in text, repr(text[:200])


@contextmanager
def hostile_prometheus(case: str) -> Iterator[str]:
    from tests.hostile import hostile_server

    with hostile_server(case) as server:
        yield server.url


def test_hostile_labels_are_sanitised_bounded_and_never_sink_the_fleet() -> None:
    with hostile_prometheus("prom-labels") as url:
        text = _specwatch("probe", "--prometheus", url)
        as_json = _specwatch("probe", "--json", "--prometheus", url)
    assert text.returncode == 0, text.stderr
    for out in (text.stdout, text.stderr, as_json.stdout, as_json.stderr):
        _printable(out)
        assert max(map(len, out.splitlines()), default=0) < 700
    assert "good-node:8000" in text.stdout
    assert "left out 6 unusable series" in text.stdout
    assert "3 with an instance that is not host:port" in text.stdout
    doc = json.loads(as_json.stdout)
    assert [s["instance"] for s in doc["servers"]] == ["good-node:8000"]
    hostile = [g for g in doc["gpus"] if g["node"] != "good-node"]
    assert hostile and all(len(g["node"]) <= 256 and len(g["name"]) <= 256 for g in hostile)
    assert hostile[0]["node"].startswith("\\x1b]0;PWNED\\x07")


def test_an_exporter_s_hostname_and_model_are_sanitised() -> None:
    from specwatch.sources.dcgm.parse import parse_dcgm

    evil = "\x1b]0;PWNED\x07\u202e" + "A" * 5000
    body = f'DCGM_FI_DEV_SM_CLOCK{{gpu="0",UUID="GPU-a",Hostname="{evil}",modelName="{evil}"}} 1\n'
    (gpu,) = parse_dcgm(body).gpus
    for value in (gpu.hostname or "", gpu.model or ""):
        _printable(value)
        assert len(value) <= 256 and value.startswith("\\x1b]0;")


def test_a_recording_s_strings_come_back_sanitised() -> None:
    from specwatch.core.server import Dialect, ServerInfo
    from specwatch.record.codec import decode, encode
    from specwatch.session.events import ServerReady

    hostile = "0.11\x1b]0;PWNED\x07\x1b[2J\u202e" + "9" * 10_000
    event = ServerReady(1.0, ServerInfo("http://h:8000", Dialect.VLLM, version=hostile))
    back = decode(*encode(event))
    assert isinstance(back, ServerReady)
    version = back.info.version or ""
    _printable(version)
    assert version.startswith("0.11\\x1b]0;PWNED") and len(version) <= 4000
    plain = ServerReady(1.0, ServerInfo("http://h:8000", Dialect.VLLM, version="0.11.0"))
    assert decode(*encode(plain)) == plain


def test_long_outside_text_says_how_much_was_left_out() -> None:
    from specwatch.core.sanitize import sanitize_line, sanitize_text

    out = sanitize_line("x" * 1000, 400)
    assert len(out) <= 400 and out == "x" * 377 + "…(623 more characters)"
    out = sanitize_text("\x1b" * 1000, 300)
    assert len(out) <= 300 and out.endswith("more characters)")
    assert sanitize_line("x" * 300, 24) == "x" * 23 + "…"  # a table cell: a bare ellipsis


def test_every_command_error_line_is_bounded() -> None:
    usage = _specwatch("probe", "--prometheus", "http://127.0.0.1:9", "--server-match", "A" * 9000)
    assert usage.returncode == 2
    (line,) = usage.stderr.splitlines()
    assert line.startswith("specwatch probe: expected a label matcher")
    assert len(line) < 450 and line.endswith("more characters)")
    with hostile_prometheus("prom-error") as url:
        fleet = _specwatch("probe", "--prometheus", url)
    errors = [ln for ln in fleet.stdout.splitlines() if ln.startswith("  error:")]
    assert errors and all(len(ln) < 450 and ln.endswith("more characters)") for ln in errors)
    _printable(fleet.stdout)


@pytest.mark.parametrize("case", ["prom-values", "prom-type", "prom-error", "prom-gzip"])
def test_a_hostile_prometheus_gives_lines_not_tracebacks(case: str) -> None:
    with hostile_prometheus(case) as url:
        result = _specwatch("probe", "--json", "--prometheus", url)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    _printable(result.stdout)
    for server in doc["servers"]:
        assert server["gen_tok_s"] is None or server["gen_tok_s"] < 1e18
    assert doc["errors"] or case == "prom-values"
    assert all(len(e) <= 400 for e in doc["errors"])
