"""A generic OpenAI-compatible server, and the completions endpoints SGLang and vLLM share.

:class:`OpenAiDialect` serves ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions``
with no ``/metrics``; SGLang and vLLM subclass it and adjust its payloads through the hooks
below (extra usage and choice fields, continuous usage, per-request metrics).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.engine import SimRequest, TokenEvent
from specwatch.sim.servers.base import (
    DEFAULT_CHAT_TOKENS,
    DEFAULT_COMPLETION_TOKENS,
    DONE,
    SimDialect,
    as_int,
    chat_prompt_tokens,
    count_prompt_tokens,
    json_response,
    oai_finish,
    read_body,
    sse,
    text_range,
)


class OpenAiDialect(SimDialect):
    """A generic OpenAI-compatible server (``ignore_eos`` is not part of that API)."""

    dialect = Dialect.OPENAI
    default_version = "1.0.0"
    preset: ClassVar[Mapping[str, Any]] = {
        "spec_algorithm": "EAGLE3",
        "num_steps": 3,
        "num_draft_tokens": 3,
    }
    honours_ignore_eos: ClassVar[bool] = False
    usage_in_every_chunk: ClassVar[bool] = False
    """Every stream chunk carries a ``usage`` key (``null`` unless continuous usage)."""
    choice_extras: ClassVar[Mapping[str, None]] = {}
    """Fields a streamed choice carries after ``finish_reason``."""

    def mount(self, app: web.Application) -> None:
        """Mount ``/v1/models`` and the completions endpoints."""
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``/v1/completions``."""
        return await self.openai(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``/v1/chat/completions``."""
        return await self.openai(request, chat=True)

    # --- hooks -----------------------------------------------------------------------------

    def model_error(self, model: Any) -> web.Response | None:
        """The answer to a request naming ``model``, when the server refuses it."""
        return None

    def continuous_usage(self, requested: bool, include_usage: bool) -> bool:
        """Whether stream chunks carry running usage (``continuous_usage_stats``)."""
        return False

    def offers_spec_details(self) -> bool:
        """Whether ``return_spec_tokens_details`` adds a speculative-details chunk."""
        return False

    def spec_details(self, req: SimRequest) -> dict[str, Any]:
        """The speculative details of ``req`` (when :meth:`offers_spec_details`)."""
        return {}

    def request_metrics(self, req: SimRequest) -> dict[str, Any] | None:
        """Per-request ``metrics`` added to the final usage, or ``None``."""
        return None

    def usage(self, req: SimRequest, total: int) -> dict[str, Any]:
        """The ``usage`` object after ``total`` completion tokens."""
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + total,
            "completion_tokens": total,
        }

    # --- the endpoint ----------------------------------------------------------------------

    async def openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        """``/v1/completions`` (``chat=False``) or ``/v1/chat/completions``."""
        cfg = self.cfg
        body = await read_body(request)
        refused = self.model_error(body.get("model"))
        if refused is not None:
            return refused
        if chat:
            prompt_tokens = chat_prompt_tokens(body.get("messages"))
            default = DEFAULT_CHAT_TOKENS
            max_tokens = as_int(body.get("max_completion_tokens", body.get("max_tokens")), default)
        else:
            prompt_tokens = count_prompt_tokens(body.get("prompt", ""))
            max_tokens = as_int(body.get("max_tokens"), DEFAULT_COMPLETION_TOKENS)
        ignore_eos = bool(body.get("ignore_eos", False)) and self.honours_ignore_eos
        stream = bool(body.get("stream", False))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage", False))
        continuous = self.continuous_usage(
            bool(opts.get("continuous_usage_stats", False)), include_usage
        )
        spec_details = bool(body.get("return_spec_tokens_details", False)) and (
            self.offers_spec_details()
        )
        req = self.submit(prompt_tokens, max_tokens, ignore_eos, request.path, stream)
        rid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(self.world.unix_time(req.t_arrival))

        def envelope(choices: list[dict[str, Any]], total: int | None) -> dict[str, Any]:
            chunk: dict[str, Any] = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": cfg.model,
                "choices": choices,
            }
            running = continuous and total is not None
            if self.usage_in_every_chunk:
                chunk["usage"] = self.usage(req, total) if running and total is not None else None
            elif running and total is not None:
                chunk["usage"] = self.usage(req, total)
            return chunk

        if not stream:
            await self.world.wait_done(req)
            text = text_range(req, 0, req.generated)
            choice: dict[str, Any] = {"index": 0, "logprobs": None}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            choice["finish_reason"] = oai_finish(req)
            full: dict[str, Any] = {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": cfg.model,
                "choices": [choice],
                "usage": self.usage(req, req.generated),
            }
            metrics = self.request_metrics(req)
            if metrics is not None:
                full["metrics"] = metrics
            return json_response(full)

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
            ch["finish_reason"] = oai_finish(req) if last else None
            ch.update(self.choice_extras)
            return [sse(envelope([ch], end))]

        def tail() -> list[bytes]:
            out: list[bytes] = []
            if spec_details:
                out.append(
                    sse(
                        {
                            "id": rid,
                            "object": obj,
                            "created": created,
                            "model": cfg.model,
                            "choices": [],
                            "sglext": {"spec_tokens_details": self.spec_details(req)},
                        }
                    )
                )
            if include_usage:
                u = envelope([], None)
                u["usage"] = self.usage(req, req.generated)
                metrics = self.request_metrics(req)
                if metrics is not None:
                    u["metrics"] = metrics
                out.append(sse(u))
            out.append(DONE)
            return out

        head: list[bytes] | None = None
        if chat:
            role: dict[str, Any] = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            role["logprobs"] = None
            role["finish_reason"] = None
            head = [sse(envelope([role], 0))]
        return await self.server.stream(request, req, group, tail, head=head)
