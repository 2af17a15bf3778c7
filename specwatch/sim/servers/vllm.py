"""The simulated vLLM server: routes and payloads, version by version.

Its counters and ``/metrics`` names live in :mod:`specwatch.sim.metrics.vllm_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest
from specwatch.sim.profiler import SimProfiler
from specwatch.sim.servers.base import fastapi_error, json_response
from specwatch.sim.servers.openai import OpenAiDialect


class VllmDialect(OpenAiDialect):
    """vLLM's OpenAI-compatible API server (``vllm serve``)."""

    dialect = Dialect.VLLM
    default_version = "0.33.0"
    preset: ClassVar[Mapping[str, Any]] = {
        "spec_algorithm": "eagle3",
        "num_steps": 3,
        "num_draft_tokens": 3,
    }
    owned_by = "vllm"
    honours_ignore_eos = True
    choice_extras: ClassVar[Mapping[str, None]] = {"stop_reason": None}

    def mount(self, app: web.Application) -> None:
        """Mount the endpoints (``/metrics`` always: stats logging off only empties it)."""
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_get("/health", self.health)
        r.add_get("/ping", self.health)
        r.add_post("/ping", self.health)
        r.add_get("/version", self.version)
        r.add_get("/load", self.load)
        # /metrics is always mounted; stats logging off would only empty the vllm:* series.
        if self.cfg.metrics_enabled:
            r.add_get("/metrics", self.metrics)
        else:
            r.add_get("/metrics", self.empty_metrics)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)
        SimProfiler(self.cfg, self.world).mount(app)

    async def health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.StreamResponse:
        return json_response({"version": self.cfg.version})

    async def load(self, request: web.Request) -> web.StreamResponse:
        running, waiting = self.world.running_snapshot()
        return json_response({"server_load": len(running) + waiting})

    async def empty_metrics(self, request: web.Request) -> web.StreamResponse:
        return web.Response(
            text="# HELP python_info Python platform information\n"
            "# TYPE python_info gauge\n"
            'python_info{implementation="CPython",major="3",minor="12",patchlevel="3",'
            'version="3.12.3"} 1.0\n',
            content_type="text/plain",
        )

    # --- OpenAI endpoint hooks -------------------------------------------------------------

    def model_error(self, model: Any) -> web.Response | None:
        """vLLM refuses a model it does not serve with a 404."""
        if model in (None, self.cfg.model):
            return None
        return json_response(
            {
                "object": "error",
                "message": f"The model `{model}` does not exist.",
                "type": "NotFoundError",
                "param": None,
                "code": 404,
            },
            404,
        )

    def continuous_usage(self, requested: bool, include_usage: bool) -> bool:
        """``continuous_usage_stats`` needs ``include_usage`` too."""
        return requested and include_usage

    def request_metrics(self, req: SimRequest) -> dict[str, Any] | None:
        """Per-request ``metrics`` (0.33, ``--per-request-spec-decode-metrics``)."""
        cfg = self.cfg
        if cfg.at_least("0.33.0") and cfg.per_request_metrics in ("summary", "detailed"):
            return per_request_metrics(cfg, req)
        return None

    @classmethod
    def error(cls, status: int, message: str) -> web.Response:
        """FastAPI's 401/404/405, else vLLM's ``ErrorResponse``."""
        return fastapi_error(
            status,
            message,
            {"object": "error", "message": message, "type": "InternalServerError", "code": status},
        )

    @classmethod
    def needs_key(cls, path: str) -> bool:
        """Only ``/v1`` paths check the key."""
        return path.startswith("/v1")

    def model_card(self) -> dict[str, Any]:
        """The OpenAI card plus ``root``, ``parent``, ``max_model_len`` and ``permission``."""
        card = super().model_card()
        card.update({"root": self.cfg.model, "parent": None})
        card["max_model_len"] = self.cfg.max_model_len
        card["permission"] = [
            {
                "id": "modelperm-sim",
                "object": "model_permission",
                "created": self.created(),
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ]
        return card


def per_request_metrics(cfg: SimConfig, req: SimRequest) -> dict[str, Any]:
    """vLLM 0.33 per-request ``metrics`` (``--per-request-spec-decode-metrics``, §2.4)."""
    first = req.t_first if req.t_first is not None else req.t_arrival
    last = req.t_last if req.t_last is not None else first
    admit = req.t_admit if req.t_admit is not None else req.t_arrival
    n = req.generated
    out: dict[str, Any] = {
        "time_to_first_token_ms": (first - req.t_arrival) * 1000.0,
        "generation_time_ms": (last - first) * 1000.0,
        "queue_time_ms": (admit - req.t_arrival) * 1000.0,
        "mean_itl_ms": (last - first) / (n - 1) * 1000.0 if n > 1 else None,
        "tokens_per_second": n / (last - admit) if last > admit else None,
    }
    if cfg.spec_enabled:
        spec_steps = req.drafted_steps
        spec: dict[str, Any] = {
            "mean_acceptance_length": 1 + req.accepted / spec_steps if spec_steps else None,
            "draft_acceptance_rate": req.accepted / req.proposed if req.proposed else None,
            "acceptance_histogram": list(req.histogram),
            "num_spec_steps": spec_steps,
            "num_accepted_draft_tokens": req.accepted,
            "num_draft_tokens": req.proposed,
            "num_spec_tokens": cfg.drafts_per_step,
        }
        if cfg.per_request_metrics == "detailed":
            spec["per_step_accepted"] = [a for a, p in req.per_step if p > 0]
            spec["per_step_drafted"] = [p for _, p in req.per_step if p > 0]
        out["speculative_decoding"] = spec
    return out
