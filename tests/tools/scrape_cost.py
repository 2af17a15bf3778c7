#!/usr/bin/env python3
"""CPU milliseconds per live ``/metrics`` scrape, against the simulator over loopback.

    .venv/bin/python tests/tools/scrape_cost.py [-n 200] [--dialect sglang vllm] [--root DIR]
    [--profile]

For each dialect a ``specwatch sim --background 3`` process serves ``/metrics`` (SGLang: about
19 KB) and this process measures, as process CPU per request (best of three rounds of ``-n``):

- ``ServerClient.get``: a GET with its ``httpx.Response``;
- ``ServerClient.get_text``: checkouts that still have it (the lean GET path, removed since);
- ``ServerClient.get (httpx)``: the same client with a transport given (in checkouts with the
  lean path, the way every GET went before it);
- ``MetricsWatcher.scrape``: GET + filtered parse + dialect derivation + window;
- ``bare httpx``: ``httpx.AsyncClient.get``, no specwatch code;
- ``raw asyncio``: a hand-written keep-alive GET over asyncio streams, the floor.

``--root /work/main`` measures another checkout (a "before" figure). ``--profile`` prints the
top cProfile entries of the scrape loop.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import pstats
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _ms(fn: Callable[[], Awaitable[Any]], n: int) -> Callable[[], Awaitable[float]]:
    async def run() -> float:
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            for _ in range(n):
                await fn()
            best = min(best, (time.process_time() - t) / n * 1e3)
        return best

    return run


async def _raw_getter(url: str) -> tuple[Callable[[], Awaitable[bytes]], Callable[[], None]]:
    host, port = url.split("//")[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))

    async def get() -> bytes:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        return await reader.readexactly(length)

    return get, writer.close


async def _measure(url: str, n: int, profile: bool) -> dict[str, float]:
    import httpx

    from specwatch.sources.detect import detect
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import parse_endpoint
    from specwatch.sources.watch.watcher import MetricsWatcher

    out: dict[str, float] = {}
    async with ServerClient(parse_endpoint(url)) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        for _ in range(5):
            await watcher.scrape()
        body = (await client.get("/metrics", check=False)).content
        out["bytes"] = float(len(body))
        out["ServerClient.get"] = await _ms(lambda: client.get("/metrics", check=False), n)()
        if hasattr(client, "get_text"):  # what the scrape itself calls, where it exists
            out["ServerClient.get_text"] = await _ms(lambda: client.get_text("/metrics"), n)()
        out["MetricsWatcher.scrape"] = await _ms(watcher.scrape, n)()
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                await watcher.scrape()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)
    forced: dict[str, Any] = {"transport": httpx.AsyncHTTPTransport()}
    if "transport" in inspect.signature(ServerClient).parameters:
        async with ServerClient(parse_endpoint(url), **forced) as slow:
            await slow.get("/metrics", check=False)
            out["ServerClient.get (httpx)"] = await _ms(
                lambda: slow.get("/metrics", check=False), n
            )()
    async with httpx.AsyncClient() as bare:
        await bare.get(url + "/metrics")
        out["bare httpx"] = await _ms(lambda: bare.get(url + "/metrics"), n)()
    get, close = await _raw_getter(url)
    try:
        await get()
        out["raw asyncio"] = await _ms(get, n)()
    finally:
        close()
    return out


def main() -> None:
    """Measure each dialect and print ms CPU per scrape with ratios to the raw floor."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=200, help="requests per round (default 200)")
    parser.add_argument("--dialect", nargs="+", default=["sglang", "vllm"])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--profile", action="store_true", help="cProfile the scrape loop")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(args.root.resolve()))
    from tests.tools import overhead

    print(f"checkout: {args.root.resolve()}")
    for dialect in args.dialect:
        sim, url = overhead.start_sim(dialect)
        try:
            figures = asyncio.run(_measure(url, args.n, args.profile))
        finally:
            sim.terminate()
            sim.wait()
        floor = figures["raw asyncio"]
        print(f"\n{dialect}: /metrics {figures.pop('bytes') / 1024:.1f} KiB, ms CPU per scrape")
        for name, value in figures.items():
            print(f"  {name:<26} {value:7.3f} ms   {value / floor:5.1f}x raw")


if __name__ == "__main__":
    main()
