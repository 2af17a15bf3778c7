"""The simulated inference server over real HTTP: an aiohttp app in its own thread and loop.

It speaks the dialect of ``world.config`` (SGLang, vLLM, llama.cpp ``llama-server`` or a
generic OpenAI-compatible server) for everything a monitor reads: identity, version and config
endpoints, ``/metrics`` with each version's names and update timing, streaming with several
tokens per chunk (SGLang, vLLM) or one token per event in bursts (llama.cpp), and final
usage / ``meta_info`` / ``timings``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable

from aiohttp import web

from specwatch.sim.engine import SimRequest, TokenEvent
from specwatch.sim.loop_thread import LoopThread
from specwatch.sim.presets import sim_dialect
from specwatch.sim.servers.base import RenderGroup
from specwatch.sim.world import SimWorld

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_REALTIME_TICK_S = 0.2


class SimServer(LoopThread):
    """Serves a :class:`SimWorld` over HTTP on ``host:port`` (port 0 picks a free one).

    For SGLang, vLLM and the generic dialect the port refuses connections until the model has
    loaded (``load_time_s``) and again during a restart's reload; llama.cpp listens at once and
    answers 503 ``Loading model`` meanwhile.
    """

    def __init__(self, world: SimWorld, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__()
        self.world = world
        self.config = world.config
        self.host = host
        self.port = port
        self.url = ""
        self.dialect = sim_dialect(self.config.dialect)(self)
        """The imitated server's handlers and rules."""
        self._runner: web.AppRunner | None = None
        self._site: web.SockSite | None = None
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[object]] = set()
        self._listen_task: asyncio.Task[None] | None = None
        self._listening = threading.Event()
        self._restart_lock: asyncio.Lock | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> str:
        """Start serving; returns the base URL once the port is bound.

        Without a load time the port is listening when this returns; with one, it is bound
        (connections refused, or 503 for llama.cpp) until the model has loaded.
        """
        if self._thread is not None:
            return self.url
        self._start_thread()
        self.world.add_restart_listener(self._on_world_restart)
        return self.url

    def wait_listening(self, timeout: float | None = None) -> bool:
        """Block until the port accepts connections (after loading); returns success."""
        return self._listening.wait(timeout)

    def stop(self) -> None:
        """Stop serving and join the thread (held and streaming requests are cut)."""
        super().stop()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application(middlewares=[self._middleware])
        self.dialect.mount(app)
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        self._sock = self._bind()
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{_url_host(self.host)}:{self.port}"
        if self.dialect.listens_while_loading or self.world.loaded():
            await self._listen()
        else:
            self._listen_task = asyncio.create_task(self._listen_when_loaded())
        ticker = None
        if self.world.clock.free_running:
            ticker = asyncio.create_task(self._tick())
        self._serving()
        await self._stopping.wait()
        if ticker is not None:
            ticker.cancel()
        if self._listen_task is not None:
            self._listen_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        # Handlers waiting on a manual clock or a hang would otherwise hold up the shutdown.
        handlers = list(self._handlers)
        for handler in handlers:
            handler.cancel()
        if handlers:
            await asyncio.wait(handlers, timeout=2.0)
        self._drop_connections()
        await self._runner.cleanup()
        if self._sock is not None:
            self._sock.close()

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.setblocking(False)
        return sock

    async def _listen(self) -> None:
        assert self._runner is not None and self._sock is not None
        self._site = web.SockSite(self._runner, self._sock)
        await self._site.start()
        self._listening.set()

    async def _listen_when_loaded(self) -> None:
        await self.world.clock.sleep_until(self.world.loaded_at)
        await self._listen()

    async def _tick(self) -> None:
        # With a real clock nothing else moves the engine while nobody asks: keep background
        # traffic and GPU load current for passive watchers and GPU samplers.
        while True:
            self.world.advance_to(self.world.now())
            await asyncio.sleep(_REALTIME_TICK_S)

    def _on_world_restart(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._spawn, self._restart())

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _restart(self) -> None:
        if self._restart_lock is None:
            self._restart_lock = asyncio.Lock()
        async with self._restart_lock:
            await self._restart_locked()

    async def _restart_locked(self) -> None:
        if self.dialect.listens_while_loading:
            self._drop_connections()
            return
        self._listening.clear()
        if self._site is not None:
            await self._site.stop()
            self._site = None
        self._drop_connections()
        if self._listen_task is not None:
            self._listen_task.cancel()
        self._sock = self._bind()
        if self.world.loaded():
            await self._listen()
        else:
            self._listen_task = asyncio.create_task(self._listen_when_loaded())

    def _drop_connections(self) -> None:
        server = self._runner.server if self._runner is not None else None
        if server is None:
            return
        for conn in list(server.connections):
            transport = conn.transport
            if transport is not None:
                transport.close()

    # --- plumbing shared by the dialects ---------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            return await self._handle(request, handler)
        except ConnectionResetError:
            # The client left while its request was read or answered (a benchmark stopped
            # by Ctrl-C): nobody reads this answer, and aiohttp drops it without a traceback.
            return web.Response(status=499)
        finally:
            if task is not None:
                self._handlers.discard(task)

    async def _handle(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        world = self.world
        world.truth.hit(request.method, path)
        faults = world.faults
        if faults is not None:
            if faults.should_hang(path):
                await faults.wait_released()
            status = faults.take_error(path)
            if status is not None:
                return self.dialect.error(status, "injected server error")
        if not world.loaded():
            if self.dialect.listens_while_loading:
                return self.dialect.error(503, "Loading model")
            # A connection kept alive across a restart: the real process would be gone.
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=503)
        if self.config.api_key is not None and self.dialect.needs_key(path):
            header = request.headers.get("Authorization", "")
            if header != f"Bearer {self.config.api_key}":
                return self.dialect.error(401, "Unauthorized")
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return self.dialect.error(404, "Not Found")
        except web.HTTPMethodNotAllowed:
            return self.dialect.error(405, "Method Not Allowed")

    async def metrics_body(self) -> bytes:
        """The ``/metrics`` text now (garbage mixed in when that fault is due)."""
        world = self.world
        with world.locked():
            t = world.now()
            world.advance_to(t)
            world.truth.add_scrape(t)
            running = list(world.engine.running)
            waiting = len(world.engine.waiting)
            kv = min(
                1.0,
                sum(r.prompt_tokens + r.generated for r in running)
                / world.config.kv_capacity_tokens,
            )
            body = world.telemetry.exposition(
                running, waiting, t, world.unix_time(world.started_at), kv
            )
        garbage = world.faults.take_metrics_garbage() if world.faults is not None else ()
        if garbage:
            lines = body.decode().splitlines(keepends=True)
            for i, junk in enumerate(garbage):
                lines.insert(min(len(lines), (i + 1) * max(1, len(lines) // 5)), junk)
            body = "".join(lines).encode()
        return body

    async def stream(
        self,
        request: web.Request,
        req: SimRequest,
        render_group: RenderGroup,
        tail: Callable[[], list[bytes]],
        *,
        per_token: bool = False,
        head: list[bytes] | None = None,
    ) -> web.StreamResponse:
        """Stream ``req`` as server-sent events.

        Args:
            request: the HTTP request.
            req: the engine request to follow.
            render_group: turns the token events of one chunk (and whether it is the last)
                into SSE payloads.
            tail: payloads after the last chunk (usage chunk, ``[DONE]``).
            per_token: one chunk per token (llama.cpp) instead of per step.
            head: payloads to send with the first tokens (e.g. a chat role chunk).
        """
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        faults = self.world.faults
        drop_after = faults.take_drop() if faults is not None else None
        garbage = faults.take_stream_garbage() if faults is not None else ()
        sent = 0
        index = 0
        try:
            while True:
                events = await self.world.next_events(req, index)
                # One consistent view: a restart on another thread can abort the request
                # between these reads, and a stream that then rendered its last chunk as
                # finished ("abort") would end cleanly instead of being dropped.
                with self.world.locked():
                    aborted, done, total = req.aborted, req.done, len(req.events)
                if aborted:
                    self._abort(request)
                    return resp
                if not events:
                    break
                index += len(events)
                last_index = total if done else -1
                if per_token:
                    groups = [
                        [
                            TokenEvent(
                                e.t, 1, e.total - e.n + k + 1, e.prefill, e.proposed, e.accepted
                            )
                        ]
                        for e in events
                        for k in range(e.n)
                    ]
                elif self.config.coalesce_chunks:
                    groups = [events]
                else:
                    groups = [[e] for e in events]
                for gi, group in enumerate(groups):
                    is_last = index == last_index and gi == len(groups) - 1
                    payloads = render_group(group, is_last)
                    if head and sent == 0:
                        payloads = [*head, *payloads]
                    for payload in payloads:
                        await resp.write(payload)
                        sent += 1
                        if garbage and sent == 1:
                            for junk in garbage:
                                await resp.write(junk)
                        if drop_after is not None and sent >= drop_after:
                            self.abandon(req)
                            self._abort(request)
                            return resp
                if done and index >= total:
                    break
            if req.aborted:
                self._abort(request)
                return resp
            for payload in tail():
                await resp.write(payload)
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            self.abandon(req)
        except asyncio.CancelledError:
            self.abandon(req)
            raise
        return resp

    def abandon(self, req: SimRequest) -> None:
        """The client went away: the server aborts the request, as real ones do."""
        world = self.world
        with world.locked():
            if req.done:
                return
            world.advance_to(world.now())
            world.engine.abort(req, world.now())

    @staticmethod
    def _abort(request: web.Request) -> None:
        if request.transport is not None:
            request.transport.close()


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if ":" in host:
        return f"[{host}]"
    return host
