"""The simulated SGLang's scheduler series, one set per data-parallel rank.

As SGLang writes them (``scheduler_metrics_mixin.py`` ``init_metrics``, 0.5.23): every rank's
stats-logging scheduler (``attn_tp_rank == 0``) writes its own series, labelled
``engine_type``, ``model_name``, ``tp_rank``, ``pp_rank`` (0.4.10+), ``moe_ep_rank`` (0.5.23),
``priority=""`` with ``--enable-priority-scheduling`` and ``dp_rank`` when ``--dp-size`` > 1;
with priority scheduling ``num_running_reqs``/``num_queue_reqs`` are written again per priority
(``metrics_collector.py`` ``QueueCount.by_priority``). Ratios (KV usage, accept length) are
each rank's own; counts and passes are each rank's share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import Metric

from specwatch.sim.metrics.telemetry import Family, since, write

if TYPE_CHECKING:
    from specwatch.sim.config import SimConfig
    from specwatch.sim.engine import SimRequest

DEFAULT_PRIORITY = "0"
"""The priority of every simulated request (``--default-priority-value 0``)."""


class RankCounts(Protocol):
    """What the per-rank families read of SGLang's telemetry (a ``SglangTelemetry``, which
    builds them: a protocol keeps this module below it)."""

    config: SimConfig
    decode_passes: list[int]
    decode_passes_no_graph: list[int]
    """The decode passes that ran outside a CUDA graph (a subset of ``decode_passes``)."""
    last_batch_in_graph: list[bool]
    running_written: list[int]
    """``num_running_reqs`` per rank as last written (a prefill or a decode log tick)."""
    prefill_passes: list[int]
    spec_accept_length: float
    spec_accept_rate: float

    def rank_of(self, req: SimRequest) -> int: ...
    def gen_throughput_now(self, t: float) -> float: ...


def rank_labels(tm: RankCounts, rank: int, priority: str | None = None) -> dict[str, str]:
    """The scheduler labels of data-parallel ``rank`` (``priority`` for a breakdown series)."""
    cfg = tm.config
    ranks = len(tm.decode_passes)
    labels: dict[str, str] = {"model_name": cfg.model, "engine_type": "unified"}
    if cfg.at_least("0.4.10"):
        # the stats-logging rank of each DP rank: the first TP rank of its attention group
        labels.update({"tp_rank": str(rank * max(1, cfg.tp_size // ranks)), "pp_rank": "0"})
    if cfg.at_least("0.5.23"):
        labels["moe_ep_rank"] = "0"
        if cfg.priority_scheduling:
            labels["priority"] = "" if priority is None else priority
    if ranks > 1:
        labels["dp_rank"] = str(rank)
    return labels


@dataclass(frozen=True, slots=True)
class RankView:
    """One rank's scheduler readings at a scrape (``None``: a priority row does not write it)."""

    running: int
    queued: int
    used_tokens: int | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    cache_hit_rate: float | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    is_cuda_graph: float | None = None
    spec_num_steps: int | None = None
    spec_num_draft_tokens: int | None = None
    passes_by_mode: dict[str, int] | None = None


FAMILIES = (
    Family("gauge", "sglang:num_running_reqs", "The number of running requests.", "running"),
    Family("gauge", "sglang:num_used_tokens", "The number of used tokens.", "used_tokens"),
    Family("gauge", "sglang:token_usage", "The token usage.", "token_usage"),
    Family("gauge", "sglang:gen_throughput", "The generation throughput (token/s).",
           "gen_throughput"),
    Family("gauge", "sglang:num_queue_reqs", "The number of requests in the queue.", "queued"),
    Family("gauge", "sglang:cache_hit_rate", "The prefix cache hit rate.", "cache_hit_rate"),
    Family("gauge", "sglang:spec_accept_length",
           "The average acceptance length of speculative decoding.", "spec_accept_length"),
    Family("gauge", "sglang:spec_accept_rate",
           "The average acceptance rate of speculative decoding.", "spec_accept_rate",
           when=since("0.5.4")),
    Family("gauge", "sglang:is_cuda_graph", "Whether the batch is using CUDA graph.",
           "is_cuda_graph", when=since("0.5.4")),
    Family("gauge", "sglang:spec_num_steps", "Active speculative_num_steps.", "spec_num_steps",
           when=since("0.5.16")),
    Family("gauge", "sglang:spec_num_draft_tokens", "Active num_draft_tokens.",
           "spec_num_draft_tokens", when=since("0.5.16")),
    Family("counter", "sglang:cuda_graph_passes", "Number of forward passes by mode.",
           "passes_by_mode", by="mode", when=since("0.5.9")),  # in the 0.5.9 wheel (not 0.5.3)
)  # fmt: skip
"""The scheduler's series, in SGLang's order, one series per rank."""


def scheduler_families(
    tm: RankCounts, running: list[SimRequest], waiting: int, t: float, kv: float
) -> list[Metric]:
    """The scheduler gauges and pass counters of every data-parallel rank."""
    cfg = tm.config
    ranks = len(tm.decode_passes)
    per_rank = [0] * ranks
    for req in running:
        per_rank[tm.rank_of(req)] += 1
    # SGLang writes the running count after a prefill (the batch before the new requests
    # joined) and on decode log ticks (every 40 passes), so it lags a prefill by up to 40
    # passes; a rank with nothing running reads 0 (assumed of the idle path: not checked
    # against a wheel)
    written = [tm.running_written[r] if per_rank[r] else 0 for r in range(ranks)]
    queued = [waiting // ranks + (1 if r < waiting % ranks else 0) for r in range(ranks)]
    steps = cfg.num_steps if cfg.spec_enabled else 0
    drafts = cfg.num_draft_tokens if cfg.spec_enabled else 0
    holders: list[tuple[dict[str, str], object]] = []
    for r in range(ranks):
        usage = min(1.0, kv * ranks * per_rank[r] / len(running)) if running else kv
        none = tm.decode_passes_no_graph[r]
        view = RankView(
            running=written[r],
            queued=queued[r],
            used_tokens=int(usage * cfg.kv_capacity_tokens),
            token_usage=usage,
            gen_throughput=tm.gen_throughput_now(t) / ranks,
            cache_hit_rate=0.0,
            spec_accept_length=tm.spec_accept_length,
            spec_accept_rate=tm.spec_accept_rate,
            is_cuda_graph=1.0 if tm.last_batch_in_graph[r] else 0.0,
            spec_num_steps=steps,
            spec_num_draft_tokens=drafts,
            passes_by_mode={
                "decode_cuda_graph": tm.decode_passes[r] - none,
                "decode_none": none,
                "prefill_none": tm.prefill_passes[r],
            },
        )
        holders.append((rank_labels(tm, r), view))
    if cfg.priority_scheduling and cfg.at_least("0.5.23"):  # the same requests, by priority
        for r in range(ranks):
            holders.append((rank_labels(tm, r, DEFAULT_PRIORITY), RankView(written[r], queued[r])))
    return write(FAMILIES, cfg, holders)


__all__ = ["DEFAULT_PRIORITY", "rank_labels", "scheduler_families"]
