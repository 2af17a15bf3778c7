"""Any other OpenAI-compatible server, and the OpenAI streaming protocol others reuse.

Only the final ``usage`` gives a token count; per-chunk counts are then estimated from the text
length and the result says so (``counts_exact=False``). Its metrics are not understood.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.core.values import as_int
from specwatch.sources.dialects.base import (
    ONE_CHUNK_PER_STEP,
    ServerDialect,
    StreamPlan,
    StreamRequest,
)
from specwatch.sources.identity.server_queries import scrape_metrics
from specwatch.sources.stream_steps import StreamAccumulator

if TYPE_CHECKING:
    from specwatch.sources.dialects.base import WindowBuilder
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

_NOT_UNDERSTOOD = "a generic OpenAI-compatible server's metrics are not understood"


def completions_request(
    info: ServerInfo, request: StreamRequest, *, continuous: bool, ignore_eos_field: bool
) -> dict[str, Any]:
    """A streamed ``/v1/completions`` body asking for usage (per chunk with ``continuous``)."""
    body: dict[str, Any] = {
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if info.model:
        body["model"] = info.model
    if continuous:
        body["stream_options"]["continuous_usage_stats"] = True
    if request.ignore_eos and ignore_eos_field:
        body["ignore_eos"] = True
    return body


class ContinuousUsageStreams:
    """Streams of ``/v1/completions`` with continuous usage stats, as vLLM and TensorRT-LLM
    (which serves vLLM's protocol) answer them: one chunk per engine step, each with the
    cumulative ``usage.completion_tokens``."""

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """``/v1/completions`` with continuous usage stats."""
        body = completions_request(info, request, continuous=True, ignore_eos_field=True)
        return StreamPlan(
            attempts=(("/v1/completions", body),),
            count_source="usage.completion_tokens (continuous_usage_stats)",
        )

    def parse_chunk(self, acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
        """An OpenAI chunk (vLLM 0.33 adds ``metrics`` with per-request metrics)."""
        parse_openai_chunk(acc, obj, t)

    def step_note(self) -> str | None:
        """One chunk per engine step."""
        return ONE_CHUNK_PER_STEP


def parse_openai_chunk(acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
    """Read one ``/v1/completions`` or ``/v1/chat/completions`` chunk."""
    text = ""
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = choices[0]
        delta = choice.get("delta")
        raw = choice.get("text")
        if raw is None and isinstance(delta, Mapping):
            raw = delta.get("content")
        text = raw if isinstance(raw, str) else ""
        reason = choice.get("finish_reason")
        if reason is not None:
            acc.finish_reason = str(reason)
    acc.text_chars += len(text)
    usage = obj.get("usage")
    count = None
    if isinstance(usage, Mapping):
        count = as_int(usage.get("completion_tokens"))
        prompt = as_int(usage.get("prompt_tokens"))
        if prompt is not None:
            acc.prompt_tokens = prompt
        if count is not None:
            acc.final_tokens = count
    metrics = obj.get("metrics")
    if isinstance(metrics, Mapping):  # vLLM >= 0.33 with --enable-per-request-metrics
        acc.server_stats.update(metrics)
    timings = obj.get("timings")
    if isinstance(timings, Mapping):  # llama.cpp's OpenAI endpoints add these
        acc.server_stats["timings"] = dict(timings)
    if count is not None and acc.exact and (text or count > acc.count):
        acc.arrive(t, count)
    elif text:
        acc.exact = False
        # a placeholder count: rescaled by the final usage in stream_steps.estimate_counts
        acc.arrive(t, acc.count + 1)


class OpenAIDialect(ServerDialect):
    """A generic OpenAI-compatible server: the fallback when nothing else is recognised."""

    dialect = Dialect.OPENAI
    fingerprint_order = 1000
    stream_in_bursts = True

    async def recognize(self, client: ServerClient) -> bool:
        """Always: every server that answers ``/v1/models`` is at least this."""
        return True

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Only ``/metrics`` is asked; version and speculative setup stay unknown."""
        status, scrape, detail = await scrape_metrics(client)
        metrics_enabled: bool | None
        if scrape is not None and scrape.samples:
            metrics_enabled, reason = True, None
        elif status in (404, 405, 501):
            metrics_enabled, reason = False, "this server has no /metrics endpoint"
        else:
            metrics_enabled, reason = False, detail or "no usable /metrics"
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.OPENAI,
            model=model,
            spec=SpecConfig(enabled=None, source=""),
            metrics_enabled=metrics_enabled,
            metrics_reason=reason,
            max_model_len=max_len,
            notes={
                "speculative": "unknown: a generic OpenAI-compatible server does not expose it",
                "version": "unknown: a generic OpenAI-compatible server does not expose it",
            },
        )

    def derive_window(
        self, b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
    ) -> None:
        """Nothing: the metrics of an unknown server are not understood."""
        for name in ("gen_tok_s", "accept_length", "draft_acceptance_rate", "step_latency_s"):
            b.note(name, _NOT_UNDERSTOOD)

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """``/v1/completions``, then ``/v1/chat/completions`` when that path is missing."""
        body = completions_request(info, request, continuous=False, ignore_eos_field=False)
        chat = {k: v for k, v in body.items() if k != "prompt"}
        chat["messages"] = [{"role": "user", "content": request.prompt}]
        return StreamPlan(
            attempts=(("/v1/completions", body), ("/v1/chat/completions", chat)),
            count_source="final usage",
        )

    def parse_chunk(self, acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
        """An OpenAI streaming chunk."""
        parse_openai_chunk(acc, obj, t)


DIALECT = OpenAIDialect()

__all__ = ["DIALECT", "OpenAIDialect", "completions_request", "parse_openai_chunk"]
