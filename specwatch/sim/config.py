"""Simulator configuration: what server to imitate, and how its engine behaves."""

from __future__ import annotations

import re
from dataclasses import dataclass

from specwatch.core.server import Dialect, version_tuple

LLAMACPP_SPEC_COUNTERS_BUILD = 6500
"""llama.cpp builds from this number on have the ``spec_decode_*`` counters and
``speculative.types``."""

# How each server's engine counts drafts: facts the engine needs, kept here below the servers.
DRAFT_COUNT_INCLUDES_ROOT = frozenset({Dialect.SGLANG})
"""``num_draft_tokens`` counts the tree root (SGLang: drafts per step = tokens - 1)."""
DRAFTS_CAPPED_BY_REMAINING = frozenset({Dialect.LLAMACPP})
"""Drafts no further than the tokens the request may still produce (llama.cpp)."""
COUNTS_CUT_STEP_IN_FULL = frozenset({Dialect.VLLM})
"""The last step of a request cut by ``max_tokens`` counts every draft it accepted, though only
the tokens that fit are sent: vLLM's scheduler counts a full step before the output is truncated,
so its counters read higher than the stream."""


CUDA_GRAPH_MAX_BS = 160
"""The largest decode batch with a captured CUDA graph (SGLang ``cuda_graph_max_bs``)."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything that shapes a simulated server.

    Latencies are for a GPU at full boost clock; the simulated GPUs' pace factor stretches them.
    """

    dialect: Dialect
    version: str
    model: str = "sim/Llama-3.1-8B-Instruct"
    spec_algorithm: str | None = "EAGLE3"
    """``None`` = no speculation."""
    num_steps: int = 3
    num_draft_tokens: int = 4
    """Draft tokens proposed per verify step (SGLang: steps + 1, counting the root)."""
    acceptance: tuple[float, ...] = (0.8, 0.6, 0.45)
    """P(accept draft position i | position i-1 accepted)."""
    base_step_ms: float = 12.0
    plain_step_ms: float = 9.0
    batch_step_ms: float = 0.4
    prefill_ms: float = 40.0
    load_time_s: float = 0.0
    warmup_requests: int = 2
    warmup_factor: float = 3.0
    background_concurrency: int = 0
    metrics_enabled: bool = True
    api_key: str | None = None
    """When set, endpoints require ``Authorization: Bearer <key>`` (per dialect rules)."""
    seed: int = 0
    # --- additions (all with defaults) ---------------------------------------------------
    gpu_count: int = 8
    """GPUs the world creates when it is not handed a ``SimGpus``."""
    eos_per_token: float = 1e-4
    """Chance per generated token that a request without ``ignore_eos`` stops (seeded)."""
    max_running: int = 64
    """Requests decoded together at most; the rest wait (llama.cpp: the slot count)."""
    dp_engines: int = 1
    """Data-parallel schedulers stepping side by side: vLLM one series per ``engine`` label,
    SGLang one per ``dp_rank`` (``--dp-size``)."""
    priority_scheduling: bool = False
    """SGLang ``--enable-priority-scheduling``: running and waiting written as the total
    (``priority=""``) and again per priority (0.5.23)."""
    decode_log_interval: int = 40
    """SGLang: decode iterations between gauge updates."""
    max_model_len: int = 32768
    kv_capacity_tokens: int = 500_000
    """Tokens the KV cache holds (vLLM ``cache_config_info``: blocks × ``kv_block_size``)."""
    kv_block_size: int = 16
    prefix_caching: bool = True
    """vLLM ``--enable-prefix-caching`` as ``cache_config_info`` says it."""
    background_prompt_tokens: tuple[int, int] = (32, 1024)
    background_max_tokens: tuple[int, int] = (32, 512)
    background_think_s: tuple[float, float] = (0.05, 1.0)
    coalesce_chunks: bool = True
    """Merge steps the HTTP consumer fell behind on into one chunk (SGLang, vLLM, OpenAI)."""
    tp_size: int = 1
    per_request_metrics: str = "none"
    """vLLM >= 0.33 ``--per-request-spec-decode-metrics``: ``none``, ``summary`` or ``detailed``
    (implies ``--enable-per-request-metrics``)."""
    truth_max_steps: int | None = None
    """Bound on the steps the ground truth keeps (a demo left running); ``None`` keeps all."""
    draft_ms_per_token: float = 0.0
    """Drafting cost per draft token, added to every speculative step (``base_step_ms`` is
    then the verify alone)."""
    spec_batch_step_ms: float | None = None
    """Added to a speculative step per running request beyond the first (``None``:
    ``batch_step_ms``). A verify carries k+1 tokens per request, so once the batch is
    compute-bound it grows faster than a plain step."""
    verify_cliffs: tuple[tuple[int, float], ...] = ()
    """``(batch, factor)``: speculative steps at exactly that running batch take ``factor``
    times as long (no CUDA graph captured for that shape)."""
    verify_eager: bool = False
    """The verify path cannot use CUDA graphs (the seed's EAGLE-3): verify steps run eager,
    ``verify_eager_factor`` times as long as in graphs (in the metrics and in profiles)."""
    verify_eager_factor: float = 29.3 / 12.0
    profiler_dir: str | None = None
    """vLLM ``--profiler-config``'s ``torch_profiler_dir``: ``/start_profile`` is mounted only
    with it (SGLang's always is)."""
    slow_rank: int = -1
    """A TP rank whose kernels run slower (``-1``: none)."""
    draft_skip_share: float = 0.0
    """Share of decode steps that carry no draft: llama.cpp drops a draft its draft model is not
    confident in (``--spec-draft-p-min``), so such a step verifies one token (a real
    llama-server skipped 11 of 105)."""

    @property
    def spec_enabled(self) -> bool:
        """Whether the engine drafts."""
        return self.spec_algorithm is not None

    @property
    def drafts_per_step(self) -> int:
        """Draft tokens proposed per request per verify step (0 without speculation)."""
        if not self.spec_enabled:
            return 0
        if self.dialect in DRAFT_COUNT_INCLUDES_ROOT:
            return max(0, self.num_draft_tokens - 1)
        return max(0, self.num_draft_tokens)

    @property
    def drafts_capped_by_remaining(self) -> bool:
        """Whether drafts stop at the tokens a request may still produce (llama.cpp)."""
        return self.dialect in DRAFTS_CAPPED_BY_REMAINING

    @property
    def counts_cut_step_in_full(self) -> bool:
        """Whether a step cut by ``max_tokens`` counts all its accepted drafts (vLLM)."""
        return self.dialect in COUNTS_CUT_STEP_IN_FULL

    @property
    def max_accepted(self) -> int:
        """Most drafts one verify step can accept."""
        return min(self.num_steps, self.drafts_per_step, len(self.acceptance))

    def decode_step_ms(self, batch: int) -> float:
        """Milliseconds of a step that decodes ``batch`` requests, at full boost clock."""
        if not self.spec_enabled:
            return self.plain_step_ms + self.batch_step_ms * (batch - 1)
        per_request = (
            self.batch_step_ms if self.spec_batch_step_ms is None else self.spec_batch_step_ms
        )
        ms = self.base_step_ms + self.draft_ms_per_token * self.drafts_per_step
        ms += per_request * (batch - 1)
        for at, factor in self.verify_cliffs:
            if at == batch:
                ms *= factor
        return ms * self.verify_eager_factor if self.verify_eager else ms

    def cuda_graph_at(self, batch: int) -> bool:
        """Whether a decode step of ``batch`` requests runs in a captured CUDA graph: not at
        a verify cliff (no graph for that shape) nor above ``CUDA_GRAPH_MAX_BS``."""
        if batch > CUDA_GRAPH_MAX_BS:
            return False
        if self.spec_enabled and self.verify_eager:
            return False
        return not (self.spec_enabled and any(at == batch for at, _ in self.verify_cliffs))

    @property
    def vtuple(self) -> tuple[int, ...]:
        """The version as comparable numbers (see :func:`version_tuple`)."""
        return version_tuple(self.version)

    def at_least(self, version: str) -> bool:
        """Whether this config imitates ``version`` or newer (SGLang/vLLM numbering)."""
        return self.vtuple >= version_tuple(version)

    @property
    def llamacpp_build(self) -> int:
        """The llama.cpp build number (``b6500-...`` → 6500; 0 when unknown)."""
        m = re.match(r"b?(\d+)", self.version)
        return int(m.group(1)) if m else 0

    @property
    def llamacpp_new(self) -> bool:
        """A llama.cpp build with the spec counters (``LLAMACPP_SPEC_COUNTERS_BUILD`` or later)."""
        return self.llamacpp_build >= LLAMACPP_SPEC_COUNTERS_BUILD
