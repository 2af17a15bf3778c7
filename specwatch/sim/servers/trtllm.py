"""The simulated TensorRT-LLM server (``trtllm-serve``): routes and payloads as the real one.

Routes follow ``tensorrt_llm/serve/openai_server.py`` (``register_routes``): ``/health``,
``/health_generate`` (a one-token generation: model work), ``/version``, ``/v1/models``
(``owned_by: "tensorrt_llm"``, ``openai_protocol.ModelCard``), ``/metrics`` (a JSON list of
iteration stats, drained on read), ``/perf_metrics`` (drained too) and ``/prometheus/metrics``
only with ``return_perf_metrics`` (here ``metrics_enabled``). Counters and names live in
:mod:`specwatch.sim.metrics.trtllm_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.metrics.trtllm_metrics import TrtllmTelemetry
from specwatch.sim.servers.base import fastapi_error, json_response
from specwatch.sim.servers.openai import OpenAiDialect


class TrtllmDialect(OpenAiDialect):
    """TensorRT-LLM's OpenAI server (``trtllm-serve``, PyTorch backend)."""

    dialect = Dialect.TRTLLM
    default_version = "1.3.0"
    preset: ClassVar[Mapping[str, Any]] = {
        "spec_algorithm": "eagle3",
        "num_steps": 3,
        "num_draft_tokens": 3,
    }
    owned_by = "tensorrt_llm"
    honours_ignore_eos = True

    def mount(self, app: web.Application) -> None:
        """Mount the endpoints (``/prometheus/metrics`` only with ``return_perf_metrics``)."""
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health_generate)
        r.add_get("/version", self.version)
        r.add_get("/v1/models", self.models)
        r.add_get("/metrics", self.iteration_stats)
        r.add_get("/perf_metrics", self.perf_metrics)
        if self.cfg.metrics_enabled:
            r.add_get("/prometheus/metrics", self.metrics)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)

    async def health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def health_generate(self, request: web.Request) -> web.StreamResponse:
        # A real one-token chat generation in the real server: model work, in the truth.
        req = self.world.submit(1, 1, True, probe=True, endpoint=request.path, streaming=False)
        await self.world.wait_done(req)
        return web.Response(status=200 if not req.aborted else 500)

    async def version(self, request: web.Request) -> web.StreamResponse:
        return json_response({"version": self.cfg.version})

    async def iteration_stats(self, request: web.Request) -> web.StreamResponse:
        """``/metrics``: the iteration stats since the last read, which nobody sees again."""
        telemetry = self.world.telemetry
        with self.world.locked():
            self.world.advance_to(self.world.now())
            stats = telemetry.take_json() if isinstance(telemetry, TrtllmTelemetry) else []
        return json_response(stats)

    async def perf_metrics(self, request: web.Request) -> web.StreamResponse:
        """``/perf_metrics``: per-request records are not kept (``perf_metrics_max_requests``
        is 0 by default), so the list is empty."""
        return json_response([])

    def continuous_usage(self, requested: bool, include_usage: bool) -> bool:
        """``stream_options.continuous_usage_stats`` (with ``include_usage``), as vLLM's."""
        return requested and include_usage

    @classmethod
    def error(cls, status: int, message: str) -> web.Response:
        """FastAPI's 404/405, else TensorRT-LLM's ``ErrorResponse``."""
        return fastapi_error(
            status,
            message,
            {"object": "error", "message": message, "type": "BadRequestError", "code": status},
        )

    @classmethod
    def needs_key(cls, path: str) -> bool:
        """Only ``/v1`` paths check the key."""
        return path.startswith("/v1")


__all__ = ["TrtllmDialect"]
