"""Hostile input on the fleet surfaces: keys, credentials, labels, bounded lines (issues 23, 28)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specwatch.session.fleet_probe import FleetOptions, server_endpoint
from specwatch.sources.http.client import ServerClient, ServerError
from specwatch.ui.app import AppSettings
from specwatch.ui.fleet_app import FleetChoice
from specwatch.ui.fleet_run import drill_session

KEY = "sk-secret-key-0123456789"


@contextmanager
def recording_server(status: int = 200) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback HTTP server that records each request's headers and answers ``status``."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = b'{"data": []}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


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
