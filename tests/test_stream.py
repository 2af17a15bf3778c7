"""Stream parsing per dialect, step grouping and fault handling (fake HTTP, scripted clock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specwatch.core.server import ChunkArrival, Dialect, ServerInfo, SpecConfig, StreamResult
from specwatch.sources.stream import stream_completion
from specwatch.sources.stream_steps import group_bursts, quantile
from tests.conftest import FakeServer, json_response

URL = "http://127.0.0.1:8000"


def info(dialect: Dialect, enabled: bool | None = True, version: str = "x") -> ServerInfo:
    return ServerInfo(URL, dialect, version=version, model="m", spec=SpecConfig(enabled=enabled))


class Scripted:
    """A clock returning t0, then one time per streamed line, then the last time forever."""

    def __init__(self, times: Iterable[float]) -> None:
        self.times = list(times)
        self.i = 0

    def __call__(self) -> float:
        t = self.times[min(self.i, len(self.times) - 1)]
        self.i += 1
        return t


def sse(events: list[tuple[float, Any]]) -> tuple[bytes, Scripted]:
    """Body of ``data:`` lines (one per event, no blank lines) and the matching clock."""
    lines = []
    for _, obj in events:
        payload = obj if isinstance(obj, str) else orjson.dumps(obj).decode()
        lines.append(f"data: {payload}" if not payload.startswith("RAW:") else payload[4:])
    body = ("\n".join(lines) + "\n").encode()
    return body, Scripted([0.0, *[t for t, _ in events]])


def route(server: FakeServer, path: str, body: bytes, status: int = 200) -> list[dict[str, Any]]:
    payloads: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        payloads.append(orjson.loads(request.content))
        return httpx.Response(status, content=body, headers={"Content-Type": "text/event-stream"})

    server.routes[f"POST {path}"] = handler
    return payloads


async def run(
    server: FakeServer, si: ServerInfo, clock: Scripted, max_tokens: int = 16
) -> tuple[StreamResult, list[ChunkArrival]]:
    seen: list[ChunkArrival] = []
    async with server.client() as client:
        result = await stream_completion(
            client, si, "hi", max_tokens, clock=clock, on_chunk=seen.append
        )
    return result, seen


# --- SGLang ---------------------------------------------------------------------------------


def sg(count: int, final: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": "r",
        "prompt_tokens": 7,
        "completion_tokens": count,
        "finish_reason": None,
    }
    if final is not None:
        meta.update(final)
    return {"text": "x" * count, "output_ids": list(range(count)), "meta_info": meta}


SG_0523_FINAL = {
    "finish_reason": {"type": "length", "length": 10},
    "e2e_latency": 0.2,
    "spec_verify_ct": 3,
    "spec_accept_length": 10 / 3,
    "spec_accept_rate": 6 / 9,
    "spec_num_correct_drafts": 6,
    "spec_num_proposed_drafts": 9,
    "spec_correct_drafts_histogram": [0, 1, 1, 1],
}


async def test_sglang_native_counts_from_meta_info(fake_server: FakeServer) -> None:
    body, clock = sse(
        [
            (0.050, sg(1)),
            (0.060, sg(4)),
            (0.070, sg(4)),  # a chunk without new tokens is not a step
            (0.072, sg(7)),
            (0.085, sg(10, SG_0523_FINAL)),
            (0.086, "[DONE]"),
        ]
    )
    sent = route(fake_server, "/generate", body)
    r, seen = await run(fake_server, info(Dialect.SGLANG), clock, max_tokens=10)
    assert sent[0]["sampling_params"] == {
        "max_new_tokens": 10,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    assert sent[0]["stream"] is True
    assert r.error is None
    assert r.completion_tokens == 10 and r.prompt_tokens == 7
    assert r.counts_exact and r.count_source == "meta_info.completion_tokens"
    assert [c.tokens for c in r.chunks] == [1, 4, 7, 10]
    assert seen == list(r.chunks)
    assert r.ttft_s == pytest.approx(0.050)
    assert r.decode_s == pytest.approx(0.035)
    assert r.decode_tok_s == pytest.approx(9 / 0.035)
    assert r.steps == 3
    assert r.tokens_per_step == pytest.approx(3.0)
    assert r.step_latency_mean_s == pytest.approx(0.035 / 3)
    assert r.step_latency_p50_s == pytest.approx(0.012)
    assert r.accept_length == pytest.approx(10 / 3)  # the server's own figure
    assert r.draft_acceptance_rate == pytest.approx(6 / 9)
    assert r.server_stats["spec_verify_ct"] == 3
    assert r.finish_reason == "length"
    assert r.tok_s == pytest.approx(10 / 0.086)


@pytest.mark.parametrize(
    ("final", "length", "rate"),
    [
        # 0.5.16: canonical names plus aliases
        (
            {
                "spec_verify_ct": 4,
                "spec_accept_length": 2.5,
                "spec_num_correct_drafts": 5,
                "spec_num_proposed_drafts": 12,
                "spec_accepted_drafts": 5,
                "spec_proposed_drafts": 12,
            },
            2.5,
            5 / 12,
        ),
        # 0.5.10: spec_accept_token_num / spec_draft_token_num
        (
            {
                "spec_verify_ct": 4,
                "spec_accept_length": 2.5,
                "spec_accept_token_num": 5,
                "spec_draft_token_num": 12,
                "spec_accept_rate": 0.1,
            },
            2.5,
            5 / 12,
        ),
        # 0.4.x: only spec_verify_ct
        ({"spec_verify_ct": 4}, 10 / 4, None),
        # speculation off: nothing
        ({}, None, None),
    ],
)
async def test_sglang_spec_fields_per_version(
    fake_server: FakeServer, final: dict[str, Any], length: float | None, rate: float | None
) -> None:
    final = {"finish_reason": {"type": "length"}, **final}
    body, clock = sse([(0.01, sg(1)), (0.02, sg(10, final)), (0.03, "[DONE]")])
    route(fake_server, "/generate", body)
    r, _ = await run(
        fake_server, info(Dialect.SGLANG, enabled=bool(final.get("spec_verify_ct"))), clock
    )
    assert r.accept_length == (pytest.approx(length) if length is not None else None)
    assert r.draft_acceptance_rate == (pytest.approx(rate) if rate is not None else None)
    if rate is None:
        assert "draft_acceptance_rate" in r.notes or "accept_length" in r.notes


# --- vLLM -----------------------------------------------------------------------------------


def vl(text: str, count: int | None, finish: str | None = None, prompt: int = 5) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": "cmpl",
        "object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
    }
    if count is not None:
        obj["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": count,
            "total_tokens": prompt + count,
        }
    return obj


async def test_vllm_continuous_usage(fake_server: FakeServer) -> None:
    usage_only = {
        "id": "cmpl",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9},
    }
    body, clock = sse(
        [
            (0.1, vl("a", 1)),
            (0.2, vl("bcd", 4)),
            (0.3, vl("efghi", 9, "length")),
            (0.3, usage_only),
            (0.3, "[DONE]"),
        ]
    )
    sent = route(fake_server, "/v1/completions", body)
    r, _ = await run(fake_server, info(Dialect.VLLM), clock, max_tokens=9)
    assert sent[0]["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert sent[0]["ignore_eos"] is True and sent[0]["model"] == "m" and sent[0]["max_tokens"] == 9
    assert r.counts_exact
    assert [c.tokens for c in r.chunks] == [1, 4, 9]
    assert r.steps == 2 and r.tokens_per_step == 4.0
    assert r.accept_length == 4.0  # tokens per observed step: vLLM reports none by default
    assert r.draft_acceptance_rate is None and "per-request" in r.notes["draft_acceptance_rate"]
    assert r.finish_reason == "length" and r.prompt_tokens == 5


async def test_vllm_033_per_request_spec_metrics(fake_server: FakeServer) -> None:
    final = {
        "id": "c",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9},
        "metrics": {
            "time_to_first_token_ms": 100.0,
            "speculative_decoding": {
                "mean_acceptance_length": 3.0,
                "draft_acceptance_rate": 0.5,
                "num_spec_steps": 4,
            },
        },
    }
    body, clock = sse(
        [
            (0.1, vl("a", 1)),
            (0.2, vl("bcd", 4)),
            (0.3, vl("efghi", 9, "length")),
            (0.3, final),
            (0.3, "[DONE]"),
        ]
    )
    route(fake_server, "/v1/completions", body)
    r, _ = await run(fake_server, info(Dialect.VLLM), clock)
    assert r.accept_length == 3.0 and r.draft_acceptance_rate == 0.5
    assert r.server_stats["time_to_first_token_ms"] == 100.0


# --- llama.cpp ------------------------------------------------------------------------------


def lc(n: int, stop: bool = False, timings: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "index": 0,
        "content": "" if stop else "w",
        "tokens": [] if stop else [n],
        "stop": stop,
        "id_slot": 0,
        "tokens_predicted": n,
        "tokens_evaluated": 4,
    }
    if timings is not None:
        obj["timings"] = timings
    if stop:
        obj["stop_type"] = "limit"
    return obj


async def test_llamacpp_bursts_are_steps(fake_server: FakeServer) -> None:
    final_timings = {"predicted_n": 9, "predicted_ms": 30.0, "draft_n": 12, "draft_n_accepted": 5}
    # first token alone, then bursts: [2,3,4] [5] [6,7,8,9] at 10 ms steps; burst spacing 20 us
    events = [
        (0.050, lc(1)),
        (0.060, lc(2)), (0.06002, lc(3)), (0.06004, lc(4)),
        (0.070, lc(5)),
        (0.080, lc(6)), (0.08002, lc(7)), (0.08004, lc(8)), (0.08006, lc(9)),
        (0.08007, lc(9, stop=True, timings=final_timings)),
    ]  # fmt: skip
    body, clock = sse(events)
    sent = route(fake_server, "/completion", body)
    r, _ = await run(fake_server, info(Dialect.LLAMACPP), clock, max_tokens=9)
    assert sent[0]["timings_per_token"] is True and sent[0]["n_predict"] == 9
    assert sent[0]["ignore_eos"] is True
    assert r.error is None
    assert r.completion_tokens == 9 and r.prompt_tokens == 4
    assert [c.tokens for c in r.chunks] == list(range(1, 10))
    assert r.steps == 3
    assert r.tokens_per_step == pytest.approx(8 / 3)
    assert r.step_latency_mean_s == pytest.approx(0.010)
    assert r.draft_acceptance_rate == pytest.approx(5 / 12)
    # realized: (9 - 1) / (9 - 1 - 5) tokens per decode step
    assert r.accept_length == pytest.approx(8 / 3)
    assert r.server_stats["step_latency_s"] == pytest.approx(0.030 / 3)
    assert r.finish_reason == "length"


async def test_llamacpp_without_draft_fields(fake_server: FakeServer) -> None:
    body, clock = sse(
        [
            (0.01, lc(1)),
            (0.02, lc(2)),
            (0.03, lc(2, True, {"predicted_n": 2, "predicted_ms": 10.0})),
        ]
    )
    route(fake_server, "/completion", body)
    r, _ = await run(fake_server, info(Dialect.LLAMACPP, enabled=False), clock)
    assert r.completion_tokens == 2
    assert (
        r.draft_acceptance_rate is None and "did not speculate" in r.notes["draft_acceptance_rate"]
    )


# --- generic --------------------------------------------------------------------------------


async def test_generic_openai_estimates_and_says_so(fake_server: FakeServer) -> None:
    final = {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 20}}
    body, clock = sse(
        [
            (0.1, vl("aaaa", None)),
            (0.2, vl("bbbbbbbb", None)),
            (0.3, vl("cccccccc", None, "length")),
            (0.3, final),
            (0.3, "[DONE]"),
        ]
    )
    sent = route(fake_server, "/v1/completions", body)
    r, _ = await run(fake_server, info(Dialect.OPENAI, enabled=None), clock)
    assert sent[0]["stream_options"] == {"include_usage": True}
    assert "ignore_eos" not in sent[0]
    assert not r.counts_exact and "estimated" in r.notes["counts"]
    assert r.completion_tokens == 20  # the final usage, never the 3 chunks
    assert [c.tokens for c in r.chunks] == [4, 12, 20]  # by text length
    assert r.accept_length is None


async def test_generic_falls_back_to_chat(fake_server: FakeServer) -> None:
    chat = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}],
        "usage": {"completion_tokens": 2},
    }
    body, clock = sse([(0.1, chat), (0.1, "[DONE]")])
    sent = route(fake_server, "/v1/chat/completions", body)
    r, _ = await run(fake_server, info(Dialect.OPENAI, enabled=None), clock)
    assert sent[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert r.completion_tokens == 2 and r.error is None


async def test_no_usage_at_all_estimates_from_text(fake_server: FakeServer) -> None:
    body, clock = sse(
        [(0.1, vl("abcdefgh", None)), (0.2, vl("ijklmnop", None, "stop")), (0.2, "[DONE]")]
    )
    route(fake_server, "/v1/completions", body)
    r, _ = await run(fake_server, info(Dialect.OPENAI, enabled=None), clock)
    assert r.completion_tokens == 4 and not r.counts_exact
    assert "4 characters" in r.notes["completion_tokens"]


# --- faults ---------------------------------------------------------------------------------


async def test_http_500_is_one_clear_line(fake_server: FakeServer) -> None:
    fake_server.routes["POST /generate"] = json_response({"error": "boom\ninternal"}, 500)
    async with fake_server.client() as client:
        r = await stream_completion(client, info(Dialect.SGLANG), "hi", 8)
    assert r.error is not None and "\n" not in r.error
    assert r.error.startswith(f"{URL}/generate: HTTP 500")
    assert r.completion_tokens == 0 and r.chunks == ()


class _Body(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes], fail: Exception) -> None:
        self.parts, self.fail = parts, fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        raise self.fail


@pytest.mark.parametrize(
    ("fail", "expected"),
    [
        (
            httpx.RemoteProtocolError("peer closed connection"),
            "dropped by the server after 4 tokens",
        ),
        (httpx.ReadTimeout("timed out"), "stalled: no data for 5 s after 4 tokens (server hung?)"),
    ],
)
async def test_drop_and_hang_keep_what_arrived(
    fake_server: FakeServer, fail: Exception, expected: str
) -> None:
    parts = [b"data: " + orjson.dumps(sg(1)) + b"\n\n", b"data: " + orjson.dumps(sg(4)) + b"\n\n"]
    fake_server.routes["POST /generate"] = lambda request: httpx.Response(
        200, stream=_Body(parts, fail)
    )
    async with fake_server.client() as client:
        r = await stream_completion(client, info(Dialect.SGLANG), "hi", 64)
    assert r.error is not None and expected in r.error
    assert r.completion_tokens == 4 and [c.tokens for c in r.chunks] == [1, 4]


async def test_garbage_lines_flagged_counts_kept(fake_server: FakeServer) -> None:
    body, clock = sse(
        [
            (0.01, sg(1)),
            (0.02, "RAW:\x00\x01 not sse"),
            (0.03, "{broken json"),
            (0.04, sg(5, {"finish_reason": "length"})),
            (0.05, "[DONE]"),
        ]
    )
    route(fake_server, "/generate", body)
    r, _ = await run(fake_server, info(Dialect.SGLANG), clock)
    assert r.completion_tokens == 5
    assert r.error is not None and "2 unparseable line(s)" in r.error


async def test_stream_ending_early_is_an_error(fake_server: FakeServer) -> None:
    body, clock = sse([(0.01, sg(1)), (0.02, sg(3))])
    route(fake_server, "/generate", body)
    r, _ = await run(fake_server, info(Dialect.SGLANG), clock)
    assert r.error is not None and "ended before its final chunk after 3 tokens" in r.error


async def test_refused_never_raises() -> None:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import Endpoint

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    async with ServerClient(Endpoint(URL), transport=httpx.MockTransport(refuse)) as client:
        r = await stream_completion(client, info(Dialect.VLLM), "hi", 8)
    assert r.error == f"cannot connect to {URL}/v1/completions: connection refused"


async def test_error_event_mid_stream(fake_server: FakeServer) -> None:
    body, clock = sse([(0.01, sg(1)), (0.02, {"error": {"message": "out of memory"}})])
    route(fake_server, "/generate", body)
    r, _ = await run(fake_server, info(Dialect.SGLANG), clock)
    assert r.error is not None and "out of memory" in r.error and r.completion_tokens == 1


# --- helpers --------------------------------------------------------------------------------


def test_group_bursts() -> None:
    times = [0.0, 0.010, 0.01001, 0.01002, 0.020, 0.030, 0.03001]
    assert group_bursts(times) == [0, 1, 4, 5]
    assert group_bursts(times, threshold_s=0.02) == [0]
    assert group_bursts([]) == []
    # no speculation: step gaps only, no split into clusters: every event is a step
    assert group_bursts([0.0, 0.01, 0.02, 0.03]) == [0, 1, 2, 3]
    assert group_bursts([0.0, 0.0002, 0.0008, 0.0012, 0.004]) == [0, 1, 2, 3, 4]
    # simultaneous events (a manual clock): exact zeros are bursts
    assert group_bursts([1.0, 1.0, 1.0, 2.0, 2.0, 3.0]) == [0, 3, 5]
    # the server's step count picks the longest gaps
    assert group_bursts([0, 1, 1, 1, 2, 3, 3], steps=3) == [0, 1, 4, 5]


def test_group_bursts_real_llamacpp_gaps() -> None:
    """Gaps measured on a real llama-server (tiny draft model, CPU): bursts of 15-80 us,
    steps from 0.18 ms (empty draft: a plain decode) to several ms."""
    burst = [15e-6, 20e-6, 35e-6, 55e-6, 76e-6]
    step = [0.175e-3, 0.19e-3, 0.3e-3, 0.45e-3, 0.74e-3, 1.5e-3, 2.2e-3, 4.3e-3, 5.7e-3]
    times = [0.0]
    for s in step:
        for b in burst[:2]:
            times.append(times[-1] + b)
        times.append(times[-1] + s)
    for b in burst[2:]:
        times.append(times[-1] + b)
    assert len(group_bursts(times)) == len(step) + 1


def test_quantile() -> None:
    assert quantile([], 0.5) is None
    assert quantile([3.0], 0.9) == 3.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5


# --- property-based: no input from the server makes stream_completion raise ---------------------

_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_KEYS = [
    "meta_info",
    "completion_tokens",
    "prompt_tokens",
    "finish_reason",
    "type",
    "spec_verify_ct",
    "spec_accept_length",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "choices",
    "text",
    "delta",
    "content",
    "usage",
    "metrics",
    "timings",
    "predicted_n",
    "predicted_ms",
    "draft_n",
    "draft_n_accepted",
    "tokens",
    "tokens_predicted",
    "tokens_evaluated",
    "stop",
    "stop_type",
    "error",
    "message",
]
# Objects shaped like the dialects' chunks, with the values (and nesting) scrambled.
_chunk = st.recursive(
    st.dictionaries(st.sampled_from(_KEYS), _json, max_size=6),
    lambda inner: st.dictionaries(
        st.sampled_from(_KEYS), st.one_of(_json, inner, st.lists(inner, max_size=2)), max_size=6
    ),
    max_leaves=8,
)
_event = st.one_of(
    _chunk.map(lambda o: "data: " + orjson.dumps(o).decode()),
    _json.map(lambda o: "data: " + orjson.dumps(o).decode()),
    st.text(max_size=30),
    st.just("data: [DONE]"),
)
_PATHS = {
    Dialect.SGLANG: "/generate",
    Dialect.VLLM: "/v1/completions",
    Dialect.LLAMACPP: "/completion",
    Dialect.OPENAI: "/v1/completions",
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dialect=st.sampled_from(sorted(_PATHS, key=lambda d: d.value)),
    events=st.lists(_event, max_size=12),
    cut=st.integers(min_value=0, max_value=2000),
)
def test_random_and_truncated_streams_never_raise(
    dialect: Dialect, events: list[str], cut: int
) -> None:
    body = ("\n".join(events) + "\n").encode()[:cut]
    server = FakeServer()
    route(server, _PATHS[dialect], body)
    clock = Scripted([0.01 * i for i in range(len(events) + 3)])
    r, seen = asyncio.run(run(server, info(dialect), clock))
    assert r.completion_tokens >= 0 and len(seen) == len(r.chunks)
    assert [c.tokens for c in r.chunks] == sorted(c.tokens for c in r.chunks)
    assert r.error is None or "\n" not in r.error
