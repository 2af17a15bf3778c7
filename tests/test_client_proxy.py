"""A proxy named by the environment is used as httpx uses it; without one, the transport sends."""

from __future__ import annotations

import pytest

from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from tests.loopback_http import QuietHandler, serving


class _Proxy(QuietHandler):
    """Answers every request with the target it was asked for (a forward proxy's view)."""

    def do_GET(self) -> None:
        body = f"via proxy: {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def test_an_environment_proxy_still_routes_the_requests(
    monkeypatch: pytest.MonkeyPatch, no_env_proxy: None
) -> None:
    with serving(_Proxy) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        # not resolvable here: only a proxy can answer for it
        async with ServerClient(parse_endpoint("http://inference.invalid:8000")) as client:
            assert client.transport is None
            response = await client.get("/metrics")
    assert response.text == "via proxy: http://inference.invalid:8000/metrics"


async def test_without_a_proxy_requests_go_to_the_transport(no_env_proxy: None) -> None:
    with serving(_Proxy) as url:
        async with ServerClient(parse_endpoint(url)) as client:
            assert client.transport is not None
            response = await client.get("/metrics")
    assert response.text == "via proxy: /metrics"  # asked directly: the path alone
