"""Compressed bombs: an answer that inflates past its limit is stopped while inflating.

Each ``specwatch`` runs in a child of a small wrapper that reports the child's peak RSS
(``ru_maxrss`` of its waited children), so no other test's child is counted.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.child_peak import PEAK_LIMIT_MIB, run_specwatch
from tests.hostile_prometheus import gzip_bomb
from tests.loopback_http import QuietHandler, serving
from tests.record_world import record_story, story


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hangs up mid-bomb: that is the point


@contextmanager
def bomb_server() -> Iterator[str]:
    """A vLLM-looking server whose every other answer (``/metrics``, completions, a
    Prometheus query, a dcgm-exporter scrape) is 1 GB of gzip-compressed zeros."""
    bomb = gzip_bomb()

    class Handler(QuietHandler):
        def _send(self, body: bytes, gzip: bool = False) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if gzip:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                models = {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}
                self._send(json.dumps(models).encode())
            elif self.path == "/version":
                self._send(b'{"version": "0.11.0"}')
            else:
                self._send(bomb, gzip=True)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._send(bomb, gzip=True)

    with serving(Handler, _QuietServer) as url:
        yield url


def _peak(*argv: str) -> tuple[str, float]:
    run = run_specwatch(*argv)
    return run.text, run.peak_mib


@pytest.mark.parametrize(
    ("what", "argv"),
    [
        ("server", ("probe", "--max-tokens", "4", "--timeout", "20", "URL")),
        ("dcgm", ("probe", "--timeout", "2", "--dcgm", "URL/metrics", "http://127.0.0.1:9")),
        ("prometheus", ("probe", "--prometheus", "URL")),
    ],
)
def test_a_gzip_bomb_is_stopped_while_inflating(what: str, argv: tuple[str, ...]) -> None:
    with bomb_server() as url:
        text, peak_mib = _peak(*(a.replace("URL", url) for a in argv))
    assert "larger than" in text or "too large" in text, text
    print(f"{what}: peak {peak_mib:.0f} MiB")
    assert peak_mib < PEAK_LIMIT_MIB, f"{what}: peak {peak_mib:.0f} MiB\n{text}"


def _zlib_bomb(size: int = 1 << 30) -> bytes:
    """``size`` zero bytes zlib-compressed (the gzip bomb's deflate blocks, zlib-wrapped)."""
    gz = gzip_bomb(size)
    header = zlib.compressobj(9).compress(b"") or b"\x78\xda"
    return header + gz[10:-8] + zlib.adler32(b"").to_bytes(4, "big")


def test_a_zlib_bomb_in_a_recording_is_not_inflated(tmp_path: Path) -> None:
    path = tmp_path / "bomb.sqlite"
    record_story(path, iter(list(story(5))))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET data=?, z=1 WHERE id=3", (_zlib_bomb(),))
    text, peak_mib = _peak("export", "--csv", str(path))
    print(f"export: peak {peak_mib:.0f} MiB")
    assert "1 unreadable events skipped" in text, text
    assert peak_mib < PEAK_LIMIT_MIB, f"export: peak {peak_mib:.0f} MiB\n{text[-2000:]}"


async def test_gzip_and_deflate_bodies_still_decode() -> None:
    import httpx

    from specwatch.sources.http.client import read_limited

    plain = b'{"ok": true}' * 10_000
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    bodies = {
        "gzip": gzip.compress(plain),
        "deflate": zlib.compress(plain),
        "raw deflate": raw.compress(plain) + raw.flush(),
    }
    for name, body in bodies.items():
        encoding = "deflate" if "deflate" in name else name
        headers = {"Content-Encoding": encoding}
        transport = httpx.MockTransport(
            lambda _r, b=body, h=headers: httpx.Response(200, headers=h, content=b)
        )
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("GET", "http://x/") as response,
        ):
            assert await read_limited(response, 1 << 20) == plain, name
