#!/usr/bin/env python3
"""Chunks per second the benchmark client reads, beside a bare httpx + orjson loop.

    .venv/bin/python tests/tools/chunk_rate.py [--quick]

The simulated vLLM (``specwatch sim --dialect vllm``) streams three tokens once; those chunks
are the template a replay server (its own process) sends again, renumbered, at 20 000 chunks
per second: the simulator's own engine cannot step that fast. Each client reads the whole
stream; its rate is chunks over wall seconds (a client that cannot keep up slows the sender
through TCP). Best of three each. Target: specwatch's client >= 0.9x the bare loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OFFERED_PER_S = 20_000
TARGET_RATIO = 0.9
MODEL = "sim/Llama-3.1-8B-Instruct"


def record_template() -> list[dict[str, Any]]:
    """The chunks of a three-token stream from the simulated vLLM."""
    import httpx

    from tests.tools.overhead import start_sim

    sim, url = start_sim("vllm")
    try:
        body = {
            "model": MODEL,
            "prompt": "hi",
            "max_tokens": 3,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        chunks = []
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line[6:]))
        return chunks
    finally:
        sim.terminate()
        sim.wait(10)


def serve(template: Path, chunks: int, rate: float) -> None:
    """The replay server (child process): prints its URL, then serves until killed."""
    from aiohttp import web

    first, *_, last_token, usage_only = json.loads(template.read_text())
    del last_token
    lines = []
    for i in range(1, chunks + 1):
        chunk = dict(first)
        choice = dict(first["choices"][0])
        choice["finish_reason"] = "length" if i == chunks else None
        chunk["choices"] = [choice]
        chunk["usage"] = {"prompt_tokens": 1, "total_tokens": 1 + i, "completion_tokens": i}
        lines.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    tail = usage_only | {"usage": {"prompt_tokens": 1, "total_tokens": 1 + chunks}}
    tail["usage"]["completion_tokens"] = chunks
    lines.append(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        t0 = time.perf_counter()
        sent = 0
        while sent < len(lines):
            due = min(len(lines), int((time.perf_counter() - t0) * rate) + 1)
            if due > sent:
                await resp.write(b"".join(lines[sent:due]))
                sent = due
            else:
                await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)

    async def main() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"http://127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


async def bare_loop(url: str) -> int:
    """The reference: httpx streaming lines, orjson per chunk."""
    import httpx
    import orjson

    body = {"model": MODEL, "prompt": "hi", "max_tokens": 1, "stream": True}
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


async def specwatch_client(url: str, chunks: int) -> int:
    """The benchmark's client: ``stream_completion`` as a vLLM benchmark run uses it."""
    from specwatch.core.server import Dialect, ServerInfo, SpecConfig
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import parse_endpoint
    from specwatch.sources.watch.stream import stream_completion

    info = ServerInfo(
        base_url=url,
        dialect=Dialect.VLLM,
        version="0.33.0",
        model=MODEL,
        spec=SpecConfig(enabled=False),
    )
    async with ServerClient(parse_endpoint(url), timeout_s=30) as client:
        result = await stream_completion(client, info, "hi", chunks)
    if result.error:
        raise RuntimeError(result.error)
    return result.completion_tokens


def measure(quick: bool = False) -> dict[str, Any]:
    """Best chunk rate of each client over a stream of 20 000 chunks/s."""
    import tempfile

    chunks = OFFERED_PER_S * (1 if quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.json"
        template.write_text(json.dumps(record_template()))
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(template), "--chunks", str(chunks)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            rates: dict[str, float] = {"bare": 0.0, "ours": 0.0}
            for _ in range(2 if quick else 3):
                for name in ("bare", "ours"):
                    t0 = time.perf_counter()
                    got = asyncio.run(
                        bare_loop(url) if name == "bare" else specwatch_client(url, chunks)
                    )
                    wall = time.perf_counter() - t0
                    if got < chunks:
                        raise RuntimeError(f"{name}: {got} of {chunks} chunks")
                    rates[name] = max(rates[name], chunks / wall)
        finally:
            server.terminate()
            server.wait(10)
    return {
        "offered_per_s": OFFERED_PER_S,
        "chunks": chunks,
        "bare_per_s": rates["bare"],
        "ours_per_s": rates["ours"],
    }


def main() -> int:
    """Measure and print; exit 1 on a miss."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="one second of stream, two tries")
    p.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--chunks", type=int, default=OFFERED_PER_S, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.chunks, OFFERED_PER_S)
        return 0
    r = measure(args.quick)
    ratio = r["ours_per_s"] / r["bare_per_s"]
    ok = ratio >= TARGET_RATIO
    print(
        f"chunk rate at {r['offered_per_s']:,}/s offered ({r['chunks']:,} chunks): specwatch "
        f"{r['ours_per_s']:,.0f}/s, bare httpx+orjson {r['bare_per_s']:,.0f}/s, "
        f"{ratio:.2f}x (target >= {TARGET_RATIO}x): {'PASS' if ok else 'MISS'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
