"""Active stream: one streamed generation, timed per chunk, with exact token counts.

Tokens are counted by the best means each dialect offers, never by counting chunks: the
dialect module (``sources/dialects/``) builds the request and reads each chunk; this module
runs the stream, parses the SSE lines and turns the arrivals into steps and rates.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import orjson

from specwatch.core.server import ChunkArrival, ServerInfo, StreamResult
from specwatch.sources.dialects.base import StreamRequest, dialect_for
from specwatch.sources.http.client import (
    SSE_LINE_LIMIT_BYTES,
    ServerClient,
    TooLarge,
    bounded_lines,
    deadline_hint,
    run_deadline,
    too_large,
)
from specwatch.sources.http.endpoint import redact
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.stream_steps import (
    TOKENS_PER_STEP_NOTE,
    StreamAccumulator,
    clean_result,
    estimate_counts,
    group_bursts,
    quantile,
    stream_spec_figures,
    token_cap,
)

_Handler = Callable[[StreamAccumulator, Mapping[str, Any], float], None]


async def stream_completion(
    client: ServerClient,
    info: ServerInfo,
    prompt: str,
    max_tokens: int,
    *,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    on_chunk: Callable[[ChunkArrival], None] | None = None,
    deadline_s: float | None = None,
) -> StreamResult:
    """Stream one generation and measure it.

    Never raises for server faults: a refused connection, an error status, a dropped or hung
    stream, garbage lines, a line over 1 MiB, a stream past its deadline or one that goes on
    past ``max_tokens`` (by more than one speculative step) set ``StreamResult.error`` (one
    line) and keep what arrived. Server text in the result is sanitised.

    Args:
        client: The server's client (its timeout bounds each read).
        info: From :func:`specwatch.sources.detect.detect`; picks the endpoint and format.
        prompt: The prompt text.
        max_tokens: Tokens to generate.
        temperature: Sampling temperature.
        ignore_eos: Ask the server to run to ``max_tokens`` where it supports that.
        clock: Seconds; arrival times are measured with it.
        on_chunk: Called with each chunk that carried new tokens, as it arrives.
        deadline_s: Wall-clock limit of the whole stream; ``None``: the client's
            ``deadline_s``, else :func:`~.limits.run_deadline` of ``max_tokens``.
    """
    t0 = clock()
    acc = StreamAccumulator(t0=t0, clock=clock, on_chunk=on_chunk)
    dialect = dialect_for(info.dialect)
    plan = dialect.stream_plan(info, StreamRequest(prompt, max_tokens, temperature, ignore_eos))
    acc.count_source = plan.count_source
    deadline = deadline_s or client.deadline_s or run_deadline(max_tokens)
    cap = token_cap(info, max_tokens)
    for index, (path, payload) in enumerate(plan.attempts):
        try:
            async with asyncio.timeout(deadline):
                await _run(client, path, payload, dialect.parse_chunk, acc, cap)
        except TimeoutError:
            url = client.endpoint.url(path)
            acc.errors.append(
                f"stream from {url} cut: not finished {deadline_hint(deadline)},"
                f" after {acc.count} tokens"
            )
        except ServerError as exc:
            if exc.status in (404, 405) and index + 1 < len(plan.attempts):
                continue
            acc.errors.append(str(exc))
        break
    return clean_result(stream_spec_figures(_result(acc, info, clock() - t0), info, max_tokens))


async def _run(
    client: ServerClient,
    path: str,
    payload: dict[str, Any],
    handler: _Handler,
    acc: StreamAccumulator,
    cap: int,
) -> None:
    url = client.endpoint.url(path)
    async with client.stream_post(path, payload) as response:
        try:
            async for line in bounded_lines(response, SSE_LINE_LIMIT_BYTES):
                t = acc.clock()
                _line(acc, line, t, handler, client)
                if max(acc.count, acc.final_tokens or 0) > cap:
                    acc.errors.append(
                        f"stream from {url} cut after {max(acc.count, acc.final_tokens or 0)}"
                        f" tokens: more than max_tokens plus one speculative step ({cap});"
                        " the server ignores max_tokens?"
                    )
                    acc.arrivals = [a for a in acc.arrivals if a.tokens <= cap]
                    acc.chars = acc.chars[: len(acc.arrivals)]
                    acc.count = acc.arrivals[-1].tokens if acc.arrivals else 0
                    acc.final_tokens = None
                    return
                if acc.done:
                    break
        except TooLarge as exc:
            acc.errors.append(
                too_large(f"one event of the stream from {url}", exc.size, exc.limit)
                + f" after {acc.count} tokens"
            )
            return
        except (httpx.HTTPError, OSError) as exc:
            err = client.error_for(exc, path)
            if err.kind == "hung":
                acc.errors.append(
                    f"stream from {url} stalled: no data for {client.timeout_s:g} s after "
                    f"{acc.count} tokens (server hung?)"
                )
            elif err.kind == "closed":
                acc.errors.append(
                    f"stream from {url} dropped by the server after {acc.count} tokens"
                )
            else:
                acc.errors.append(f"{err} (after {acc.count} tokens)")
            return
    if not acc.done and acc.finish_reason is None:
        acc.errors.append(
            f"stream from {url} ended before its final chunk after {acc.count} tokens"
        )
    if acc.garbage:
        shown = (
            acc.first_garbage if len(acc.first_garbage) <= 40 else acc.first_garbage[:37] + "..."
        )
        acc.errors.append(
            redact(
                f"{acc.garbage} unparseable line(s) in the stream from {url} (first: {shown!r})",
                client.endpoint,
            )
        )


def _line(
    acc: StreamAccumulator,
    line: str,
    t: float,
    handler: _Handler,
    client: ServerClient,
) -> None:
    text = line.strip()
    if not text or text.startswith((":", "event:", "id:", "retry:")):
        return
    if not text.startswith("data:"):
        acc.reject(text)
        return
    data = text[5:].strip()
    if data == "[DONE]":
        acc.done = True
        return
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        acc.reject(text)
        return
    if not isinstance(obj, Mapping):
        acc.reject(text)
        return
    error = obj.get("error")
    if error:
        message = error.get("message") if isinstance(error, Mapping) else error
        acc.errors.append(
            redact(f"the server reported an error mid-stream: {message}", client.endpoint)
        )
        acc.done = True
        return
    handler(acc, obj, t)


# --- results ----------------------------------------------------------------------------------


def _result(acc: StreamAccumulator, info: ServerInfo, wall_s: float) -> StreamResult:
    notes = acc.notes
    arrivals = acc.arrivals
    exact = acc.exact and bool(arrivals or acc.final_tokens is not None)
    if not acc.exact and arrivals:
        arrivals = estimate_counts(acc)
        notes["counts"] = (
            "this server gives no per-chunk token counts: per-chunk counts are estimated from "
            "the text and the final usage"
        )
        exact = False
    completion = acc.final_tokens if acc.final_tokens is not None else acc.count
    if arrivals and completion < arrivals[-1].tokens:
        completion = arrivals[-1].tokens
    ttft = arrivals[0].t if arrivals else None
    decode_s = arrivals[-1].t - arrivals[0].t if len(arrivals) > 1 else None
    first_tokens = arrivals[0].tokens if arrivals else 0
    decode_tok_s = (
        (completion - first_tokens) / decode_s if decode_s is not None and decode_s > 0 else None
    )
    if acc.errors and not arrivals:
        notes.setdefault("ttft_s", "no token arrived")
    # steps: one chunk per engine step (SGLang, vLLM); bursts of events (llama.cpp, others)
    times = [c.t for c in arrivals]
    dialect = dialect_for(info.dialect)
    burst = dialect.stream_in_bursts
    server_steps = dialect.server_decode_steps(acc.server_stats)
    if server_steps is not None and not 0 < server_steps < len(times):
        server_steps = None
    starts = group_bursts(times, steps=server_steps) if burst else list(range(len(times)))
    step_times = [times[i] for i in starts]
    gaps = [b - a for a, b in itertools.pairwise(step_times)]
    steps = len(gaps) if gaps else None
    tokens_per_step = (completion - first_tokens) / len(gaps) if gaps else None
    step_note = dialect.step_note()
    if not burst and step_note is not None:
        notes.setdefault("steps", step_note)
    elif burst and gaps and server_steps is not None:
        notes.setdefault(
            "steps",
            "the server's decode-step count (timings) with the longest gaps as step boundaries",
        )
    elif burst and gaps:
        notes.setdefault("steps", "bursts of events (microseconds apart) grouped into one step")
    stats = dict(acc.server_stats)
    accept_length, rate = dialect.spec_figures(info, stats, completion, notes)
    if accept_length is None and tokens_per_step is not None and exact and info.spec.enabled:
        accept_length = tokens_per_step
        notes.setdefault("accept_length", TOKENS_PER_STEP_NOTE)
    error = "; ".join(acc.errors) if acc.errors else None
    return StreamResult(
        completion_tokens=completion,
        prompt_tokens=acc.prompt_tokens,
        wall_s=wall_s,
        ttft_s=ttft,
        decode_s=decode_s,
        tok_s=completion / wall_s if wall_s > 0 and completion else None,
        decode_tok_s=decode_tok_s,
        counts_exact=exact,
        count_source=acc.count_source,
        chunks=tuple(arrivals),
        steps=steps,
        step_latency_mean_s=sum(gaps) / len(gaps) if gaps else None,
        step_latency_p50_s=quantile(gaps, 0.5),
        step_latency_p90_s=quantile(gaps, 0.9),
        step_latency_p99_s=quantile(gaps, 0.99),
        tokens_per_step=tokens_per_step,
        accept_length=accept_length,
        draft_acceptance_rate=rate,
        server_stats=stats,
        finish_reason=acc.finish_reason,
        error=error,
        notes=notes,
    )


__all__ = ["stream_completion"]
