"""What every simulated server shares: the :class:`SimDialect` base class and payload helpers.

A simulated server is one subclass of :class:`SimDialect` (its routes and payloads, version by
version) plus, when it has a ``/metrics`` endpoint, a :class:`~specwatch.sim.metrics.telemetry.
Telemetry` subclass (its counters and their exposition). The registry in
``specwatch.sim.servers`` maps each :class:`~specwatch.core.server.Dialect` to its subclass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiohttp import web

from specwatch.core.server import Dialect
from specwatch.sim.engine import SimRequest, TokenEvent

if TYPE_CHECKING:
    from specwatch.sim.config import SimConfig
    from specwatch.sim.world import SimWorld

RenderGroup = Callable[[list[TokenEvent], bool], list[bytes]]

DEFAULT_COMPLETION_TOKENS = 16
DEFAULT_CHAT_TOKENS = 1024
UNBOUNDED_CAP = 4096
"""``n_predict: -1`` and the like: stop here rather than at the context length."""

_WORDS = (
    "the", "GPU", "draft", "token", "verify", "accept", "clock", "warm", "batch", "kernel",
    "tensor", "model", "speculative", "decode", "server", "latency", "memory", "stream",
    "throughput", "cache", "and", "of", "a", "to", "in", "is", "with", "for", "on", "it",
)  # fmt: skip

DONE = b"data: [DONE]\n\n"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Host(Protocol):
    """What a simulated server uses of the HTTP server serving it (a ``SimServer``, which picks
    its dialect from the registry: a protocol keeps this module below it)."""

    world: SimWorld
    config: SimConfig
    host: str
    port: int

    async def metrics_body(self) -> bytes: ...

    async def stream(
        self,
        request: web.Request,
        req: SimRequest,
        render_group: RenderGroup,
        tail: Callable[[], list[bytes]],
        *,
        per_token: bool = False,
        head: list[bytes] | None = None,
    ) -> web.StreamResponse: ...


class SimDialect:
    """One imitated server: facts about it (class attributes) and its HTTP handlers.

    Subclasses set the class attributes and implement :meth:`mount`; an instance is bound to
    the :class:`~specwatch.sim.server.SimServer` that serves it.
    """

    dialect: ClassVar[Dialect]
    """The dialect this class imitates (the registry key)."""
    default_version: ClassVar[str]
    """The version imitated when none is given (the newest researched)."""
    preset: ClassVar[Mapping[str, Any]] = {}
    """``SimConfig`` overrides that make a typical deployment of this server."""
    owned_by: ClassVar[str] = "organization-owner"
    """``owned_by`` of the ``/v1/models`` card."""
    listens_while_loading: ClassVar[bool] = False
    """The port answers 503 while the model loads (llama.cpp) instead of refusing
    connections; a restart then only drops connections."""

    def __init__(self, server: Host) -> None:
        self.server = server
        self.world = server.world
        self.cfg = server.config

    def mount(self, app: web.Application) -> None:
        """Mount this server's endpoints on ``app``."""
        raise NotImplementedError

    # --- per-server rules the HTTP plumbing asks about -------------------------------------

    @classmethod
    def error(cls, status: int, message: str) -> web.Response:
        """An error answer shaped the way this server shapes them."""
        return json_response(
            {"error": {"message": message, "type": "invalid_request_error", "code": status}},
            status,
        )

    @classmethod
    def needs_key(cls, path: str) -> bool:
        """Whether ``path`` checks the API key (each server exempts some paths)."""
        return True

    # --- handlers and payloads several servers share ---------------------------------------

    def created(self) -> int:
        """The ``created`` stamp of model cards: the server's start time."""
        return int(self.world.unix_time(self.world.started_at))

    def model_card(self) -> dict[str, Any]:
        """This server's entry in ``/v1/models``."""
        return {
            "id": self.cfg.model,
            "object": "model",
            "created": self.created(),
            "owned_by": self.owned_by,
        }

    async def models(self, request: web.Request) -> web.StreamResponse:
        """``/v1/models``."""
        return json_response({"object": "list", "data": [self.model_card()]})

    def submit(
        self, prompt_tokens: int, max_tokens: int, ignore_eos: bool, endpoint: str, stream: bool
    ) -> SimRequest:
        """Queue a request, its length capped by the context length."""
        cap = max(1, min(max_tokens, self.cfg.max_model_len - prompt_tokens))
        return self.world.submit(
            prompt_tokens, cap, ignore_eos, endpoint=endpoint, streaming=stream
        )

    def metrics_headers(self) -> dict[str, str]:
        """Headers of the ``/metrics`` answer beyond its content type."""
        return {}

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        """``/metrics``: the telemetry's exposition (faults mixed in by the server)."""
        body = await self.server.metrics_body()
        return web.Response(
            body=body,
            headers={"Content-Type": METRICS_CONTENT_TYPE, **self.metrics_headers()},
        )


# --- payload helpers -------------------------------------------------------------------------


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


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer (``json.dumps`` spacing, as the Python servers send)."""
    return web.Response(
        text=json.dumps(data), status=status, content_type="application/json", headers=headers
    )


def fastapi_error(status: int, message: str, body: dict[str, Any]) -> web.Response:
    """An error from a FastAPI server (SGLang, vLLM): its own 401/404/405, else ``body``."""
    if status == 401:
        return json_response({"error": "Unauthorized"}, status)
    if status in (404, 405):
        return json_response({"detail": message}, status)
    return json_response(body, status)


def sse(obj: Any) -> bytes:
    """One server-sent event carrying ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


async def read_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (400 when it is not one)."""
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(text=f"invalid JSON body: {exc}") from exc
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return data


def as_int(value: Any, default: int) -> int:
    """``value`` as an int, ``default`` when missing or not a number."""
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def oai_finish(req: SimRequest) -> str:
    """The OpenAI ``finish_reason`` of a finished request."""
    return "stop" if req.finish_reason == "stop" else ("abort" if req.aborted else "length")
