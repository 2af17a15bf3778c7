"""Server load during a benchmark run, from the deltas of the server's own counters.

The benchmark scrapes ``/metrics`` just before and just after each measured run and keeps the
counter deltas (``RunResult.server_counters``). From them:

- **prompt tok/s**: Δ prompt-token counter / run wall time. It counts every client's prompts,
  so another user of the same server shows up here.
- **mean running requests**, by Little's law: Δ (sum of end-to-end request latencies) / run
  wall time, i.e. request-seconds per second. Only requests that *finished* during the run are
  in the sum: one that started before the run and ended inside it counts whole, one still
  running at the end not at all, so it is an estimate (our own requests count exactly). A
  server without a request-latency histogram (llama.cpp) gives ``None``.

The gauges (``num_requests_running``) are not kept by the runner between scrapes, so the mean
over a run cannot be read from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PROMPT_TOKEN_COUNTERS = (
    "vllm:prompt_tokens_total",
    "sglang:prompt_tokens_total",
    "llamacpp:prompt_tokens_total",
    "trtllm_prompt_tokens_total",
)
"""Counters of prompt tokens processed, one per dialect (the first present is used)."""
REQUEST_SECONDS_COUNTERS = (
    "vllm:e2e_request_latency_seconds_sum",
    "sglang:e2e_request_latency_seconds_sum",
    "trtllm_e2e_request_latency_seconds_sum",
)
"""Sums of end-to-end request latency: request-seconds, for Little's law."""


@dataclass(frozen=True, slots=True)
class RunLoad:
    """The server's load over one run; ``None`` where the server does not tell."""

    running_requests: float | None
    """Mean number of requests in the server (estimate, see the module docstring)."""
    prompt_tok_s: float | None
    """Prompt tokens processed per second, by every client."""


def _first(counters: Mapping[str, float], names: tuple[str, ...]) -> float | None:
    for name in names:
        value = counters.get(name)
        if value is not None:
            return float(value)
    return None


def load_from_counters(counters: Mapping[str, float], wall_s: float | None) -> RunLoad:
    """The load over a run from its counter deltas and its wall time."""
    if not wall_s or wall_s <= 0 or not counters:
        return RunLoad(None, None)
    prompt = _first(counters, PROMPT_TOKEN_COUNTERS)
    busy = _first(counters, REQUEST_SECONDS_COUNTERS)
    return RunLoad(
        running_requests=None if busy is None else busy / wall_s,
        prompt_tok_s=None if prompt is None else prompt / wall_s,
    )


__all__ = ["PROMPT_TOKEN_COUNTERS", "REQUEST_SECONDS_COUNTERS", "RunLoad", "load_from_counters"]
