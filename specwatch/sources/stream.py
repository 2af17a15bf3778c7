"""Active stream: one streamed generation, timed per chunk, with exact token counts.

Tokens are counted by the best means each dialect offers, never by counting chunks:

- SGLang: native ``/generate``, cumulative ``meta_info.completion_tokens`` in every chunk; the
  final chunk carries the per-request speculative fields (names per version).
- vLLM: ``/v1/completions`` with ``stream_options.include_usage`` and
  ``continuous_usage_stats``: cumulative ``usage.completion_tokens`` in every chunk.
- llama.cpp: native ``/completion`` with ``timings_per_token``: one token per event
  (``tokens_predicted``), events of one verify step arrive as a burst; final ``timings``.
- Any other OpenAI-compatible server: the final ``usage`` only; per-chunk counts are then
  estimated from the text length and the result says so (``counts_exact=False``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from specwatch.core.server import ChunkArrival, Dialect, ServerInfo, StreamResult
from specwatch.core.values import as_float, as_int
from specwatch.sources.client import ServerClient, ServerError
from specwatch.sources.endpoint import redact

GAP_FLOOR_S = 1e-6
"""Gaps below this (simultaneous events) count as this, so their logarithm is finite."""
BURST_MAX_S = 2e-3
"""A gap inside one verify step's burst of events is never longer than this."""
BURST_SEPARATION = 10.0
"""The burst gaps and the step gaps must differ by this factor (geometric means) to be split."""

_SGLANG_SPEC_PREFIX = "spec_"


@dataclass(slots=True)
class _Acc:
    """What arrived so far."""

    t0: float
    clock: Callable[[], float]
    on_chunk: Callable[[ChunkArrival], None] | None
    arrivals: list[ChunkArrival] = field(default_factory=list)
    count: int = 0
    chars: list[int] = field(default_factory=list)
    """Cumulative text length at each arrival (only for estimated counts)."""
    text_chars: int = 0
    prompt_tokens: int | None = None
    final_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False
    server_stats: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    garbage: int = 0
    first_garbage: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    exact: bool = True
    count_source: str = ""

    def reject(self, line: str) -> None:
        """Count a line that is not a JSON event (the first one is shown in the error)."""
        self.garbage += 1
        self.first_garbage = self.first_garbage or line

    def arrive(self, t: float, count: int) -> None:
        if count <= self.count:
            return
        self.count = count
        chunk = ChunkArrival(t=t - self.t0, tokens=count)
        self.arrivals.append(chunk)
        self.chars.append(self.text_chars)
        if self.on_chunk is not None:
            self.on_chunk(chunk)


def _finish_type(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        kind = value.get("type")
        return str(kind) if kind is not None else None
    return str(value)


# --- per-dialect request bodies and chunk handlers --------------------------------------------


def _sglang_request(
    prompt: str, max_tokens: int, temperature: float, ignore_eos: bool
) -> dict[str, Any]:
    return {
        "text": prompt,
        "sampling_params": {
            "max_new_tokens": max_tokens,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
        },
        "stream": True,
    }


def _sglang_chunk(acc: _Acc, obj: Mapping[str, Any], t: float) -> None:
    meta = obj.get("meta_info")
    if not isinstance(meta, Mapping):
        return
    prompt = as_int(meta.get("prompt_tokens"))
    if prompt is not None:
        acc.prompt_tokens = prompt
    count = as_int(meta.get("completion_tokens"))
    if count is not None:
        acc.arrive(t, count)
    reason = _finish_type(meta.get("finish_reason"))
    if reason is not None:
        acc.finish_reason = reason
        acc.final_tokens = count
        for key, value in meta.items():
            if key.startswith(_SGLANG_SPEC_PREFIX) or key in ("e2e_latency", "cached_tokens"):
                acc.server_stats[key] = value


def _openai_request(
    info: ServerInfo,
    prompt: str,
    max_tokens: int,
    temperature: float,
    ignore_eos: bool,
    continuous: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if info.model:
        body["model"] = info.model
    if continuous:
        body["stream_options"]["continuous_usage_stats"] = True
    if ignore_eos and info.dialect in (Dialect.VLLM, Dialect.SGLANG, Dialect.LLAMACPP):
        body["ignore_eos"] = True
    return body


def _openai_chunk(acc: _Acc, obj: Mapping[str, Any], t: float) -> None:
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
        # a placeholder count: rescaled by the final usage in _estimate_counts
        acc.arrive(t, acc.count + 1)


def _llamacpp_request(
    prompt: str, max_tokens: int, temperature: float, ignore_eos: bool
) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "n_predict": max_tokens,
        "temperature": temperature,
        "stream": True,
        "timings_per_token": True,
        "ignore_eos": ignore_eos,
    }


def _llamacpp_chunk(acc: _Acc, obj: Mapping[str, Any], t: float) -> None:
    timings = obj.get("timings")
    if isinstance(timings, Mapping):
        acc.server_stats["timings"] = dict(timings)
    evaluated = as_int(obj.get("tokens_evaluated"))
    if evaluated is not None:
        acc.prompt_tokens = evaluated
    tokens = obj.get("tokens")
    new = len(tokens) if isinstance(tokens, list) else 0
    predicted = as_int(obj.get("tokens_predicted"))
    if predicted is not None:
        count = predicted
    elif new:
        count = acc.count + new
        acc.count_source = "tokens (one per event)"
    elif isinstance(timings, Mapping) and (final := as_int(timings.get("predicted_n"))) is not None:
        count = final
    else:
        count = acc.count
    acc.arrive(t, count)
    if obj.get("stop") is True:
        acc.done = True
        acc.final_tokens = count
        stop_type = obj.get("stop_type")
        acc.finish_reason = "length" if stop_type == "limit" else str(stop_type or "stop")


# --- the stream -------------------------------------------------------------------------------


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
) -> StreamResult:
    """Stream one generation and measure it.

    Never raises for server faults: a refused connection, an error status, a dropped or hung
    stream or garbage lines set ``StreamResult.error`` (one line) and keep what arrived.

    Args:
        client: The server's client (its timeout bounds each read).
        info: From :func:`specwatch.sources.detect.detect`; picks the endpoint and format.
        prompt: The prompt text.
        max_tokens: Tokens to generate.
        temperature: Sampling temperature.
        ignore_eos: Ask the server to run to ``max_tokens`` where it supports that.
        clock: Seconds; arrival times are measured with it.
        on_chunk: Called with each chunk that carried new tokens, as it arrives.
    """
    t0 = clock()
    acc = _Acc(t0=t0, clock=clock, on_chunk=on_chunk)
    dialect = info.dialect
    if dialect is Dialect.SGLANG:
        acc.count_source = "meta_info.completion_tokens"
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("/generate", _sglang_request(prompt, max_tokens, temperature, ignore_eos))
        ]
        handler: Callable[[_Acc, Mapping[str, Any], float], None] = _sglang_chunk
    elif dialect is Dialect.LLAMACPP:
        acc.count_source = "tokens_predicted (timings_per_token)"
        attempts = [("/completion", _llamacpp_request(prompt, max_tokens, temperature, ignore_eos))]
        handler = _llamacpp_chunk
    else:
        continuous = dialect is Dialect.VLLM
        acc.count_source = (
            "usage.completion_tokens (continuous_usage_stats)" if continuous else "final usage"
        )
        body = _openai_request(info, prompt, max_tokens, temperature, ignore_eos, continuous)
        attempts = [("/v1/completions", body)]
        if dialect is Dialect.OPENAI:
            chat = {k: v for k, v in body.items() if k != "prompt"}
            chat["messages"] = [{"role": "user", "content": prompt}]
            attempts.append(("/v1/chat/completions", chat))
        handler = _openai_chunk
    for index, (path, payload) in enumerate(attempts):
        try:
            await _run(client, path, payload, handler, acc)
        except ServerError as exc:
            if exc.status in (404, 405) and index + 1 < len(attempts):
                continue
            acc.errors.append(str(exc))
        break
    return _result(acc, info, clock() - t0)


async def _run(
    client: ServerClient,
    path: str,
    payload: dict[str, Any],
    handler: Callable[[_Acc, Mapping[str, Any], float], None],
    acc: _Acc,
) -> None:
    url = client.endpoint.url(path)
    async with client.stream_post(path, payload) as response:
        try:
            async for line in response.aiter_lines():
                t = acc.clock()
                _line(acc, line, t, handler, client)
                if acc.done:
                    break
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
    acc: _Acc,
    line: str,
    t: float,
    handler: Callable[[_Acc, Mapping[str, Any], float], None],
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


def quantile(values: list[float], q: float) -> float | None:
    """Linear-interpolated quantile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def group_bursts(
    times: list[float], threshold_s: float | None = None, steps: int | None = None
) -> list[int]:
    """Indexes of ``times`` where a new step starts; the events of one step's burst merge.

    Args:
        times: Arrival times of successive events.
        threshold_s: Gaps above this start a new step.
        steps: The number of steps after the first event when the server says so (llama.cpp
            ``predicted_n - 1 - draft_n_accepted``): the ``steps`` longest gaps start them.

    Without either, the gaps are split in two clusters on a log scale (burst gaps of a few
    microseconds, step gaps of milliseconds); when no such split exists (no speculation) every
    event is its own step.
    """
    if not times:
        return []
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if steps is not None and 0 < steps <= len(gaps):
        longest = sorted(range(len(gaps)), key=lambda i: gaps[i], reverse=True)[:steps]
        return [0, *sorted(i + 1 for i in longest)]
    if threshold_s is None:
        threshold_s = _burst_threshold(gaps)
    starts = [0]
    for i, gap in enumerate(gaps, start=1):
        if gap > threshold_s:
            starts.append(i)
    return starts


def _burst_threshold(gaps: list[float]) -> float:
    """The best two-cluster split of the log gaps (Otsu), or ``-1`` (no split) if unclear."""
    if len(gaps) < 2:
        return -1.0
    logs = sorted(math.log(max(g, GAP_FLOOR_S)) for g in gaps)
    n = len(logs)
    prefix = [0.0]
    prefix_sq = [0.0]
    for v in logs:
        prefix.append(prefix[-1] + v)
        prefix_sq.append(prefix_sq[-1] + v * v)
    best: tuple[float, int] | None = None
    for k in range(1, n):
        if logs[k] == logs[k - 1]:
            continue
        lo_sum, hi_sum = prefix[k], prefix[n] - prefix[k]
        cost = (prefix_sq[k] - lo_sum * lo_sum / k) + (
            prefix_sq[n] - prefix_sq[k] - hi_sum * hi_sum / (n - k)
        )
        if best is None or cost < best[0]:
            best = (cost, k)
    if best is None:
        return -1.0
    k = best[1]
    lo_mean = prefix[k] / k
    hi_mean = (prefix[n] - prefix[k]) / (n - k)
    if math.exp(logs[k - 1]) > BURST_MAX_S or hi_mean - lo_mean < math.log(BURST_SEPARATION):
        return -1.0
    return math.exp((logs[k - 1] + logs[k]) / 2)


def _estimate_counts(acc: _Acc) -> list[ChunkArrival]:
    """Rescale placeholder per-chunk counts to the final usage, by text length."""
    total = acc.final_tokens
    if total is None:
        total = max(1, round(acc.text_chars / 4)) if acc.text_chars else 0
        acc.notes["completion_tokens"] = (
            "the server sent no usage: estimated from the text length (about 4 characters a token)"
        )
    chars_total = acc.chars[-1] if acc.chars and acc.chars[-1] > 0 else 0
    out: list[ChunkArrival] = []
    last = 0
    for i, chunk in enumerate(acc.arrivals):
        if chars_total:
            est = round(total * acc.chars[i] / chars_total)
        else:
            est = round(total * (i + 1) / len(acc.arrivals))
        est = max(est, last + 1 if last < total else last, 1)
        est = min(est, total) if total else est
        last = est
        out.append(ChunkArrival(t=chunk.t, tokens=est))
    acc.final_tokens = total
    return out


def _result(acc: _Acc, info: ServerInfo, wall_s: float) -> StreamResult:
    notes = acc.notes
    arrivals = acc.arrivals
    exact = acc.exact and bool(arrivals or acc.final_tokens is not None)
    if not acc.exact and arrivals:
        arrivals = _estimate_counts(acc)
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
    burst = info.dialect in (Dialect.LLAMACPP, Dialect.OPENAI)
    server_steps = _llamacpp_decode_steps(acc.server_stats) if burst else None
    if server_steps is not None and not 0 < server_steps < len(times):
        server_steps = None
    starts = group_bursts(times, steps=server_steps) if burst else list(range(len(times)))
    step_times = [times[i] for i in starts]
    gaps = [b - a for a, b in itertools.pairwise(step_times)]
    steps = len(gaps) if gaps else None
    tokens_per_step = (completion - first_tokens) / len(gaps) if gaps else None
    if not burst and info.dialect in (Dialect.SGLANG, Dialect.VLLM):
        notes.setdefault(
            "steps",
            "one chunk per engine step; chunks the client fell behind on are merged by the "
            "server, so steps can be undercounted",
        )
    elif burst and gaps and server_steps is not None:
        notes.setdefault(
            "steps",
            "the server's decode-step count (timings) with the longest gaps as step boundaries",
        )
    elif burst and gaps:
        notes.setdefault("steps", "bursts of events (microseconds apart) grouped into one step")
    stats = dict(acc.server_stats)
    accept_length, rate = _spec_figures(info, acc, stats, completion, notes)
    if accept_length is None and tokens_per_step is not None and exact and info.spec.enabled:
        accept_length = tokens_per_step
        notes.setdefault("accept_length", "from tokens per observed step (the server reports none)")
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


def _llamacpp_decode_steps(stats: Mapping[str, Any]) -> int | None:
    """``predicted_n - 1 - draft_n_accepted`` from llama.cpp's final timings."""
    timings = stats.get("timings")
    if not isinstance(timings, Mapping):
        return None
    n = as_int(timings.get("predicted_n"))
    if n is None:
        return None
    return n - 1 - (as_int(timings.get("draft_n_accepted")) or 0)


def _spec_figures(
    info: ServerInfo,
    acc: _Acc,
    stats: dict[str, Any],
    completion: int,
    notes: dict[str, str],
) -> tuple[float | None, float | None]:
    """The server's own per-request accept length and draft acceptance rate."""
    if info.dialect is Dialect.SGLANG:
        return _sglang_spec(info, stats, completion, notes)
    if info.dialect is Dialect.LLAMACPP or "timings" in stats:
        return _llamacpp_spec(stats, notes)
    spec = stats.get("speculative_decoding")
    if isinstance(spec, Mapping):
        return as_float(spec.get("mean_acceptance_length")), as_float(
            spec.get("draft_acceptance_rate")
        )
    if info.dialect is Dialect.VLLM:
        why = (
            "vLLM reports per-request speculative stats only with --enable-per-request-metrics "
            "and --per-request-spec-decode-metrics (0.33+)"
        )
        notes.setdefault("draft_acceptance_rate", why)
    else:
        notes.setdefault("draft_acceptance_rate", "the server reports no speculative stats")
        notes.setdefault("accept_length", "the server reports no speculative stats")
    return None, None


def _sglang_spec(
    info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
) -> tuple[float | None, float | None]:
    verify = as_float(stats.get("spec_verify_ct"))
    length = as_float(stats.get("spec_accept_length"))
    if length is None and verify:
        length = completion / verify
        stats["spec_accept_length_derived"] = length
    if length is not None:
        notes.setdefault(
            "accept_length",
            "SGLang's per-request figure completion_tokens / spec_verify_ct counts the prefill "
            "token (overstates by 1/spec_verify_ct)",
        )
    else:
        notes.setdefault(
            "accept_length",
            "speculative decoding is off"
            if info.spec.enabled is False
            else "this SGLang version reports no per-request speculative stats",
        )
    correct = as_float(stats.get("spec_num_correct_drafts", stats.get("spec_accepted_drafts")))
    proposed = as_float(stats.get("spec_num_proposed_drafts", stats.get("spec_proposed_drafts")))
    if correct is not None and proposed:
        return length, correct / proposed
    accepted = as_float(stats.get("spec_accept_token_num"))
    drafted = as_float(stats.get("spec_draft_token_num"))
    if accepted is not None and drafted:
        return length, accepted / drafted
    reported = as_float(stats.get("spec_accept_rate"))
    if reported is not None:
        notes.setdefault(
            "draft_acceptance_rate",
            "SGLang 0.5.4's spec_accept_rate = accepted / (verify steps × num_steps)",
        )
        return length, reported
    if length is not None:
        notes.setdefault("draft_acceptance_rate", "this SGLang version reports no per-request rate")
    return length, None


def _llamacpp_spec(
    stats: dict[str, Any], notes: dict[str, str]
) -> tuple[float | None, float | None]:
    timings = stats.get("timings")
    if not isinstance(timings, Mapping):
        notes.setdefault("draft_acceptance_rate", "no timings in the final response")
        return None, None
    n = as_float(timings.get("predicted_n"))
    ms = as_float(timings.get("predicted_ms"))
    draft_n = as_float(timings.get("draft_n"))
    accepted = as_float(timings.get("draft_n_accepted"))
    steps = None
    if n is not None:
        steps = n - 1 - (accepted or 0.0)
        if steps > 0 and ms is not None:
            stats["step_latency_s"] = ms / 1000.0 / steps
            stats["decode_steps"] = int(steps)
    if draft_n is None or accepted is None:
        why = "no draft_n in timings: this request did not speculate"
        notes.setdefault("draft_acceptance_rate", why)
        notes.setdefault("accept_length", why)
        return None, None
    rate = accepted / draft_n if draft_n > 0 else None
    length = (n - 1) / steps if n is not None and steps and steps > 0 else None
    notes.setdefault(
        "accept_length",
        "realized tokens per decode step from timings: (predicted_n − 1) / "
        "(predicted_n − 1 − draft_n_accepted)",
    )
    return length, rate


__all__ = ["BURST_MAX_S", "group_bursts", "quantile", "stream_completion"]
