"""Pure parts of the benchmark: prompts, counter deltas, the time series, the busy view."""

from __future__ import annotations

from pathlib import Path

import pytest

from specwatch.bench.aggregate import build_series, combine_streams, counter_deltas
from specwatch.bench.prompts import (
    BUILTIN_PROMPTS,
    PromptsError,
    builtin_prompts,
    load_prompts,
    parse_prompts,
)
from specwatch.bench.runner import busy_view
from specwatch.core.gpu import GpuSample, GpuTick
from specwatch.core.server import StreamResult


def test_builtin_prompts_are_varied_and_seeded() -> None:
    assert 28 <= len(BUILTIN_PROMPTS) <= 40
    assert len(set(BUILTIN_PROMPTS)) == len(BUILTIN_PROMPTS)
    assert builtin_prompts(1) == builtin_prompts(1)
    assert builtin_prompts(1) != builtin_prompts(2)
    assert sorted(builtin_prompts(3)) == sorted(BUILTIN_PROMPTS)


def test_prompts_from_lines_and_json(tmp_path: Path) -> None:
    lines = tmp_path / "p.txt"
    lines.write_text("first prompt\n\n  second prompt  \n")
    assert load_prompts(lines) == ["first prompt", "second prompt"]
    js = tmp_path / "p.json"
    js.write_text('["a\\nmultiline prompt", "b"]')
    assert load_prompts(js) == ["a\nmultiline prompt", "b"]
    with pytest.raises(PromptsError, match="list of strings"):
        parse_prompts('[1, "x"]', "f")
    with pytest.raises(PromptsError, match="not valid JSON"):
        parse_prompts('["x", ', "f")
    with pytest.raises(PromptsError, match="cannot read prompts file"):
        load_prompts(tmp_path / "missing.txt")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PromptsError, match="not UTF-8"):
        load_prompts(tmp_path / "bin")


def test_counter_deltas_drop_restarts_and_new_series() -> None:
    before = {"a": 10.0, "b": 5.0, "gone": 1.0}
    after = {"a": 14.0, "b": 2.0, "new": 3.0}
    assert counter_deltas(before, after) == {"a": 4.0}


def _stream(
    tokens: int, wall: float, decode: float | None, prompt: int | None = 10
) -> StreamResult:
    return StreamResult(
        completion_tokens=tokens,
        prompt_tokens=prompt,
        wall_s=wall,
        ttft_s=0.1,
        decode_s=None,
        tok_s=tokens / wall,
        decode_tok_s=decode,
        counts_exact=True,
        count_source="x",
    )


def test_combine_streams_adds_tokens_over_the_run_wall_time() -> None:
    run = combine_streams(
        [_stream(100, 1.0, 110.0), _stream(60, 0.8, 90.0, None)],
        index=2,
        warmup=False,
        prompt_index=4,
        t_start=1.0,
        t_end=2.0,
        wall_s=1.0,
    )
    assert run.completion_tokens == 160 and run.tok_s == 160.0
    assert run.decode_tok_s == 100.0
    assert run.prompt_tokens is None  # one stream did not say
    assert run.progress_line(5) == (
        "Run 2/5: 160 tokens in 1.00s = 160.0 tok/s (2 streams, prompt: ? toks)"
    )
    single = combine_streams(
        [_stream(2048, 24.85, 83.0, 32)],
        index=1,
        warmup=False,
        prompt_index=0,
        t_start=0,
        t_end=24.85,
        wall_s=24.85,
    )
    assert (
        single.progress_line(5) == "Run 1/5: 2048 tokens in 24.85s = 82.4 tok/s (prompt: 32 toks)"
    )


def _tick(t: float, clocks: list[int], idle: list[bool]) -> GpuTick:
    return GpuTick(
        t=t,
        wall_time=t,
        samples=tuple(
            GpuSample(index=i, t=t, sm_clock_mhz=c, clock_event_reasons=1 if d else 4)
            for i, (c, d) in enumerate(zip(clocks, idle, strict=True))
        ),
        cost_ms=0.1,
    )


def test_busy_view_drops_idle_edges_but_keeps_idle_gpus() -> None:
    ticks = [
        _tick(0.0, [345, 345], [True, True]),  # before prefill
        _tick(0.5, [1600, 345], [False, True]),
        _tick(1.0, [1620, 345], [False, True]),
        _tick(1.5, [345, 345], [True, True]),  # after the last step
    ]
    view = busy_view(ticks)
    gpu0 = [s.sm_clock_mhz for k in view for s in k.samples if s.index == 0]
    gpu1 = [s.sm_clock_mhz for k in view for s in k.samples if s.index == 1]
    assert gpu0 == [1600, 1620]
    assert gpu1 == [345, 345, 345, 345]


def test_series_buckets_tokens_and_gpu_state() -> None:
    arrivals = [(10.2, 5), (10.7, 5), (11.1, 10), (12.9, 1), (13.5, 2)]
    ticks = [_tick(10.5, [1980], [False]), _tick(11.6, [1700], [False])]
    phases = [(0.0, 1.0, "warmup", 1), (1.05, 2.5, "run", 1)]
    series = build_series(arrivals, ticks, phases, t0=10.0, duration_s=3.0)
    assert [p.t for p in series] == [0.0, 1.0, 2.0]
    assert [p.tok_s for p in series] == [10.0, 10.0, 3.0]  # the late arrival joins the last
    assert [p.phase for p in series] == ["warmup", "run", "run"]
    assert series[0].gpus[0].sm_clock_mhz == 1980 and series[1].gpus[0].sm_clock_mhz == 1700
    assert series[2].gpus == ()


def test_the_light_options_module_names_the_snapshot_directory_the_writer_uses() -> None:
    from specwatch.bench import snapshot
    from specwatch.commands import bench

    assert str(snapshot.DEFAULT_DIR) == bench.DEFAULT_DIR
