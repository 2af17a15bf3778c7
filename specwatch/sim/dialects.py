"""Routes and payloads of each imitated server (SGLang, vLLM, llama.cpp), version by version."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.engine import SimRequest, TokenEvent

if TYPE_CHECKING:
    from specwatch.sim.server import SimServer

Route = Callable[[web.Request], Awaitable[web.StreamResponse]]

DEFAULT_COMPLETION_TOKENS = 16
DEFAULT_CHAT_TOKENS = 1024
DEFAULT_SGLANG_NEW_TOKENS = 128
UNBOUNDED_CAP = 4096
"""``n_predict: -1`` and the like: stop here rather than at the context length."""

_WORDS = (
    "the", "GPU", "draft", "token", "verify", "accept", "clock", "warm", "batch", "kernel",
    "tensor", "model", "speculative", "decode", "server", "latency", "memory", "stream",
    "throughput", "cache", "and", "of", "a", "to", "in", "is", "with", "for", "on", "it",
)  # fmt: skip

CHAT_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"
SGLANG_LAUNCH = "python3 -m sglang.launch_server"
LLAMACPP_SPEC_TYPES = {
    "EAGLE3": "draft-eagle3",
    "EAGLE": "draft-eagle3",
    "NGRAM": "ngram-simple",
    "MTP": "draft-mtp",
    "NEXTN": "draft-mtp",
    "STANDALONE": "draft-simple",
}


# --- small helpers ---------------------------------------------------------------------------


def token_text(req: SimRequest, i: int) -> str:
    """The text of completion token ``i`` (0-based) of ``req``: deterministic words."""
    return " " + _WORDS[(req.seq * 7 + i * 13) % len(_WORDS)]


def token_id(req: SimRequest, i: int) -> int:
    """A stable fake vocabulary id for completion token ``i`` of ``req``."""
    return 1000 + (req.seq * 7919 + i * 104729) % 30000


def text_range(req: SimRequest, start: int, end: int) -> str:
    """Concatenated text of completion tokens ``start`` .. ``end - 1``."""
    return "".join(token_text(req, i) for i in range(start, end))


def count_prompt_tokens(prompt: Any) -> int:
    """A tokenizer stand-in: about four characters per token."""
    if isinstance(prompt, list):
        if prompt and all(isinstance(x, int) for x in prompt):
            return len(prompt)
        return sum(count_prompt_tokens(p) for p in prompt)
    if isinstance(prompt, str):
        return max(1, (len(prompt) + 3) // 4)
    return 1


def chat_prompt_tokens(messages: Any) -> int:
    """Prompt tokens of a chat request (contents plus a little template)."""
    if not isinstance(messages, list):
        return 1
    total = 3
    for m in messages:
        content = m.get("content", "") if isinstance(m, dict) else ""
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        total += 4 + count_prompt_tokens(str(content))
    return total


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(data), status=status, content_type="application/json", headers=headers
    )


def error(dialect: Dialect, status: int, message: str) -> web.Response:
    """An error answer shaped the way ``dialect`` shapes them."""
    if dialect is Dialect.LLAMACPP:
        kind = {
            401: "authentication_error",
            404: "not_found_error",
            501: "not_supported_error",
            503: "unavailable_error",
        }.get(status, "server_error")
        if status == 404:
            message = "File Not Found"
        if status == 401:
            message = "Invalid API Key"
        return _json({"error": {"code": status, "message": message, "type": kind}}, status)
    if dialect is Dialect.OPENAI:
        return _json(
            {"error": {"message": message, "type": "invalid_request_error", "code": status}},
            status,
        )
    if status == 401:
        return _json({"error": "Unauthorized"}, status)
    if status in (404, 405):
        return _json({"detail": message}, status)
    if dialect is Dialect.VLLM:
        return _json(
            {"object": "error", "message": message, "type": "InternalServerError", "code": status},
            status,
        )
    return _json({"object": "error", "message": message, "code": status}, status)


def needs_key(dialect: Dialect, path: str) -> bool:
    """Whether ``path`` checks the API key on ``dialect`` (each server exempts some paths)."""
    if dialect is Dialect.VLLM:
        return path.startswith("/v1")
    if dialect is Dialect.SGLANG:
        return not (path.startswith("/health") or path.startswith("/metrics"))
    if dialect is Dialect.LLAMACPP:
        return path not in ("/health", "/v1/health", "/models", "/v1/models", "/api/tags")
    return True


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(text=f"invalid JSON body: {exc}") from exc
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return data


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# --- routes --------------------------------------------------------------------------------


def add_routes(app: web.Application, server: SimServer) -> None:
    """Mount the imitated server's endpoints on ``app``."""
    d = server.config.dialect
    common = _Common(server)
    if d is Dialect.SGLANG:
        _Sglang(server, common).mount(app)
    elif d is Dialect.VLLM:
        _Vllm(server, common).mount(app)
    elif d is Dialect.LLAMACPP:
        _LlamaCpp(server, common).mount(app)
    else:
        _Generic(server, common).mount(app)


class _Common:
    """OpenAI-compatible pieces shared by the dialects."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.world = server.world
        self.cfg = server.config

    def created(self) -> int:
        return int(self.world.unix_time(self.world.started_at))

    def model_card(self, owned_by: str) -> dict[str, Any]:
        card: dict[str, Any] = {
            "id": self.cfg.model,
            "object": "model",
            "created": self.created(),
            "owned_by": owned_by,
        }
        if self.cfg.dialect in (Dialect.SGLANG, Dialect.VLLM):
            card.update({"root": self.cfg.model, "parent": None})
            card["max_model_len"] = self.cfg.max_model_len
        if self.cfg.dialect is Dialect.VLLM:
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

    def submit(
        self, prompt_tokens: int, max_tokens: int, ignore_eos: bool, endpoint: str, stream: bool
    ) -> SimRequest:
        cap = max(1, min(max_tokens, self.cfg.max_model_len - prompt_tokens))
        return self.world.submit(
            prompt_tokens, cap, ignore_eos, endpoint=endpoint, streaming=stream
        )

    async def openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        """``/v1/completions`` and ``/v1/chat/completions`` for SGLang, vLLM and generic."""
        cfg = self.cfg
        body = await _body(request)
        model = body.get("model")
        if cfg.dialect is Dialect.VLLM and model not in (None, cfg.model):
            return _json(
                {
                    "object": "error",
                    "message": f"The model `{model}` does not exist.",
                    "type": "NotFoundError",
                    "param": None,
                    "code": 404,
                },
                404,
            )
        if chat:
            prompt_tokens = chat_prompt_tokens(body.get("messages"))
            default = DEFAULT_CHAT_TOKENS
            max_tokens = _int(body.get("max_completion_tokens", body.get("max_tokens")), default)
        else:
            prompt_tokens = count_prompt_tokens(body.get("prompt", ""))
            max_tokens = _int(body.get("max_tokens"), DEFAULT_COMPLETION_TOKENS)
        ignore_eos = bool(body.get("ignore_eos", False)) and cfg.dialect is not Dialect.OPENAI
        stream = bool(body.get("stream", False))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage", False))
        continuous = bool(opts.get("continuous_usage_stats", False)) and self._has_continuous()
        if cfg.dialect is Dialect.VLLM:
            continuous = continuous and include_usage  # vLLM needs both
        spec_details = (
            bool(body.get("return_spec_tokens_details", False))
            and cfg.dialect is Dialect.SGLANG
            and cfg.at_least("0.5.23")
            and cfg.spec_enabled
        )
        req = self.submit(prompt_tokens, max_tokens, ignore_eos, request.path, stream)
        rid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(self.world.unix_time(req.t_arrival))

        def usage(total: int) -> dict[str, Any]:
            u: dict[str, Any] = {
                "prompt_tokens": req.prompt_tokens,
                "total_tokens": req.prompt_tokens + total,
                "completion_tokens": total,
            }
            if cfg.dialect is Dialect.SGLANG:
                u["prompt_tokens_details"] = None
            return u

        def envelope(choices: list[dict[str, Any]], total: int | None) -> dict[str, Any]:
            chunk: dict[str, Any] = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": cfg.model,
                "choices": choices,
            }
            if cfg.dialect is Dialect.SGLANG:
                chunk["usage"] = usage(total) if (continuous and total is not None) else None
            elif continuous and total is not None:
                chunk["usage"] = usage(total)
            return chunk

        if not stream:
            await self.world.wait_done(req)
            text = text_range(req, 0, req.generated)
            choice: dict[str, Any] = {"index": 0, "logprobs": None}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            choice["finish_reason"] = _oai_finish(req)
            full: dict[str, Any] = {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": cfg.model,
                "choices": [choice],
                "usage": usage(req.generated),
            }
            if self._per_request_metrics():
                full["metrics"] = vllm_request_metrics(cfg, req)
            return _json(full)

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            end = events[-1].total
            start = events[0].total - events[0].n
            delta = text_range(req, start, end)
            ch: dict[str, Any] = {"index": 0}
            if chat:
                ch["delta"] = {"content": delta}
            else:
                ch["text"] = delta
            ch["logprobs"] = None
            ch["finish_reason"] = _oai_finish(req) if last else None
            if cfg.dialect is Dialect.SGLANG:
                ch["matched_stop"] = None
            elif cfg.dialect is Dialect.VLLM:
                ch["stop_reason"] = None
            return [_sse(envelope([ch], end))]

        def tail() -> list[bytes]:
            out: list[bytes] = []
            if spec_details:
                out.append(
                    _sse(
                        {
                            "id": rid,
                            "object": obj,
                            "created": created,
                            "model": cfg.model,
                            "choices": [],
                            "sglext": {"spec_tokens_details": sglang_spec_details(cfg, req)},
                        }
                    )
                )
            if include_usage:
                u = envelope([], None)
                u["usage"] = usage(req.generated)
                if self._per_request_metrics():
                    u["metrics"] = vllm_request_metrics(cfg, req)
                out.append(_sse(u))
            out.append(DONE)
            return out

        head: list[bytes] | None = None
        if chat:
            role: dict[str, Any] = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            role["logprobs"] = None
            role["finish_reason"] = None
            head = [_sse(envelope([role], 0))]
        return await self.server.stream(request, req, group, tail, head=head)

    def _per_request_metrics(self) -> bool:
        cfg = self.cfg
        return (
            cfg.dialect is Dialect.VLLM
            and cfg.at_least("0.33.0")
            and cfg.per_request_metrics in ("summary", "detailed")
        )

    def _has_continuous(self) -> bool:
        cfg = self.cfg
        if cfg.dialect is Dialect.SGLANG:
            return cfg.at_least("0.5.10")
        return cfg.dialect is Dialect.VLLM

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        body = await self.server.metrics_body()
        headers: dict[str, str] = {}
        if self.cfg.dialect is Dialect.LLAMACPP:
            headers["Process-Start-Time-Unix"] = str(
                int(self.world.unix_time(self.world.started_at))
            )
        return web.Response(
            body=body,
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8", **headers},
        )


def _oai_finish(req: SimRequest) -> str:
    return "stop" if req.finish_reason == "stop" else ("abort" if req.aborted else "length")


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def vllm_request_metrics(cfg: Any, req: SimRequest) -> dict[str, Any]:
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


# --- SGLang --------------------------------------------------------------------------------


def sglang_spec_fields(cfg: Any, req: SimRequest) -> dict[str, Any]:
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


def sglang_spec_details(cfg: Any, req: SimRequest) -> dict[str, Any]:
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


class _Dialect:
    """What every dialect's handlers reach: the server, its world and config, shared handlers."""

    def __init__(self, server: SimServer, common: _Common) -> None:
        self.server = server
        self.common = common
        self.world = server.world
        self.cfg = server.config


class _Sglang(_Dialect):
    def mount(self, app: web.Application) -> None:
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
            r.add_get("/metrics", self.common.metrics)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)

    async def models(self, request: web.Request) -> web.StreamResponse:
        return _json({"object": "list", "data": [self.common.model_card("sglang")]})

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
        state: dict[str, Any] = {
            "last_gen_throughput": tm.gen_throughput,
            "memory_usage": {"weight": 15.2, "kvcache": 52.1, "token_capacity": 500000},
            "world_size": cfg.tp_size,
            "effective_max_running_requests_per_dp": cfg.max_running,
        }
        avg = tm.avg_spec_accept_length
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        info: dict[str, Any] = {
            "model_path": cfg.model,
            "tokenizer_path": cfg.model,
            "served_model_name": cfg.model,
            "host": self.server.host,
            "port": self.server.port,
            "tp_size": cfg.tp_size,
            "dp_size": 1,
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
            "max_total_num_tokens": 500000,
            "launch_command": self._launch_command(),
            "startup_time": self.world.unix_time(self.world.started_at),
            "internal_states": [state],
            "version": cfg.version,
        }
        if cfg.at_least("0.5.16"):
            info.update(
                {
                    "cuda_graph_config": None,
                    "cuda_graph_backend_decode": "full",
                    "cuda_graph_max_bs_decode": 160,
                    "cuda_graph_bs_decode": None,
                    "disable_decode_cuda_graph": False,
                    "speculative_adaptive": False,
                }
            )
        else:
            info.update({"disable_cuda_graph": False, "cuda_graph_max_bs": 160})
        if cfg.at_least("0.5.23"):
            info["frontend"] = "python"
        return _json(info)

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
        return _json(info)

    def _meta(self, req: SimRequest, total: int, final: bool) -> dict[str, Any]:
        cfg = self.cfg
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": _sglang_finish(req) if final else None,
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
            meta.update(sglang_spec_fields(cfg, req))
        return meta

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        sp = body.get("sampling_params") or {}
        if "input_ids" in body and body["input_ids"] is not None:
            prompt_tokens = count_prompt_tokens(body["input_ids"])
        else:
            prompt_tokens = count_prompt_tokens(body.get("text", ""))
        max_new = _int(sp.get("max_new_tokens"), DEFAULT_SGLANG_NEW_TOKENS)
        stream = bool(body.get("stream", False))
        req = self.common.submit(
            prompt_tokens, max_new, bool(sp.get("ignore_eos", False)), request.path, stream
        )
        if not stream:
            await self.world.wait_done(req)
            return _json(
                {
                    "text": text_range(req, 0, req.generated),
                    "output_ids": [token_id(req, i) for i in range(req.generated)],
                    "meta_info": self._meta(req, req.generated, True),
                }
            )

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            total = events[-1].total
            return [
                _sse(
                    {
                        "text": text_range(req, 0, total),
                        "output_ids": [token_id(req, i) for i in range(total)],
                        "meta_info": self._meta(req, total, last),
                    }
                )
            ]

        return await self.server.stream(request, req, group, lambda: [DONE])

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=True)


def _sglang_finish(req: SimRequest) -> dict[str, Any]:
    if req.aborted:
        return {"type": "abort", "message": "aborted"}
    if req.finish_reason == "stop":
        return {"type": "stop", "matched": 128009}
    return {"type": "length", "length": req.generated}


# --- vLLM ----------------------------------------------------------------------------------


class _Vllm(_Dialect):
    def mount(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_get("/health", self.health)
        r.add_get("/ping", self.health)
        r.add_post("/ping", self.health)
        r.add_get("/version", self.version)
        r.add_get("/load", self.load)
        # /metrics is always mounted; stats logging off would only empty the vllm:* series.
        if self.cfg.metrics_enabled:
            r.add_get("/metrics", self.common.metrics)
        else:
            r.add_get("/metrics", self.empty_metrics)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)

    async def models(self, request: web.Request) -> web.StreamResponse:
        return _json({"object": "list", "data": [self.common.model_card("vllm")]})

    async def health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.StreamResponse:
        return _json({"version": self.cfg.version})

    async def load(self, request: web.Request) -> web.StreamResponse:
        running, waiting = self.world.running_snapshot()
        return _json({"server_load": len(running) + waiting})

    async def empty_metrics(self, request: web.Request) -> web.StreamResponse:
        return web.Response(
            text="# HELP python_info Python platform information\n"
            "# TYPE python_info gauge\n"
            'python_info{implementation="CPython",major="3",minor="12",patchlevel="3",'
            'version="3.12.3"} 1.0\n',
            content_type="text/plain",
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=True)


# --- llama.cpp -----------------------------------------------------------------------------


class _LlamaCpp(_Dialect):
    def mount(self, app: web.Application) -> None:
        r = app.router
        for path in ("/health", "/v1/health"):
            r.add_get(path, self.health)
        for path in ("/v1/models", "/models"):
            r.add_get(path, self.models)
        r.add_get("/props", self.props)
        r.add_get("/slots", self.slots)
        r.add_get("/metrics", self.metrics)
        for path in ("/completion", "/completions"):
            r.add_post(path, self.completion)
        r.add_post("/v1/completions", self.oai_completions)
        r.add_post("/v1/chat/completions", self.oai_chat)
        r.add_post("/chat/completions", self.oai_chat)

    @property
    def spec_type(self) -> str:
        algo = self.cfg.spec_algorithm
        if algo is None:
            return "none"
        return LLAMACPP_SPEC_TYPES.get(algo.upper(), algo)

    def params(self, for_slot: bool) -> dict[str, Any]:
        cfg = self.cfg
        p: dict[str, Any] = {
            "n_predict": -1,
            "seed": 4294967295,
            "temperature": 0.8,
            "dynatemp_range": 0.0,
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "repeat_penalty": 1.0,
            "ignore_eos": False,
            "stream": True,
            "n_probs": 0,
            "timings_per_token": False,
        }
        if cfg.llamacpp_new:
            # /props builds fresh params: always "none", even while drafting (§3.1).
            p["speculative.types"] = self.spec_type if for_slot else "none"
        else:
            n_max = cfg.num_draft_tokens if (for_slot and cfg.spec_enabled) else 16
            p.update(
                {"speculative.n_max": n_max, "speculative.n_min": 0, "speculative.p_min": 0.75}
            )
        return p

    async def health(self, request: web.Request) -> web.StreamResponse:
        return _json({"status": "ok"})

    async def models(self, request: web.Request) -> web.StreamResponse:
        card = self.common.model_card("llamacpp")
        card["meta"] = {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072}
        return _json(
            {
                "models": [
                    {"name": self.cfg.model, "model": self.cfg.model, "modified_at": "",
                     "size": "", "digest": "", "type": "model", "description": "",
                     "tags": [""], "capabilities": ["completion"], "parameters": "",
                     "details": {"parent_model": "", "format": "gguf", "family": "",
                                 "families": [""], "parameter_size": "",
                                 "quantization_level": ""}}
                ],
                "object": "list",
                "data": [card],
            }
        )  # fmt: skip

    async def props(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        return _json(
            {
                "default_generation_settings": {
                    "id": 0,
                    "id_task": -1,
                    "n_ctx": cfg.max_model_len,
                    "speculative": False,
                    "is_processing": False,
                    "params": self.params(for_slot=False),
                    "prompt": "",
                    "next_token": [
                        {"has_next_token": True, "has_new_line": False, "n_remain": -1,
                         "n_decoded": 0, "stopping_word": ""}
                    ],
                },
                "total_slots": cfg.max_running,
                "model_alias": cfg.model,
                "model_path": f"/models/{cfg.model}",
                "modalities": {"vision": False, "audio": False},
                "endpoint_slots": True,
                "endpoint_props": False,
                "endpoint_metrics": cfg.metrics_enabled,
                "chat_template": CHAT_TEMPLATE,
                "bos_token": "<|begin_of_text|>",
                "eos_token": "<|eot_id|>",
                "build_info": cfg.version,
                "is_sleeping": False,
            }
        )  # fmt: skip

    async def slots(self, request: web.Request) -> web.StreamResponse:
        cfg = self.cfg
        running, _ = self.world.running_snapshot()
        if request.query.get("fail_on_no_slot") == "1" and len(running) >= cfg.max_running:
            return error(Dialect.LLAMACPP, 503, "no slot available")
        by_slot = {r.slot: r for r in running}
        out: list[dict[str, Any]] = []
        for i in range(cfg.max_running):
            req = by_slot.get(i)
            out.append(
                {
                    "id": i,
                    "id_task": req.seq if req else -1,
                    "n_ctx": cfg.max_model_len // max(1, cfg.max_running),
                    "speculative": cfg.spec_enabled,
                    "is_processing": req is not None,
                    "n_prompt_tokens": req.prompt_tokens if req else 0,
                    "n_prompt_tokens_processed": req.prompt_tokens if req else 0,
                    "n_prompt_tokens_cache": 0,
                    "params": self.params(for_slot=True),
                    "prompt": "",
                    "next_token": [
                        {
                            "has_next_token": req is not None,
                            "has_new_line": False,
                            "n_remain": (req.max_tokens - req.generated) if req else -1,
                            "n_decoded": req.generated if req else 0,
                            "stopping_word": "",
                        }
                    ],
                }
            )
        return _json(out)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        if not self.cfg.metrics_enabled:
            return error(
                Dialect.LLAMACPP,
                501,
                "This server does not support metrics endpoint. Start it with `--metrics`",
            )
        return await self.common.metrics(request)

    def timings(
        self, req: SimRequest, total: int, t_last: float | None, ev: TokenEvent | None = None
    ) -> dict[str, Any]:
        """``timings`` after ``total`` tokens (server-common.cpp ``to_json``, or older builds)."""
        prompt_ms = req.prefill_s * 1000.0
        first = req.t_first if req.t_first is not None else req.t_arrival
        last = t_last if t_last is not None else first
        predicted_ms = max(0.0, (last - first) * 1000.0)
        if self.cfg.llamacpp_new:
            per_token = predicted_ms / (total - 1) if total > 1 else None
            per_second = (total - 1) / predicted_ms * 1000.0 if predicted_ms > 0 else None
        else:
            per_token = predicted_ms / total if total else None
            per_second = total / predicted_ms * 1000.0 if predicted_ms > 0 else None
        out: dict[str, Any] = {
            "cache_n": 0,
            "prompt_n": req.prompt_tokens,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / req.prompt_tokens,
            "prompt_per_second": req.prompt_tokens / prompt_ms * 1000.0 if prompt_ms else None,
            "predicted_n": total,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per_token,
            "predicted_per_second": per_second,
        }
        proposed, accepted = (ev.proposed, ev.accepted) if ev else (req.proposed, req.accepted)
        if proposed > 0:
            out["draft_n"] = proposed
            out["draft_n_accepted"] = accepted
        return out

    def _submit(self, request: web.Request, body: dict[str, Any], prompt_tokens: int) -> SimRequest:
        n = _int(body.get("n_predict", body.get("max_tokens")), -1)
        if n < 0:
            n = UNBOUNDED_CAP
        return self.common.submit(
            prompt_tokens, n, bool(body.get("ignore_eos", False)), request.path,
            bool(body.get("stream", False)),
        )  # fmt: skip

    def _final_native(self, req: SimRequest, content: str) -> dict[str, Any]:
        return {
            "index": 0,
            "content": content,
            "tokens": [] if not content else [token_id(req, i) for i in range(req.generated)],
            "id_slot": req.slot,
            "stop": True,
            "model": self.cfg.model,
            "tokens_predicted": req.generated,
            "tokens_evaluated": req.prompt_tokens,
            "generation_settings": self.params(for_slot=True),
            "prompt": "",
            "has_new_line": False,
            "truncated": False,
            "stop_type": "eos" if req.finish_reason == "stop" else "limit",
            "stopping_word": "",
            "tokens_cached": req.prompt_tokens + req.generated,
            "timings": self.timings(req, req.generated, req.t_last),
        }

    async def completion(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        req = self._submit(request, body, count_prompt_tokens(body.get("prompt", "")))
        per_token_timings = bool(body.get("timings_per_token", False))
        if not bool(body.get("stream", False)):
            await self.world.wait_done(req)
            return _json(self._final_native(req, text_range(req, 0, req.generated)))

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            ev = events[0]
            i = ev.total - 1
            chunk: dict[str, Any] = {
                "index": 0,
                "content": token_text(req, i),
                "tokens": [token_id(req, i)],
                "stop": False,
                "id_slot": req.slot,
                "tokens_predicted": ev.total,
                "tokens_evaluated": req.prompt_tokens,
            }
            if per_token_timings:
                chunk["timings"] = self.timings(req, ev.total, ev.t, ev)
            return [_sse(chunk)]

        return await self.server.stream(
            request, req, group, lambda: [_sse(self._final_native(req, ""))], per_token=True
        )

    async def oai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._oai(request, chat=False)

    async def oai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._oai(request, chat=True)

    async def _oai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        cfg = self.cfg
        body = await _body(request)
        if chat:
            prompt_tokens = chat_prompt_tokens(body.get("messages"))
            body.setdefault("max_tokens", body.get("max_completion_tokens"))
        else:
            prompt_tokens = count_prompt_tokens(body.get("prompt", ""))
        req = self._submit(request, body, prompt_tokens)
        per_token_timings = bool(body.get("timings_per_token", False))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
        rid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(self.world.unix_time(req.t_arrival))

        def usage() -> dict[str, Any]:
            return {
                "completion_tokens": req.generated,
                "prompt_tokens": req.prompt_tokens,
                "total_tokens": req.prompt_tokens + req.generated,
            }

        def env(choices: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "choices": choices,
                "created": created,
                "id": rid,
                "model": cfg.model,
                "system_fingerprint": cfg.version,
                "object": obj,
            }

        if not bool(body.get("stream", False)):
            await self.world.wait_done(req)
            text = text_range(req, 0, req.generated)
            choice: dict[str, Any] = {"index": 0, "finish_reason": _oai_finish(req)}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
                choice["logprobs"] = None
            full = env([choice])
            full["object"] = "chat.completion" if chat else "text_completion"
            full["usage"] = usage()
            full["timings"] = self.timings(req, req.generated, req.t_last)
            return _json(full)

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            ev = events[0]
            text = token_text(req, ev.total - 1)
            if chat:
                ch: dict[str, Any] = {"finish_reason": None, "index": 0, "delta": {"content": text}}
            else:
                ch = {"text": text, "index": 0, "logprobs": None, "finish_reason": None}
            chunk = env([ch])
            if per_token_timings:
                chunk["timings"] = self.timings(req, ev.total, ev.t, ev)
            return [_sse(chunk)]

        def tail() -> list[bytes]:
            if chat:
                ch: dict[str, Any] = {"finish_reason": _oai_finish(req), "index": 0, "delta": {}}
            else:
                ch = {"text": "", "index": 0, "logprobs": None, "finish_reason": _oai_finish(req)}
            final = env([ch])
            if not chat:
                final["usage"] = usage()
            final["timings"] = self.timings(req, req.generated, req.t_last)
            out = [_sse(final)]
            if chat and include_usage:
                u = env([])
                u["usage"] = usage()
                out.append(_sse(u))
            out.append(DONE)
            return out

        head = None
        if chat:
            head = [_sse(env([{"finish_reason": None, "index": 0,
                               "delta": {"role": "assistant", "content": None}}]))]  # fmt: skip
        return await self.server.stream(request, req, group, tail, per_token=True, head=head)


# --- generic OpenAI-compatible -------------------------------------------------------------


class _Generic:
    def __init__(self, server: SimServer, common: _Common) -> None:
        self.common = common

    def mount(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)

    async def models(self, request: web.Request) -> web.StreamResponse:
        return _json({"object": "list", "data": [self.common.model_card("organization-owner")]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.common.openai(request, chat=True)
