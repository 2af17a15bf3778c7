"""A hostile server, for tests over real sockets; ``python -m tests.hostile CASE`` from a checkout
serves one case until Ctrl-C, to try any client against it.

Raw asyncio, no framework: each case is one way a server (or something that is not one) can
hurt a client. Apart from its fault, a case answers like a small vLLM, so detection gets as far
as the fault.

Cases:
    escape:       terminal escapes in the model id, the version, response headers, an error
                  body and its reason
    endless:      a stream that never ends and ignores ``max_tokens``
    quiet:        a stream that sends only keep-alive comments, never a token
    trickle:      every answer dripped one byte per ``trickle_s``
    dcgm-trickle: a dcgm-exporter whose ``/metrics`` headers are dripped one byte per
                  ``trickle_s`` (a per-read timeout never trips; only a deadline ends it)
    huge-metrics: a 50 MB ``/metrics``
    huge-event:   one 300 MB SSE event
    huge-json:    a 500 MB ``/v1/models`` (no Content-Length)
    banner:       an SSH server's greeting, then silence
    redirect:     every path redirects to another origin
    loading:      HTTP 503 everywhere
    unauthorised: HTTP 401 everywhere
    garbage:      HTTP 200 with random bytes on every path
    prom-*:       a hostile Prometheus HTTP API (:mod:`tests.hostile_prometheus`)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from tests.hostile_prometheus import PROMETHEUS_CASES, prometheus_answer

HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\u202eevil\x9b1m"
"""An OSC title change, a screen wipe, a colour, a bidi override and a C1 CSI."""
CASES = (
    "escape",
    "endless",
    "quiet",
    "trickle",
    "dcgm-trickle",
    "huge-metrics",
    "huge-event",
    "huge-json",
    "banner",
    "redirect",
    "loading",
    "unauthorised",
    "garbage",
    *PROMETHEUS_CASES,
)
MB = 1_000_000
_DCGM = (
    "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
    'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-0",modelName="NVIDIA H100",Hostname="node"} 1980\n'
)
_METRICS = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="m"} 0\n'
    "# TYPE vllm:generation_tokens_total counter\n"
    'vllm:generation_tokens_total{model_name="m"} 0\n'
)


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request."""

    method: str
    path: str
    body: bytes


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _answer(status: str, body: bytes, ctype: str = "application/json") -> bytes:
    return _head(status, {"Content-Type": ctype, "Content-Length": str(len(body))}) + body


def _json(obj: object, status: str = "200 OK") -> bytes:
    return _answer(status, json.dumps(obj).encode())


class HostileServer:
    """Serves one case (on loopback by default) in a thread of its own; ``url`` once started.

    ``case`` may be changed while it serves (a server that turns hostile after detection).

    Args:
        case: One of :data:`CASES`.
        trickle_s: Seconds between two bytes in the ``trickle`` and ``dcgm-trickle`` cases.
        port: Port to bind (0: any free one).
        host: Address to bind.
    """

    def __init__(
        self, case: str, trickle_s: float = 1.0, port: int = 0, host: str = "127.0.0.1"
    ) -> None:
        if case not in CASES:
            raise ValueError(f"unknown case {case!r}; one of {', '.join(CASES)}")
        self.case = case
        self.trickle_s = trickle_s
        self.port = port
        self.host = host
        self.url = ""
        self.requests: list[Request] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: OSError | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        """Start serving; returns the base URL. Raises ``OSError`` when it cannot bind."""
        self._thread = threading.Thread(target=self._run, name=f"hostile-{self.case}", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self.url

    def stop(self) -> None:
        """Stop serving and close every connection."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._connection, self.host, self.port)
            )
        except OSError as exc:
            self._error = exc
            loop.close()
            self._ready.set()
            return
        self._loop = loop
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    # --- protocol --------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.case == "banner":
                writer.write(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")
                await writer.drain()
                await asyncio.sleep(3600)
                return
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests.append(request)
                await self._serve(request, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _serve(self, request: Request, writer: asyncio.StreamWriter) -> None:
        case = self.case
        if case == "trickle":
            for byte in self._normal(request):
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(self.trickle_s)
            return
        if case == "dcgm-trickle":
            answer = _answer("200 OK", _DCGM.encode(), "text/plain; version=0.0.4")
            head, _, body = answer.partition(b"\r\n\r\n")
            for byte in head + b"\r\n\r\n":
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(self.trickle_s)
            writer.write(body)
        elif case in PROMETHEUS_CASES:
            writer.write(_prometheus(case, request))
        elif case == "loading":
            writer.write(_json({"error": "model loading"}, "503 Service Unavailable"))
        elif case == "unauthorised":
            writer.write(_json({"error": "bad key"}, "401 Unauthorized"))
        elif case == "garbage":
            noise = random.Random(len(self.requests)).randbytes(4096)
            writer.write(_answer("200 OK", noise, "text/plain; version=0.0.4"))
        elif case == "redirect":
            other = "127.0.0.2" if self.host != "127.0.0.2" else "127.0.0.1"
            target = f"http://{other}:{self.port}{request.path}"
            writer.write(
                _head("307 Temporary Redirect", {"Location": target, "Content-Length": "0"})
            )
        elif case == "huge-json" and request.path == "/v1/models":
            await _chunked(writer, "200 OK", "application/json", _huge_json())
        elif case == "huge-metrics" and request.path == "/metrics":
            await _chunked(writer, "200 OK", "text/plain", _huge_metrics())
        elif request.path in ("/v1/completions", "/v1/chat/completions"):
            await self._stream(request, writer)
        else:
            writer.write(self._normal(request))
        await writer.drain()

    def _normal(self, request: Request) -> bytes:
        model = f"model-{HOSTILE}" if self.case == "escape" else "tiny"
        version = f"0.11.0{HOSTILE}" if self.case == "escape" else "0.11.0"
        if request.path == "/v1/models":
            return _json({"object": "list", "data": [{"id": model, "owned_by": "vllm"}]})
        if request.path == "/version":
            return _json({"version": version})
        if request.path == "/metrics":
            return _answer("200 OK", _METRICS.encode(), "text/plain; version=0.0.4")
        return _json({"error": "not found"}, "404 Not Found")

    async def _stream(self, request: Request, writer: asyncio.StreamWriter) -> None:
        case = self.case
        if case == "escape":
            body = f"boom {HOSTILE}".encode()  # raw escapes, not JSON-escaped
            head = _head(
                "500 Internal \x9b2J Error",
                {
                    "Content-Type": "application/json",
                    "Content-Length": str(len(body)),
                    "X-Detail": HOSTILE.encode("latin-1", "replace").decode("latin-1"),
                },
            )
            writer.write(head + body)
            return
        writer.write(
            _head("200 OK", {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})
        )
        if case == "huge-event":
            await _write_chunk(writer, b'data: {"choices": [{"text": "')
            for _ in range(300):
                await _write_chunk(writer, b"x" * MB)
            return
        if case == "quiet":
            while True:
                await _write_chunk(writer, b": ping\n\n")
                await asyncio.sleep(0.05)
        max_tokens = int(json.loads(request.body or b"{}").get("max_tokens", 16))
        n = 0
        while case == "endless" or n < max_tokens:
            n += 1
            event = {
                "choices": [{"index": 0, "text": "tok", "finish_reason": None}],
                "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5},
            }
            await _write_chunk(writer, b"data: " + json.dumps(event).encode() + b"\n\n")
            await asyncio.sleep(0.001)
        final = {
            "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5},
        }
        await _write_chunk(writer, b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
        await _write_chunk(writer, b"")


def _prometheus(case: str, request: Request) -> bytes:
    parts = urlsplit(request.path)
    form = dict(parse_qsl(parts.query))
    form.update(parse_qsl(request.body.decode("latin-1")))
    status, headers, body = prometheus_answer(case, parts.path, form)
    phrase = {200: "OK", 400: "Bad Request"}.get(status, "Error")
    head = {"Content-Type": "application/json", **headers, "Content-Length": str(len(body))}
    return _head(f"{status} {phrase}", head) + body


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    length = 0
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return Request(method, path, body)


async def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _chunked(
    writer: asyncio.StreamWriter, status: str, ctype: str, parts: AsyncIterator[bytes]
) -> None:
    writer.write(_head(status, {"Content-Type": ctype, "Transfer-Encoding": "chunked"}))
    async for part in parts:
        await _write_chunk(writer, part)
    await _write_chunk(writer, b"")


async def _huge_metrics() -> AsyncIterator[bytes]:
    block = "".join(
        f'vllm:generation_tokens_total{{model_name="m",replica="{i}"}} {i}\n' for i in range(20_000)
    ).encode()
    sent = 0
    yield _METRICS.encode()
    while sent < 50 * MB:
        yield block
        sent += len(block)


async def _huge_json() -> AsyncIterator[bytes]:
    yield b'{"object": "list", "data": ['
    entry = b'{"id": "' + b"m" * 1000 + b'", "owned_by": "vllm"},'
    block = entry * 1000
    for _ in range(500):
        yield block
    yield b'{"id": "last"}]}'


@contextlib.contextmanager
def hostile_server(case: str, trickle_s: float = 1.0) -> Iterator[HostileServer]:
    """Serve ``case`` for the duration of the ``with`` block."""
    server = HostileServer(case, trickle_s)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.hostile CASE [--port N] [--host H] [--trickle S]``: serve one case."""
    import argparse

    from specwatch.commands.sim import serve_until_stopped

    p = argparse.ArgumentParser(prog="python -m tests.hostile", description=main.__doc__)
    p.add_argument("case", choices=CASES)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    p.add_argument(
        "--trickle", type=float, default=1.0, metavar="S", help="trickle cases: seconds a byte"
    )
    args = p.parse_args(argv)
    server = HostileServer(args.case, trickle_s=args.trickle, port=args.port, host=args.host)
    try:
        url = server.start()
    except OSError as exc:
        print(f"tests.hostile: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"hostile case {args.case} at {url}  (Ctrl-C to stop)", flush=True)
    try:
        serve_until_stopped()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
