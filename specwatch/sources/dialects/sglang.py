"""SGLang: ``/server_info`` arguments, ``sglang:*`` metrics, native ``/generate`` streams.

Probing never runs a generation: ``/health`` and ``/health_generate`` do (>= 0.4.10), so
readiness comes from ``/ready``. Metric names and meanings changed across versions: live token
counters since 0.5.9, finished-request spec counters and a drafts-only ``spec_accept_rate``
since 0.5.15.post1 (as the released wheels have them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.core.values import as_float, as_int
from specwatch.sources.dialects.base import (
    ONE_CHUNK_PER_STEP,
    ServerDialect,
    StreamPlan,
    StreamRequest,
)
from specwatch.sources.dialects.sglang_window import derive_sglang, draft_per_round
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.identity.server_queries import (
    redact_launch_args,
    str_or_none,
    try_json,
)
from specwatch.sources.metrics.window_builder import (
    accept_length_from,
)
from specwatch.sources.streams.accumulator import StreamAccumulator, finish_type

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.metrics.prom import Scrape

FORBIDDEN_PATHS = ("/health", "/health_generate")
"""SGLang endpoints that run a generation; specwatch never requests them."""
REASON_METRICS = "SGLang was started without --enable-metrics"

_S = "sglang:"
_SPEC_PREFIX = "spec_"
_INFO_PATHS = ("/server_info", "/get_server_info")


def sglang_request(request: StreamRequest) -> dict[str, Any]:
    """The ``/generate`` body."""
    return {
        "text": request.prompt,
        "sampling_params": {
            "max_new_tokens": request.max_tokens,
            "temperature": request.temperature,
            "ignore_eos": request.ignore_eos,
        },
        "stream": True,
    }


def parse_sglang_chunk(acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
    """Read one ``/generate`` chunk; the final one carries the per-request speculative fields."""
    meta = obj.get("meta_info")
    if not isinstance(meta, Mapping):
        return
    prompt = as_int(meta.get("prompt_tokens"))
    if prompt is not None:
        acc.prompt_tokens = prompt
    count = as_int(meta.get("completion_tokens"))
    if count is not None:
        acc.arrive(t, count)
    reason = finish_type(meta.get("finish_reason"))
    if reason is not None:
        acc.finish_reason = reason
        acc.final_tokens = count
        for key, value in meta.items():
            if key.startswith(_SPEC_PREFIX) or key in ("e2e_latency", "cached_tokens"):
                acc.server_stats[key] = value


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
    derived = _drafts_rate_from_verify(info, verify, completion)
    if derived is not None:
        stats["spec_accept_rate_derived"] = derived
        notes.setdefault(
            "draft_acceptance_rate",
            "(completion_tokens − 1 − spec_verify_ct) / (spec_verify_ct × (num_draft_tokens − 1)):"
            " the first token is prefill's and each verify step adds one bonus token",
        )
        return length, derived
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


def _drafts_rate_from_verify(
    info: ServerInfo, verify: float | None, completion: int
) -> float | None:
    """Drafts-only acceptance of one request from its verify count, where SGLang gives no
    accepted-draft count (0.4.10.post2: ``spec_verify_ct`` alone; 0.5.3: a rate over
    ``speculative_num_steps`` that counts the prefill token as accepted).

    Chain drafting only: with ``topk > 1`` ``num_draft_tokens − 1`` is a tree's size, not the
    drafts a step can accept.
    """
    ndt = info.spec.num_draft_tokens
    if not verify or ndt is None or ndt < 2 or (info.spec.topk or 1) > 1:
        return None
    accepted = completion - 1 - verify
    if accepted < 0:
        return None
    return min(1.0, accepted / (verify * (ndt - 1)))


def lifetime_accept_length(server_info: Any) -> float | None:
    """The mean of ``internal_states[].avg_spec_accept_length`` over data-parallel ranks
    (absent before a rank's first decode log tick; a PD payload's decode servers first)."""
    if isinstance(server_info, Mapping) and isinstance(server_info.get("decode"), list):
        decode = server_info["decode"]
        server_info = decode[0] if decode else None
    states = server_info.get("internal_states") if isinstance(server_info, Mapping) else None
    if not isinstance(states, list):
        return None
    values = [
        v
        for state in states
        if isinstance(state, Mapping)
        and (v := as_float(state.get("avg_spec_accept_length"))) is not None
        and v >= 1.0
    ]
    return sum(values) / len(values) if values else None


_ACCEPT_NUM = _S + "generation_tokens_total"
_ACCEPT_DEN = _S + "spec_verify_calls_total"


class SGLangDialect(ServerDialect):
    """SGLang."""

    dialect = Dialect.SGLANG
    owned_by: ClassVar[tuple[str, ...]] = ("sglang",)
    fingerprint_order = 20
    wanted_families: ClassVar[tuple[str, ...]] = tuple(
        _S + name
        for name in (
            "num_running_reqs",
            "num_queue_reqs",
            "generation_tokens",
            "prompt_tokens",
            "num_requests",
            "realtime_tokens",
            "spec_accept_length",
            "spec_accept_rate",
            "spec_verify_calls",
            "cuda_graph_passes",
            "is_cuda_graph",
            "gen_throughput",
            "inter_token_latency_seconds",
            "time_per_output_token_seconds",
            "request_time_per_output_token_seconds",
            "time_to_first_token_seconds",
            "e2e_request_latency_seconds",
            "queue_time_seconds",
            "token_usage",
            "num_used_tokens",
            "max_total_num_tokens",
            "cache_hit_rate",
        )
    )
    metrics_off_statuses: ClassVar[tuple[int, ...]] = (404,)
    metrics_off_text = REASON_METRICS

    async def recognize(self, client: ServerClient) -> bool:
        """``/server_info`` with speculative, internal-state or PD-decode fields."""
        for path in _INFO_PATHS:
            info = await try_json(client, path)
            if isinstance(info, Mapping) and (
                "speculative_algorithm" in info or "internal_states" in info or "decode" in info
            ):
                return True
        return False

    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Arguments from ``/server_info`` (or ``/get_server_info``); ``/ready`` answers first."""
        notes: dict[str, str] = {}
        ready = await client.get("/ready", check=False)
        if ready.status_code == 503:
            raise ServerError(
                f"{client.endpoint.url('/ready')}: HTTP 503 (SGLang is still loading)",
                kind="http",
                status=503,
                url=client.endpoint.url("/ready"),
            )
        info: Any = None
        source = ""
        for path in ("/server_info", "/get_server_info"):
            info = await try_json(client, path)
            if isinstance(info, Mapping):
                source = path
                break
        if isinstance(info, Mapping) and isinstance(info.get("decode"), list) and info["decode"]:
            notes["topology"] = "PD disaggregation: reading the decode server's arguments"
            first = info["decode"][0]
            info = first if isinstance(first, Mapping) else info
        args: Mapping[str, Any] = info if isinstance(info, Mapping) else {}
        if not args:
            notes["server_info"] = "neither /server_info nor /get_server_info answered"
        version = str(args["version"]) if args.get("version") is not None else None
        model = (
            model
            or str_or_none(args.get("served_model_name"))
            or str_or_none(args.get("model_path"))
        )
        algorithm = str_or_none(args.get("speculative_algorithm"))
        if args:
            spec = SpecConfig(
                enabled=algorithm is not None and algorithm.upper() != "NONE",
                algorithm=algorithm,
                num_steps=as_int(args.get("speculative_num_steps"), digits=True),
                num_draft_tokens=as_int(args.get("speculative_num_draft_tokens"), digits=True),
                topk=as_int(args.get("speculative_eagle_topk"), digits=True),
                draft_model=str_or_none(args.get("speculative_draft_model_path")),
                source=source,
            )
        else:
            spec = SpecConfig(enabled=None, source="")
        launch = {k: v for k, v in args.items() if k != "internal_states"}
        metrics_enabled, metrics_reason, _ = await self.metrics_state(
            client, args.get("enable_metrics") is False
        )
        return ServerInfo(
            base_url=client.endpoint.base_url,
            dialect=Dialect.SGLANG,
            version=version,
            model=model,
            spec=spec,
            metrics_enabled=metrics_enabled,
            metrics_reason=metrics_reason,
            max_model_len=max_len or as_int(args.get("context_length"), digits=True),
            launch_args=redact_launch_args(launch, client) if launch else None,
            notes=notes,
        )

    async def side_figures(
        self, client: ServerClient, info: ServerInfo, scrape: Scrape
    ) -> dict[str, tuple[float, str]]:
        """The lifetime accept length from ``internal_states[].avg_spec_accept_length``, on
        servers without ``spec_verify_calls_total`` (before 0.5.15.post1).

        ``/server_info`` asks each scheduler for its state between batches: no model work.
        """
        if info.spec.enabled is False or scrape.has(_S + "spec_verify_calls_total"):
            return {}
        path = info.spec.source if info.spec.source in _INFO_PATHS else _INFO_PATHS[0]
        found = await try_json(client, path)
        length = lifetime_accept_length(found)
        if length is None:
            return {}
        source = (
            f"{path} internal_states[].avg_spec_accept_length (since start, warm-up included;"
            " advanced on decode log ticks; mean of data-parallel ranks)"
        )
        out = {"lifetime_accept_length": (length, source)}
        per_round = draft_per_round(info)
        if per_round:
            out["lifetime_acceptance_rate"] = (
                (length - 1.0) / per_round,
                f"(lifetime accept length − 1) / {per_round} drafts per round, from {path}",
            )
        return out

    derive_window = staticmethod(derive_sglang)

    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """Native ``/generate``: cumulative ``meta_info.completion_tokens`` in every chunk."""
        return StreamPlan(
            attempts=(("/generate", sglang_request(request)),),
            count_source="meta_info.completion_tokens",
        )

    parse_chunk = staticmethod(parse_sglang_chunk)

    def step_note(self) -> str | None:
        """One chunk per engine step."""
        return ONE_CHUNK_PER_STEP

    def spec_figures(
        self, info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """The final chunk's ``spec_*`` fields (names per version)."""
        return _sglang_spec(info, stats, completion, notes)

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """``(Δgeneration_tokens − Δnum_requests) / Δspec_verify_calls``.

        Each finished request's first token came from prefill, not a verify step; it is left
        out as in the live window, or short runs overstate the length.
        """
        return accept_length_from(
            deltas, _ACCEPT_NUM, _ACCEPT_DEN, 0.0, minus_name=_S + "num_requests_total"
        )


DIALECT = SGLangDialect()

__all__ = ["DIALECT", "FORBIDDEN_PATHS", "REASON_METRICS", "SGLangDialect"]
