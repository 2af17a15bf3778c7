"""The simulated llama.cpp ``llama-server``: routes and payloads, build by build.

Its counters and ``/metrics`` names live in :mod:`specwatch.sim.metrics.llamacpp_metrics`. Last
here, the settings and timings it reports: pure functions of the configuration and a request
(the ``generation_settings``/``params`` objects of ``/props``, ``/slots`` and final answers,
and the ``timings`` object of answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.config import SimConfig
from specwatch.sim.engine import SimRequest, TokenEvent
from specwatch.sim.servers.base import (
    DONE,
    UNBOUNDED_CAP,
    SimDialect,
    as_int,
    chat_prompt_tokens,
    count_prompt_tokens,
    json_response,
    oai_finish,
    read_body,
    sse,
    text_range,
    token_id,
    token_text,
)

CHAT_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"


class LlamaCppDialect(SimDialect):
    """llama.cpp's ``llama-server``."""

    dialect = Dialect.LLAMACPP
    default_version = "b6500-0c1e570"
    preset: ClassVar[Mapping[str, Any]] = {
        "spec_algorithm": "draft-simple",
        "num_steps": 3,
        "num_draft_tokens": 3,
        "max_running": 4,
        "draft_skip_share": 0.1,
        "model": "sim-llama-3.1-8b-instruct-q4_k_m.gguf",
    }
    owned_by = "llamacpp"
    listens_while_loading = True

    def mount(self, app: web.Application) -> None:
        """Mount the native and the OpenAI-compatible endpoints."""
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

    @classmethod
    def error(cls, status: int, message: str) -> web.Response:
        """llama-server's ``{"error": {"code", "message", "type"}}``."""
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
        return json_response({"error": {"code": status, "message": message, "type": kind}}, status)

    @classmethod
    def needs_key(cls, path: str) -> bool:
        """Health and model listings are open."""
        return path not in ("/health", "/v1/health", "/models", "/v1/models", "/api/tags")

    async def health(self, request: web.Request) -> web.StreamResponse:
        return json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.StreamResponse:
        """``/v1/models`` in both the Ollama and the OpenAI shape."""
        card = self.model_card()
        card["meta"] = {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072}
        return json_response(
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
        return json_response(
            {
                "default_generation_settings": {
                    "id": 0,
                    "id_task": -1,
                    "n_ctx": cfg.max_model_len,
                    "speculative": False,
                    "is_processing": False,
                    "params": generation_params(self.cfg, for_slot=False),
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
            return self.error(503, "no slot available")
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
                    "params": generation_params(self.cfg, for_slot=True),
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
        return json_response(out)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        if not self.cfg.metrics_enabled:
            return self.error(
                501,
                "This server does not support metrics endpoint. Start it with `--metrics`",
            )
        return await super().metrics(request)

    def metrics_headers(self) -> dict[str, str]:
        """``Process-Start-Time-Unix``, as llama-server sends it."""
        return {"Process-Start-Time-Unix": str(int(self.world.unix_time(self.world.started_at)))}

    def _submit(self, request: web.Request, body: dict[str, Any], prompt_tokens: int) -> SimRequest:
        n = as_int(body.get("n_predict", body.get("max_tokens")), -1)
        if n < 0:
            n = UNBOUNDED_CAP
        return self.submit(
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
            "generation_settings": generation_params(self.cfg, for_slot=True),
            "prompt": "",
            "has_new_line": False,
            "truncated": False,
            "stop_type": "eos" if req.finish_reason == "stop" else "limit",
            "stopping_word": "",
            "tokens_cached": req.prompt_tokens + req.generated,
            "timings": timings(self.cfg, req, req.generated, req.t_last),
        }

    async def completion(self, request: web.Request) -> web.StreamResponse:
        body = await read_body(request)
        req = self._submit(request, body, count_prompt_tokens(body.get("prompt", "")))
        per_token_timings = bool(body.get("timings_per_token", False))
        if not bool(body.get("stream", False)):
            await self.world.wait_done(req)
            return json_response(self._final_native(req, text_range(req, 0, req.generated)))

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
                chunk["timings"] = timings(self.cfg, req, ev.total, ev.t, ev)
            return [sse(chunk)]

        return await self.server.stream(
            request, req, group, lambda: [sse(self._final_native(req, ""))], per_token=True
        )

    async def oai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._oai(request, chat=False)

    async def oai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._oai(request, chat=True)

    async def _oai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        cfg = self.cfg
        body = await read_body(request)
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
            choice: dict[str, Any] = {"index": 0, "finish_reason": oai_finish(req)}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
                choice["logprobs"] = None
            full = env([choice])
            full["object"] = "chat.completion" if chat else "text_completion"
            full["usage"] = usage()
            full["timings"] = timings(self.cfg, req, req.generated, req.t_last)
            return json_response(full)

        def group(events: list[TokenEvent], last: bool) -> list[bytes]:
            ev = events[0]
            text = token_text(req, ev.total - 1)
            if chat:
                ch: dict[str, Any] = {"finish_reason": None, "index": 0, "delta": {"content": text}}
            else:
                ch = {"text": text, "index": 0, "logprobs": None, "finish_reason": None}
            chunk = env([ch])
            if per_token_timings:
                chunk["timings"] = timings(self.cfg, req, ev.total, ev.t, ev)
            return [sse(chunk)]

        def tail() -> list[bytes]:
            if chat:
                ch: dict[str, Any] = {"finish_reason": oai_finish(req), "index": 0, "delta": {}}
            else:
                ch = {"text": "", "index": 0, "logprobs": None, "finish_reason": oai_finish(req)}
            final = env([ch])
            if not chat:
                final["usage"] = usage()
            final["timings"] = timings(self.cfg, req, req.generated, req.t_last)
            out = [sse(final)]
            if chat and include_usage:
                u = env([])
                u["usage"] = usage()
                out.append(sse(u))
            out.append(DONE)
            return out

        head = None
        if chat:
            head = [sse(env([{"finish_reason": None, "index": 0,
                               "delta": {"role": "assistant", "content": None}}]))]  # fmt: skip
        return await self.server.stream(request, req, group, tail, per_token=True, head=head)


# --- what it reports about its settings and timings, build by build ------------------------

SPEC_TYPES = {
    "EAGLE3": "draft-eagle3",
    "EAGLE": "draft-eagle3",
    "NGRAM": "ngram-simple",
    "MTP": "draft-mtp",
    "NEXTN": "draft-mtp",
    "STANDALONE": "draft-simple",
}


def spec_type(cfg: SimConfig) -> str:
    """``speculative.types`` of a drafting slot."""
    algo = cfg.spec_algorithm
    if algo is None:
        return "none"
    return SPEC_TYPES.get(algo.upper(), algo)


def generation_params(cfg: SimConfig, for_slot: bool) -> dict[str, Any]:
    """The generation parameters of a slot (``for_slot``) or of ``/props``."""
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
        p["speculative.types"] = spec_type(cfg) if for_slot else "none"
    else:
        n_max = cfg.num_draft_tokens if (for_slot and cfg.spec_enabled) else 16
        p.update({"speculative.n_max": n_max, "speculative.n_min": 0, "speculative.p_min": 0.75})
    return p


def timings(
    cfg: SimConfig,
    req: SimRequest,
    total: int,
    t_last: float | None,
    ev: TokenEvent | None = None,
) -> dict[str, Any]:
    """``timings`` after ``total`` tokens (server-common.cpp ``to_json``, or older builds)."""
    prompt_ms = req.prefill_s * 1000.0
    first = req.t_first if req.t_first is not None else req.t_arrival
    last = t_last if t_last is not None else first
    predicted_ms = max(0.0, (last - first) * 1000.0)
    if cfg.llamacpp_new:
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
