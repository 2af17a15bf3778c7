"""Pure tests of the stream's after-the-fact figures and of bounded SSE lines (no sockets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import httpx
import pytest

from specwatch.core.server import ChunkArrival, Dialect, ServerInfo, SpecConfig, StreamResult
from specwatch.sources.http.client import TooLarge, bounded_lines
from specwatch.sources.stream_steps import (
    CUT_STEP_NOTE,
    TOKENS_PER_STEP_NOTE,
    UNKNOWN_STEP_TOKENS,
    step_tokens,
    stream_spec_figures,
    token_cap,
)


def _info(spec: SpecConfig) -> ServerInfo:
    return ServerInfo(base_url="http://h:1", dialect=Dialect.VLLM, spec=spec)


# --- token_cap --------------------------------------------------------------------------------


def test_token_cap_allows_one_step_past_max_tokens() -> None:
    assert token_cap(_info(SpecConfig(enabled=False)), 64) == 65
    # vLLM with 4 draft tokens: one step adds up to 5 tokens
    assert token_cap(_info(SpecConfig(enabled=True, num_draft_tokens=4)), 64) == 69
    # SGLang EAGLE: steps 3, draft tokens 4 -> the larger one counts
    assert step_tokens(_info(SpecConfig(enabled=True, num_steps=5, num_draft_tokens=4))) == 6


def test_token_cap_with_an_unknown_speculative_setup_is_generous() -> None:
    for spec in (SpecConfig(enabled=None), SpecConfig(enabled=True)):
        assert token_cap(_info(spec), 10) == 10 + UNKNOWN_STEP_TOKENS


# --- stream_spec_figures ----------------------------------------------------------------------


def _result(
    tokens: Sequence[int],
    *,
    finish: str | None = "length",
    rate: float | None = None,
    note: str = TOKENS_PER_STEP_NOTE,
) -> StreamResult:
    """A stream of one chunk per step: ``tokens`` cumulative per chunk."""
    chunks = tuple(ChunkArrival(0.01 * (i + 1), n) for i, n in enumerate(tokens))
    steps = len(chunks) - 1
    length = (tokens[-1] - tokens[0]) / steps if steps else None
    return StreamResult(
        completion_tokens=tokens[-1],
        prompt_tokens=5,
        wall_s=0.1,
        ttft_s=0.01,
        decode_s=0.09,
        tok_s=100.0,
        decode_tok_s=100.0,
        counts_exact=True,
        count_source="usage",
        chunks=chunks,
        steps=steps,
        tokens_per_step=length,
        accept_length=length,
        draft_acceptance_rate=rate,
        finish_reason=finish,
        notes={"accept_length": note},
    )


SPEC4 = _info(SpecConfig(enabled=True, num_draft_tokens=4))


def test_a_stream_cut_by_max_tokens_names_the_counters_as_authoritative() -> None:
    # prefill token, then steps of 3, the last cut to 1 by max_tokens = 11
    out = stream_spec_figures(_result([1, 4, 7, 10, 11]), SPEC4, 11)
    assert out.notes["accept_length"] == CUT_STEP_NOTE
    assert out.accept_length == pytest.approx(10 / 4)
    # with k = 4 known, the rate follows from the accept length
    assert out.draft_acceptance_rate == pytest.approx((10 / 4 - 1) / 4)
    assert "4 draft tokens" in out.notes["draft_acceptance_rate"]


def test_a_stream_that_ended_by_itself_keeps_its_note() -> None:
    out = stream_spec_figures(_result([1, 4, 7], finish="stop"), SPEC4, 64)
    assert out.notes["accept_length"] == TOKENS_PER_STEP_NOTE
    assert out.draft_acceptance_rate == pytest.approx((3 - 1) / 4)


def test_merged_steps_give_no_rate_and_say_why() -> None:
    # 8 tokens per chunk with k = 4: at most 5 per step, so the client saw steps merged
    out = stream_spec_figures(_result([1, 9, 17], finish="stop"), SPEC4, 64)
    assert out.draft_acceptance_rate is None
    assert "merged" in out.notes["draft_acceptance_rate"]


def test_figures_the_server_reported_are_left_alone() -> None:
    server = _result([1, 4, 7, 10, 11], note="spec_accept_length (meta_info)", rate=0.5)
    assert stream_spec_figures(server, SPEC4, 11) is server
    # a reported rate is kept even when the accept length is the stream's
    own = stream_spec_figures(_result([1, 4, 7], finish="stop", rate=0.9), SPEC4, 64)
    assert own.draft_acceptance_rate == 0.9 and "draft_acceptance_rate" not in own.notes
    # chunks grouped into bursts (steps != chunks - 1): the chunks are not steps
    bursts = _result([1, 2, 3, 4, 5], finish="stop")
    from dataclasses import replace

    grouped = replace(bursts, steps=2)
    assert stream_spec_figures(grouped, SPEC4, 64) is grouped


def test_without_k_no_rate_is_made_up() -> None:
    out = stream_spec_figures(_result([1, 4, 7], finish="stop"), _info(SpecConfig(True)), 64)
    assert out.draft_acceptance_rate is None and "draft_acceptance_rate" not in out.notes


# --- bounded_lines ----------------------------------------------------------------------------


def _response(parts: Sequence[bytes]) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    return httpx.Response(200, content=body())


async def _lines(parts: Sequence[bytes], limit: int) -> list[str]:
    return [line async for line in bounded_lines(_response(parts), limit)]


async def test_bounded_lines_splits_every_line_ending_across_chunks() -> None:
    parts = [b"data: a\r", b"\ndata: b\rdata: ", b"c\n\n", b"tail"]
    assert await _lines(parts, 100) == ["data: a", "data: b", "data: c", "", "tail"]


async def test_bounded_lines_decodes_broken_utf8_without_failing() -> None:
    assert await _lines([b"caf\xc3", b"\xa9\n\xff\n"], 100) == ["café", "\ufffd"]


async def test_a_complete_line_over_the_limit_is_refused() -> None:
    with pytest.raises(TooLarge) as caught:
        await _lines([b"x" * 11 + b"\nok\n"], 10)
    assert caught.value.size == 11 and caught.value.limit == 10


async def test_a_line_that_keeps_growing_is_refused_before_it_ends() -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        for i in range(1_000):
            sent.append(i)
            yield b"y" * 64

    with pytest.raises(TooLarge) as caught:
        async for _ in bounded_lines(httpx.Response(200, content=endless()), 1_000):
            pass
    assert caught.value.size is None  # its end never came
    assert len(sent) <= 17  # stopped just past the limit, not at the end of the body


async def test_a_body_ending_in_a_lone_cr_ends_its_last_line() -> None:
    assert await _lines([b"a\r", b"b\r"], 100) == ["a", "b"]
    assert await _lines([b"a\r", b"\r\n"], 100) == ["a", ""]


# --- the probe's stream against its window ------------------------------------------------------


def _stream(length: float, rate: float, rate_note: str) -> StreamResult:
    return StreamResult(
        256, 8, 0.3, 0.01, 0.29, 850.0, 880.0, True, "usage", tokens_per_step=length,
        accept_length=length, draft_acceptance_rate=rate,
        notes={"accept_length": TOKENS_PER_STEP_NOTE, "draft_acceptance_rate": rate_note},
    )  # fmt: skip


def test_the_probe_leaves_out_step_figures_where_not_every_step_drafted() -> None:
    from specwatch.commands.probe import _stream_spec
    from specwatch.core.server import MetricsWindow
    from specwatch.sources.probe import stream_checked

    sparse = MetricsWindow(t=1.0, dt=0.3, accept_length=5.0, tokens_per_step=1.16)
    # vLLM: both figures come from the steps (a rate of (1.16 - 1) / 4 = 4%)
    estimated = _stream(
        1.16, 0.04, "(accept length - 1) / 4 draft tokens per step, from the stream's steps"
    )
    vllm = stream_checked(estimated, sparse)
    assert (vllm.accept_length, vllm.draft_acceptance_rate, vllm.tokens_per_step) == (
        None,
        None,
        1.16,
    )
    assert (
        _stream_spec(vllm)
        == "not every step drafted: the accept length and acceptance are the window's"
    )
    # llama.cpp: the rate is the server's own for the request (its timings) and stays
    timed = stream_checked(_stream(1.31, 1.0, "draft_n_accepted / draft_n (timings)"), sparse)
    assert (timed.accept_length, timed.draft_acceptance_rate) == (None, 1.0)
    assert _stream_spec(timed) == (
        "accept length: the window's · draft acceptance 100.0% (not every step drafted)"
    )
    # every step drafted: the stream's figures stand
    dense = MetricsWindow(t=1.0, dt=0.3, accept_length=2.8, tokens_per_step=2.8)
    assert stream_checked(estimated, dense) is estimated
    assert _stream_spec(estimated) == "accept length 1.16 · draft acceptance 4.0%"
