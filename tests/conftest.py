"""Shared fixtures.

``fake_server``: an in-process HTTP server for the server-client tests, built on
``httpx.MockTransport`` (no sockets): routes map ``"GET /path"`` to a response or to a
callable returning one; every request is recorded.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from specwatch.core.server import ChunkArrival, Dialect, ServerInfo, StreamResult
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint
from specwatch.sources.stream import stream_completion

Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class FakeServer:
    """Routes ``"GET /path"`` -> an ``httpx.Response``, a callable, or a JSON-able value."""

    routes: dict[str, Any] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        key = f"{request.method} {request.url.path}"
        route = self.routes.get(key)
        if route is None:
            return httpx.Response(404, text="Not Found")
        if callable(route):
            result = route(request)
            return result if isinstance(result, httpx.Response) else json_response(result)
        if isinstance(route, httpx.Response):
            return route
        return json_response(route)

    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]

    def client(self, url: str = "http://127.0.0.1:8000", **kw: Any) -> ServerClient:
        return ServerClient(
            Endpoint(url, kw.pop("api_key", None)), transport=httpx.MockTransport(self.handle), **kw
        )


def json_response(
    value: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(
        status,
        content=orjson.dumps(value),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def text_response(
    text: str, status: int = 200, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(status, text=text, headers=dict(headers or {}))


@pytest.fixture
def fake_server() -> FakeServer:
    return FakeServer()


# --- the simulator, driven by a manual clock ----------------------------------------------------


@dataclass
class Sim:
    """A simulated server on loopback whose time moves only when a test moves it."""

    world: Any
    server: Any
    clock: Any
    url: str

    def client(self, timeout_s: float = 5.0, api_key: str | None = None) -> ServerClient:
        return ServerClient(Endpoint(self.url, api_key), timeout_s=timeout_s)

    def advance(self, dt: float) -> float:
        """Move the clock (and the engine) forward; returns the new time."""
        t = float(self.clock.now()) + dt
        self.clock.set(t)
        self.world.advance_to(t)
        return t


@contextmanager
def running_sim(dialect: str, version: str | None = None, **overrides: Any) -> Iterator[Sim]:
    """Start a simulated server with a :class:`ManualClock` at t=1000."""
    from specwatch.sim.presets import preset
    from specwatch.sim.server import SimServer
    from specwatch.sim.world import SimWorld
    from tests.sim_fixtures import ManualClock

    clock = ManualClock(1000.0)
    world = SimWorld(preset(dialect, version, **overrides), clock=clock)
    server = SimServer(world)
    url = server.start()
    try:
        yield Sim(world, server, clock, url)
    finally:
        server.stop()


def _last_seq(sim: Sim) -> int:
    with sim.world.locked():
        engine = sim.world.engine
        return max((r.seq for r in [*engine.waiting, *engine.running]), default=-1)


async def _new_request(sim: Sim, after_seq: int, task: asyncio.Task[Any]) -> Any:
    """The engine request an HTTP call just submitted (polled: the sim takes it on its thread).

    Requests already in the engine before the call (seq <= ``after_seq``), such as a dropped
    stream the server still runs, are not it.
    """
    for _ in range(4000):
        with sim.world.locked():
            engine = sim.world.engine
            for req in [*engine.waiting, *engine.running]:
                if not req.background and not req.probe and req.seq > after_seq:
                    return req
        if task.done():
            return None
        await asyncio.sleep(0.001)
    raise AssertionError("the simulated server never received the request")


async def drive_stream(
    sim: Sim,
    client: ServerClient,
    info: ServerInfo,
    max_tokens: int,
    **kw: Any,
) -> StreamResult:
    """Stream once, moving the manual clock step by step.

    The clock moves to the next engine event only once the client has received every token the
    request has so far, so each chunk is stamped with the exact simulated time it was sent.
    """
    got = 0
    chunks = 0
    arrived = asyncio.Event()
    per_token = info.dialect is Dialect.LLAMACPP

    def on_chunk(chunk: ChunkArrival) -> None:
        nonlocal got, chunks
        got = chunk.tokens
        chunks += 1
        arrived.set()

    def behind(req: Any) -> bool:
        # llama.cpp: one event per token; the others: one chunk per step event
        return got < req.generated if per_token else chunks < len(req.events)

    after_seq = _last_seq(sim)
    task = asyncio.create_task(
        stream_completion(
            client, info, "the prompt", max_tokens, clock=sim.clock.now, on_chunk=on_chunk, **kw
        )
    )
    req = await _new_request(sim, after_seq, task)
    while req is not None and not task.done() and not req.done:
        with sim.world.locked():
            t_next = sim.world.engine.next_time()
        if t_next is None:
            break
        sim.clock.set(t_next)
        sim.world.advance_to(t_next)
        while behind(req) and not task.done():
            arrived.clear()
            waiter = asyncio.ensure_future(arrived.wait())
            done, _ = await asyncio.wait(
                {task, waiter}, timeout=10, return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            if not done:
                raise AssertionError("the client never received the simulated tokens")
    return await asyncio.wait_for(task, 10)


@pytest.fixture(autouse=True)
def _no_user_settings(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads the user's config file, theme state or ``$SPECWATCH_URL``, or writes them."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.delenv("SPECWATCH_URL", raising=False)


@pytest.fixture
def no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy named by the environment: a ``ServerClient`` then sends on its transport."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def _start_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if item.get_closest_marker("xdist_group") else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` first, then those of an ``xdist_group`` (long runs of one
    worker), then the rest, the order otherwise kept: with ``--no-loadscope-reorder`` xdist hands
    them out in this order, so no long test or group arrives last while the others wait."""
    items.sort(key=_start_rank)


WORKERS = 4
"""pytest-xdist workers for a run of the suite or a folder (``-n auto`` in ``pyproject.toml``)."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``WORKERS``, or none (one process) when the run names only test files or tests: four
    workers cost a few seconds to start, more than a targeted run takes."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    named = [Path(arg.split("::", 1)[0]) for arg in config.args]
    return 0 if named and all(path.is_file() for path in named) else WORKERS
