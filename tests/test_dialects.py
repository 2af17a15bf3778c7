"""The dialect registry and the per-dialect pieces that have no server behind them."""

from __future__ import annotations

import pytest

from specwatch.core.server import Dialect, ServerInfo
from specwatch.sources.dialects.base import (
    ServerDialect,
    StreamRequest,
    all_dialects,
    dialect_for,
    dialect_owning,
)


def test_every_dialect_has_exactly_one_module() -> None:
    found = [d.dialect for d in all_dialects()]
    assert sorted(found, key=lambda d: d.value) == sorted(Dialect, key=lambda d: d.value)
    for dialect in Dialect:
        assert dialect_for(dialect).dialect is dialect
        assert isinstance(dialect_for(dialect), ServerDialect)


def test_generic_dialect_is_asked_last() -> None:
    order = [d.dialect for d in all_dialects()]
    assert order[-1] is Dialect.OPENAI
    # /props, /server_info, then TensorRT-LLM's /prometheus/metrics before vLLM's /version
    # (TensorRT-LLM's /version answers the way vLLM's does)
    assert order[:4] == [Dialect.LLAMACPP, Dialect.SGLANG, Dialect.TRTLLM, Dialect.VLLM]


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        ("sglang", Dialect.SGLANG),
        ("vLLM", Dialect.VLLM),
        ("llama.cpp", Dialect.LLAMACPP),
        ("llamacpp", Dialect.LLAMACPP),
        ("llama-cpp", Dialect.LLAMACPP),
    ],
)
def test_owned_by_names_a_dialect(owner: str, expected: Dialect) -> None:
    found = dialect_owning(owner)
    assert found is not None and found.dialect is expected


def test_generic_owner_names_no_dialect() -> None:
    assert dialect_owning("organization-owner") is None
    assert dialect_owning("") is None


def test_accept_length_from_counters_per_dialect() -> None:
    vllm = {
        "vllm:spec_decode_num_accepted_tokens_total": 150.0,
        "vllm:spec_decode_num_drafts_total": 100.0,
    }
    assert dialect_for(Dialect.VLLM).accept_length_from_counters(vllm) == 2.5
    sglang = {"sglang:generation_tokens_total": 300.0, "sglang:spec_verify_calls_total": 100.0}
    assert dialect_for(Dialect.SGLANG).accept_length_from_counters(sglang) == 3.0
    # Two finished requests: their prefill tokens are not verify-step tokens.
    sglang["sglang:num_requests_total"] = 2.0
    assert dialect_for(Dialect.SGLANG).accept_length_from_counters(sglang) == 2.98
    assert dialect_for(Dialect.OPENAI).accept_length_from_counters(vllm) is None
    assert dialect_for(Dialect.VLLM).accept_length_from_counters({}) is None
    llamacpp = {
        "llamacpp:spec_decode_num_accepted_tokens_total": 60.0,
        "llamacpp:spec_decode_num_drafts_total": 40.0,
    }
    assert dialect_for(Dialect.LLAMACPP).accept_length_from_counters(llamacpp) == 2.5


def test_metrics_off_statuses_per_dialect() -> None:
    assert dialect_for(Dialect.SGLANG).metrics_off_reason(404) is not None
    assert dialect_for(Dialect.SGLANG).metrics_off_reason(501) is None
    assert dialect_for(Dialect.LLAMACPP).metrics_off_reason(501) is not None
    assert dialect_for(Dialect.VLLM).metrics_off_reason(404) is None


def test_stream_plans_name_each_servers_endpoint() -> None:
    request = StreamRequest("hi", 8, 0.0, ignore_eos=True)
    paths = {
        d: [p for p, _ in dialect_for(d).stream_plan(ServerInfo("http://x", d), request).attempts]
        for d in Dialect
    }
    assert paths[Dialect.SGLANG] == ["/generate"]
    assert paths[Dialect.LLAMACPP] == ["/completion"]
    assert paths[Dialect.VLLM] == ["/v1/completions"]
    assert paths[Dialect.OPENAI] == ["/v1/completions", "/v1/chat/completions"]
    vllm_body = dialect_for(Dialect.VLLM).stream_plan(ServerInfo("http://x", Dialect.VLLM), request)
    assert vllm_body.attempts[0][1]["ignore_eos"] is True
    assert vllm_body.attempts[0][1]["stream_options"]["continuous_usage_stats"] is True
    generic = dialect_for(Dialect.OPENAI).stream_plan(
        ServerInfo("http://x", Dialect.OPENAI), request
    )
    assert "ignore_eos" not in generic.attempts[0][1]
