"""The simulated SGLang server: routes and payloads, version by version.

Its counters and ``/metrics`` names live in :mod:`specwatch.sim.metrics.sglang_metrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.config import CUDA_GRAPH_MAX_BS, SimConfig
from specwatch.sim.engine import SimRequest, TokenEvent
from specwatch.sim.metrics.sglang_metrics import SglangTelemetry
from specwatch.sim.profiler import SimProfiler
from specwatch.sim.servers.base import (
    DONE,
    as_int,
    count_prompt_tokens,
    fastapi_error,
    json_response,
    read_body,
    sse,
    text_range,
    token_id,
)
from specwatch.sim.servers.openai import OpenAiDialect

DEFAULT_NEW_TOKENS = 128
SGLANG_LAUNCH = "python3 -m sglang.launch_server"


class SglangDialect(OpenAiDialect):
    """SGLang's HTTP server (``sglang.launch_server``)."""

    dialect = Dialect.SGLANG
    default_version = "0.5.23"
    preset: ClassVar[Mapping[str, Any]] = {
        "spec_algorithm": "EAGLE3",
        "num_steps": 3,
        "num_draft_tokens": 4,
    }
    owned_by = "sglang"
    honours_ignore_eos = True
    usage_in_every_chunk = True
    choice_extras: ClassVar[Mapping[str, None]] = {"matched_stop": None}

    def mount(self, app: web.Application) -> None:
        """Mount the endpoints of the imitated version."""
        cfg = self.cfg
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health_generate)
        r.add_get("/get_server_info", self.server_info)
        r.add_get("/get_model_info", self.model_info)
        if cfg.at_least("0.5.10"):
            r.add_get("/server_info", self.server_info)
            r.add_get("/model_info", self.model_info)
        if cfg.at_least("0.5.23"):
            r.add_get("/ready", self.ready)
        if cfg.metrics_enabled:
            r.add_get("/metrics", self.metrics)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)
        SimProfiler(self.cfg, self.world).mount(app)

    async def health(self, request: web.Request) -> web.StreamResponse:
        if not self.cfg.at_least("0.4.10"):
            return web.Response(status=200)
        return await self.health_generate(request)

    async def health_generate(self, request: web.Request) -> web.StreamResponse:
        # A real one-token generation (log_metrics=False): model work, recorded in the truth.
        req = self.world.submit(1, 1, True, probe=True, endpoint=request.path, streaming=False)
        await self.world.wait_done(req)
        return web.Response(status=200 if not req.aborted else 503)

    async def ready(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200, text="OK")

    def _launch_command(self) -> str:
        cfg = self.cfg
        parts = [SGLANG_LAUNCH, "--model-path", cfg.model, "--port", str(self.server.port)]
        parts += ["--tp-size", str(cfg.tp_size)]
        if cfg.spec_enabled:
            parts += [
                "--speculative-algorithm", str(cfg.spec_algorithm),
                "--speculative-draft-model-path", f"{cfg.model}-draft",
                "--speculative-num-steps", str(cfg.num_steps),
                "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", str(cfg.num_draft_tokens),
            ]  # fmt: skip
        if cfg.metrics_enabled:
            parts.append("--enable-metrics")
        return " ".join(parts)

    async def server_info(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        spec = cfg.spec_enabled
        tm = self.world.telemetry
        assert isinstance(tm, SglangTelemetry)
        state: dict[str, Any] = {
            "last_gen_throughput": tm.gen_throughput,
            "memory_usage": {
                "weight": 15.2,
                "kvcache": 52.1,
                "token_capacity": cfg.kv_capacity_tokens,
            },
            "world_size": cfg.tp_size,
            "effective_max_running_requests_per_dp": cfg.max_running,
        }
        avg = tm.avg_spec_accept_length
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        states = [dict(state) for _ in range(max(1, cfg.dp_engines))]  # one per DP rank
        info: dict[str, Any] = {
            "model_path": cfg.model,
            "tokenizer_path": cfg.model,
            "served_model_name": cfg.model,
            "host": self.server.host,
            "port": self.server.port,
            "tp_size": cfg.tp_size,
            "dp_size": max(1, cfg.dp_engines),
            "enable_priority_scheduling": cfg.priority_scheduling,
            "pp_size": 1,
            "context_length": cfg.max_model_len,
            "max_running_requests": cfg.max_running,
            "stream_interval": 1,
            "enable_metrics": cfg.metrics_enabled,
            "decode_log_interval": cfg.decode_log_interval,
            "speculative_algorithm": cfg.spec_algorithm,
            "speculative_draft_model_path": f"{cfg.model}-draft" if spec else None,
            "speculative_num_steps": cfg.num_steps if spec else None,
            "speculative_eagle_topk": 1 if spec else None,
            "speculative_num_draft_tokens": cfg.num_draft_tokens if spec else None,
            "speculative_accept_threshold_single": 1.0,
            "speculative_accept_threshold_acc": 1.0,
            "api_key": None,
            "max_total_num_tokens": cfg.kv_capacity_tokens,
            "disable_radix_cache": not cfg.prefix_caching,
            "launch_command": self._launch_command(),
            "startup_time": self.world.unix_time(self.world.started_at),
            "internal_states": states,
            "version": cfg.version,
        }
        if cfg.at_least("0.5.16"):
            info.update(
                {
                    "cuda_graph_config": None,
                    "cuda_graph_backend_decode": "full",
                    "cuda_graph_max_bs_decode": CUDA_GRAPH_MAX_BS,
                    "cuda_graph_bs_decode": None,
                    "disable_decode_cuda_graph": False,
                    "speculative_adaptive": False,
                }
            )
        else:
            info.update({"disable_cuda_graph": False, "cuda_graph_max_bs": CUDA_GRAPH_MAX_BS})
        if cfg.at_least("0.5.23"):
            info["frontend"] = "python"
        return json_response(info)

    async def model_info(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        info: dict[str, Any] = {
            "model_path": cfg.model,
            "tokenizer_path": cfg.model,
            "is_generation": True,
            "preferred_sampling_params": None,
        }
        if cfg.at_least("0.5.4"):
            info["weight_version"] = "default"
        if cfg.at_least("0.5.10"):
            info.update(
                {
                    "served_model_name": cfg.model,
                    "load_format": "auto",
                    "reasoning_parser": None,
                    "tool_call_parser": None,
                    "disaggregation_mode": "null",
                    "has_image_understanding": False,
                    "has_audio_understanding": False,
                    "model_type": "llama",
                    "architectures": ["LlamaForCausalLM"],
                }
            )
        return json_response(info)

    def _meta(self, req: SimRequest, total: int, final: bool) -> dict[str, Any]:
        cfg = self.cfg
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": _finish(req) if final else None,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": total,
            "cached_tokens": 0,
        }
        if cfg.at_least("0.5.4"):
            meta["weight_version"] = "default"
        if cfg.at_least("0.5.16"):
            meta["reasoning_tokens"] = 0
            meta["num_retractions"] = 0
        if final:
            end = req.t_end if req.t_end is not None else self.world.now()
            meta["e2e_latency"] = end - req.t_arrival
            meta.update(spec_fields(cfg, req))
        return meta

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await read_body(request)
        sp = body.get("sampling_params") or {}
        if "input_ids" in body and body["input_ids"] is not None:
            prompt_tokens = count_prompt_tokens(body["input_ids"])
        else:
            prompt_tokens = count_prompt_tokens(body.get("text", ""))
        max_new = as_int(sp.get("max_new_tokens"), DEFAULT_NEW_TOKENS)
        stream = bool(body.get("stream", False))
        req = self.submit(
            prompt_tokens, max_new, bool(sp.get("ignore_eos", False)), request.path, stream
        )
        if not stream:
            await self.world.wait_done(req)
            return json_response(
                {
                    "text": text_range(req, 0, req.generated),
                    "output_ids": [token_id(req, i) for i in range(req.generated)],
                    "meta_info": self._meta(req, req.generated, True),
                }
            )

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            total = events[-1].total
            return [
                sse(
                    {
                        "text": text_range(req, 0, total),
                        "output_ids": [token_id(req, i) for i in range(total)],
                        "meta_info": self._meta(req, total, last),
                    }
                )
            ]

        return await self.server.stream(request, req, group, lambda: [DONE])

    # --- OpenAI endpoint hooks -------------------------------------------------------------

    def continuous_usage(self, requested: bool, include_usage: bool) -> bool:
        """``continuous_usage_stats`` exists from 0.5.10."""
        return requested and self.cfg.at_least("0.5.10")

    def offers_spec_details(self) -> bool:
        """``return_spec_tokens_details`` (0.5.23, while drafting)."""
        return self.cfg.at_least("0.5.23") and self.cfg.spec_enabled

    def spec_details(self, req: SimRequest) -> dict[str, Any]:
        """``sglext.spec_tokens_details`` of ``req``."""
        return spec_details(self.cfg, req)

    def usage(self, req: SimRequest, total: int) -> dict[str, Any]:
        """OpenAI usage plus ``prompt_tokens_details``."""
        u = super().usage(req, total)
        u["prompt_tokens_details"] = None
        return u

    @classmethod
    def error(cls, status: int, message: str) -> web.Response:
        """FastAPI's 401/404/405, else ``{"object": "error", ...}``."""
        return fastapi_error(
            status, message, {"object": "error", "message": message, "code": status}
        )

    @classmethod
    def needs_key(cls, path: str) -> bool:
        """``/health*`` and ``/metrics`` are open."""
        return not (path.startswith("/health") or path.startswith("/metrics"))

    def model_card(self) -> dict[str, Any]:
        """The OpenAI card plus ``root``, ``parent`` and ``max_model_len``."""
        card = super().model_card()
        card.update({"root": self.cfg.model, "parent": None})
        card["max_model_len"] = self.cfg.max_model_len
        return card


def _finish(req: SimRequest) -> dict[str, Any]:
    if req.aborted:
        return {"type": "abort", "message": "aborted"}
    if req.finish_reason == "stop":
        return {"type": "stop", "matched": 128009}
    return {"type": "length", "length": req.generated}


def spec_fields(cfg: SimConfig, req: SimRequest) -> dict[str, Any]:
    """Final ``meta_info`` speculative fields of the imitated SGLang version (§1.4)."""
    if not cfg.spec_enabled:
        return {}
    verify = req.steps
    out: dict[str, Any] = {"spec_verify_ct": verify}
    if not cfg.at_least("0.5.4"):
        return out
    length = req.generated / verify if verify else 0.0
    if cfg.at_least("0.5.10"):
        rate = req.accepted / req.proposed if req.proposed else 0.0
    else:
        rate = req.accepted / (verify * cfg.num_steps) if verify and cfg.num_steps else 0.0
    out.update({"spec_accept_rate": rate, "spec_accept_length": length})
    hist = list(req.histogram)
    if cfg.at_least("0.5.16"):
        out.update(
            {
                "spec_num_correct_drafts": req.accepted,
                "spec_num_proposed_drafts": req.proposed,
                "spec_correct_drafts_histogram": hist,
            }
        )
        if not cfg.at_least("0.5.23"):
            out.update(
                {
                    "spec_accepted_drafts": req.accepted,
                    "spec_proposed_drafts": req.proposed,
                    "spec_accept_histogram": hist,
                }
            )
    elif cfg.at_least("0.5.10"):
        out.update(
            {
                "spec_accept_token_num": req.accepted,
                "spec_draft_token_num": req.proposed,
                "spec_accept_histogram": hist,
            }
        )
    return out


def spec_details(cfg: SimConfig, req: SimRequest) -> dict[str, Any]:
    """``sglext.spec_tokens_details`` (0.5.23, ``return_spec_tokens_details``)."""
    verify = req.steps
    return {
        "spec_accept_rate": req.accepted / req.proposed if req.proposed else 0.0,
        "spec_accept_length": req.generated / verify if verify else 0.0,
        "spec_cap_length": None,
        "spec_block_accept_length": None,
        "spec_num_correct_drafts": req.accepted,
        "spec_num_proposed_drafts": req.proposed,
        "spec_verify_ct": verify,
        "spec_correct_drafts_histogram": list(req.histogram),
        "spec_cap_lens_histogram": None,
    }
