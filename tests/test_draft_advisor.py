"""The draft advisor's arithmetic on hand-made windows: acceptance, step cost, syntax, text."""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import replace

import pytest

from specwatch.core.acceptance import (
    AcceptanceCounts,
    acceptance_table,
    pool_counts,
    wilson,
    z_for,
)
from specwatch.core.draft_advisor import PlainBaseline, advice_json, advice_lines, advise
from specwatch.core.draft_syntax import engine_setting, engine_syntax, ranges
from specwatch.core.server import Dialect, MetricsWindow, ServerInfo, SpecConfig
from specwatch.core.step_cost import MODEL_LINEAR, model_step_s, step_curve

VLLM = ServerInfo("http://x", Dialect.VLLM, spec=SpecConfig(enabled=True, num_draft_tokens=3))


def _window(
    t: float,
    batch: float = 4.0,
    step_s: float = 0.020,
    drafts: float = 100.0,
    per_pos: tuple[float, ...] = (80.0, 48.0, 21.6),
    decode_steps: float | None = 100.0,
) -> MetricsWindow:
    return MetricsWindow(
        t=t,
        dt=1.0,
        requests_running=batch,
        step_latency_s=step_s,
        spec_drafts=drafts,
        spec_accepted_per_pos=per_pos,
        decode_steps=decode_steps,
    )


def test_wilson_interval_matches_the_textbook_figures() -> None:
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert z_for(1) == pytest.approx(1.96, abs=1e-3) and z_for(4) == pytest.approx(2.498, abs=1e-3)


def test_expected_length_is_one_plus_the_chain_sum_and_unknown_above_k() -> None:
    table = acceptance_table(pool_counts([_window(float(t)) for t in range(5)]), VLLM.spec)
    assert table.reason is None and table.k_running == 3 and table.drafts == 500
    assert [round(e.value, 4) for e in table.expected_len] == [1.8, 2.28, 2.496]
    assert len(table.expected_len) == 3  # nothing above K
    for e in (*table.p, *table.expected_len):
        assert e.low < e.value < e.high
    assert table.draft_hit == 1.0


def test_draft_hit_share_scales_the_tokens_a_step_gains() -> None:
    windows = [_window(float(t), decode_steps=200.0) for t in range(3)]
    table = acceptance_table(pool_counts(windows))
    assert table.draft_hit == 0.5
    assert table.tokens_per_step(3) == pytest.approx(1.0 + 0.5 * 1.496)
    assert table.tokens_per_step(0) == 1.0


def test_one_window_without_decode_steps_leaves_the_share_unknown() -> None:
    windows = [_window(0.0), _window(1.0, decode_steps=None), _window(2.0)]
    assert acceptance_table(pool_counts(windows)).draft_hit is None


def test_windows_counted_at_another_k_and_restarts_are_left_out() -> None:
    other_k = _window(3.0, per_pos=(80.0, 48.0))
    restarted = MetricsWindow(t=4.0, dt=1.0, restarted=True, spec_drafts=1e6,
                              spec_accepted_per_pos=(1.0, 1.0, 1.0))  # fmt: skip
    counts = pool_counts([_window(0.0), _window(1.0), _window(2.0), other_k, restarted])
    assert counts is not None
    assert counts.accepted_per_pos == pytest.approx((240.0, 144.0, 64.8))
    assert (counts.drafts, counts.decode_steps, counts.windows) == (300.0, 300.0, 3)


def test_tree_drafting_is_refused_with_its_reason() -> None:
    tree = SpecConfig(enabled=True, num_steps=3, num_draft_tokens=8, topk=4)
    table = acceptance_table(pool_counts([_window(0.0)] * 5), tree)
    assert table.expected_len == () and table.reason is not None
    assert table.reason.startswith("tree drafting (topk=4)")


def test_below_the_sample_floor_acceptance_is_withheld_with_the_count() -> None:
    table = acceptance_table(pool_counts([_window(0.0, drafts=150.0)]))
    assert table.expected_len == ()
    assert table.reason == "150 drafted steps, fewer than the 200 needed"


def test_counts_that_rise_with_position_are_not_chain_counts() -> None:
    table = acceptance_table(pool_counts([_window(0.0, drafts=500.0, per_pos=(100.0, 300.0))]))
    assert table.reason is not None and "not chain counts" in table.reason


def test_no_per_position_counters_says_which_are_needed() -> None:
    table = acceptance_table(pool_counts([MetricsWindow(t=1.0, dt=1.0, accept_length=2.0)]))
    assert table.reason is not None and "per-position acceptance counters" in table.reason


def test_step_curve_bins_by_running_batch_and_flags_a_cliff() -> None:
    times = {1: 0.010, 2: 0.011, 3: 0.066, 4: 0.013, 6: 0.015}
    windows = [
        _window(float(i), batch=b, step_s=s * (1 + 0.001 * i))
        for b, s in times.items()
        for i in range(4)
    ]
    curve = step_curve(windows)
    assert [b.batch for b in curve] == [1, 2, 3, 4, 6]
    assert [b.batch for b in curve if b.cliff is not None] == [3]
    assert curve[2].cliff == pytest.approx(0.066 / 0.012, rel=0.01)
    assert all(
        b.step_s is not None and b.step_s.low <= b.step_s.value <= b.step_s.high for b in curve
    )


def test_a_batch_with_too_few_windows_is_withheld() -> None:
    (b,) = step_curve([_window(0.0), _window(1.0)])
    assert b.step_s is None and b.reason == "2 windows at batch 4, fewer than the 3 needed"


def test_the_step_model_with_and_without_a_measured_split() -> None:
    # Observed 14 ms at K=3, plain 10 ms: linear puts 4/3 ms on each draft token.
    assert model_step_s(0.014, 3, 3, 0.010, None) == 0.014
    assert model_step_s(0.014, 0, 3, 0.010, None) == 0.010
    assert model_step_s(0.014, 1, 3, 0.010, None) == pytest.approx(0.010 + 0.004 / 3)
    assert model_step_s(0.014, 1, 3, 0.010, 0.001) == pytest.approx(0.012)


def test_vllm_ranges_merge_and_end_at_the_last_measured_batch() -> None:
    assert ranges([(1, 3), (4, 3), (8, 2), (16, 0), (24, 0)]) == [
        [1, 7, 3], [8, 15, 2], [16, 24, 0],
    ]  # fmt: skip
    assert ranges([(2, 3), (3, 0), (4, 3)]) == [[1, 2, 3], [3, 3, 0], [4, 4, 3]]


@pytest.mark.parametrize(
    ("dialect", "per_batch", "expected"),
    [
        (Dialect.VLLM, [(1, 3), (8, 3)], "keep num_speculative_tokens=3"),
        (Dialect.VLLM, [(1, 0)], "turn speculation off: drop --speculative-config"),
        (
            Dialect.VLLM,
            [(1, 2)],
            "--speculative-config '{\"num_speculative_tokens\": 2}' (add your method and "
            "model keys; the server's command line was not readable)",
        ),
        (
            Dialect.SGLANG,
            [(1, 3), (4, 2)],
            "--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3",
        ),
        (
            Dialect.LLAMACPP,
            [(1, 3), (4, 2)],
            "--spec-draft-n-max 2 (builds before llama.cpp's speculative-parameters rename "
            "take --draft-max)",
        ),
    ],
)
def test_the_recommendation_in_each_engine_s_syntax_unread(
    dialect: Dialect, per_batch: list[tuple[int, int]], expected: str
) -> None:
    assert engine_setting(dialect, 3, per_batch, main_batch=4) == expected


LLAMA = ServerInfo("http://x", Dialect.LLAMACPP, spec=SpecConfig(enabled=True, algorithm=None))


@pytest.mark.parametrize(
    ("argv", "algorithm", "expected"),
    [
        # this build rejects --draft-max: "the argument has been removed. use --spec-draft-n-max"
        (
            ("llama-server", "-md", "d.gguf", "--spec-draft-n-max", "4"),
            None,
            "--spec-draft-n-max 2",
        ),
        (("llama-server", "-md", "d.gguf", "--draft-max=4"), None, "--draft-max 2"),
        (("llama-server", "--draft", "4", "-md", "d.gguf"), None, "--draft-max 2"),
        (("llama-server", "--spec-type", "ngram-simple"), None, "--spec-ngram-simple-size-m 2"),
        (("llama-server", "--spec-type=ngram-mod"), None, "--spec-ngram-mod-n-max 2"),
        ((), "none,ngram-map-k", "--spec-ngram-map-k-size-m 2"),
        ((), "none,draft-simple", "--spec-draft-n-max 2 (builds before"),
    ],
)
def test_llama_cpp_syntax_follows_its_command_line_and_type(
    argv: tuple[str, ...], algorithm: str | None, expected: str
) -> None:
    info = replace(LLAMA, spec=replace(LLAMA.spec, algorithm=algorithm))
    syntax = engine_syntax(info, argv)
    assert engine_setting(Dialect.LLAMACPP, 4, [(1, 2)], 1, syntax).startswith(expected)
    assert engine_setting(Dialect.LLAMACPP, 4, [(1, 4)], 1, syntax).startswith("keep ")


def test_a_routers_model_is_advised_in_the_command_line_the_router_reports_for_it() -> None:
    # the process on a router's port is the router, whose command line names no model's
    # options: the live advice, the TUI's a key and a recording all pass that one
    router = ("llama-server", "--models-preset", "presets.ini", "--port", "8080")
    model = ["llama-server", "--port", "41313", "--draft-max", "4", "-md", "d.gguf"]
    info = replace(LLAMA, launch_args={"argv": model})
    syntax = engine_syntax(info, router)
    assert engine_setting(Dialect.LLAMACPP, 4, [(1, 2)], 1, syntax) == "--draft-max 2"
    assert "(builds before" in engine_setting(
        Dialect.LLAMACPP, 4, [(1, 2)], 1, engine_syntax(LLAMA, router)
    )


def test_vllm_syntax_keeps_the_users_method_and_model_and_is_pastable() -> None:
    config = {"method": "draft_model", "model": "/m/it's-draft", "num_speculative_tokens": 4}
    argv = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/t")
    syntax = engine_syntax(VLLM, (*argv, "--speculative-config", json.dumps(config)))
    assert syntax.source == "the server's command line" and syntax.caveat is None
    text = engine_setting(Dialect.VLLM, 4, [(1, 2), (8, 2)], 1, syntax)
    words = shlex.split(text)  # what a shell makes of it when pasted
    assert words[0] == "--speculative-config" and len(words) == 2
    assert json.loads(words[1]) == config | {"num_speculative_tokens": 2}
    table = engine_setting(Dialect.VLLM, 4, [(1, 4), (8, 2)], 1, syntax)
    pasted = json.loads(shlex.split(table)[1])
    assert pasted["method"] == "draft_model" and pasted["model"] == "/m/it's-draft"
    assert pasted["num_speculative_tokens_per_batch_size"] == [[1, 7, 4], [8, 8, 2]]
    old = engine_syntax(VLLM, (*argv, "--speculative-model", "/d", "--num-speculative-tokens", "4"))
    assert engine_setting(Dialect.VLLM, 4, [(1, 2)], 1, old) == "--num-speculative-tokens 2"


def test_vllm_syntax_without_a_command_line_names_the_keys_to_add() -> None:
    ngram = replace(VLLM, spec=replace(VLLM.spec, algorithm="ngram"))
    text = engine_setting(Dialect.VLLM, 3, [(1, 2)], 1, engine_syntax(ngram))
    assert text.startswith('--speculative-config \'{"method": "ngram", ')
    assert text.endswith("(add your model key; the server's command line was not readable)")


def test_advice_without_a_plain_baseline_withholds_every_batch_with_the_reason() -> None:
    advice = advise([_window(float(t)) for t in range(4)], VLLM, None)
    assert advice.recommendation is None
    assert advice.reason == "batch 4: no plain-decoding baseline at this batch"
    assert "no plain step (no baseline given)" in advice.assumptions


def test_a_plain_baseline_is_interpolated_between_measured_batches_only() -> None:
    windows = [_window(float(t), batch=b) for b in (2, 4, 8) for t in range(4)]
    advice = advise(windows, VLLM, PlainBaseline({1: 0.010, 4: 0.013}, "given"))
    plain = {b.batch: b.plain_step_s for b in advice.bins}
    assert plain[2] == pytest.approx(0.011) and plain[4] == 0.013 and plain[8] is None


def test_advice_is_json_and_lines_state_model_and_verdict() -> None:
    windows = [_window(float(t), batch=b) for b in (1, 4) for t in range(4)]
    advice = advise(windows, VLLM, PlainBaseline({1: 0.010, 4: 0.013}, "a plain run"))
    assert advice.recommendation == "keep num_speculative_tokens=3"
    lines = advice_lines(advice)
    assert lines[0] == "recommendation (vllm): keep num_speculative_tokens=3"
    assert any(MODEL_LINEAR in line for line in lines)
    assert any(line.startswith("batch 4: step 20.0 ms, plain 13.0 ms") for line in lines)
    data = json.loads(json.dumps(advice_json(advice)))
    assert data["bins"][0]["options"][3]["k"] == 3 and data["dialect"] == "vllm"


def test_a_step_time_weighs_each_window_by_the_steps_it_saw() -> None:
    # four windows of 100 steps at 2 ms and one that caught 2 steps of 10 ms (a request
    # ending): the step time is 820 ms / 402 steps, not the mean of the five windows' means
    windows = [_window(t, batch=1.0, step_s=0.002) for t in range(4)]
    windows.append(_window(4.0, batch=1.0, step_s=0.010, decode_steps=2.0))
    (curve,) = step_curve(windows)
    assert curve.step_s is not None
    assert curve.step_s.value == pytest.approx(0.820 / 402)
    assert curve.step_s.low <= curve.step_s.value <= curve.step_s.high
    # where a window has no step count, every window weighs the same
    counted = windows[:4]
    uncounted = _window(4.0, batch=1.0, step_s=0.010, decode_steps=None)
    (plain,) = step_curve([*counted, uncounted])
    assert plain.step_s is not None and plain.step_s.value == pytest.approx(0.0036)


def test_an_interval_the_data_do_not_bound_is_shown_as_unbounded() -> None:
    # step times so scattered that their t interval reaches zero: the rate and gain have no
    # upper bound, said as such rather than as a 13-digit number
    windows = [_window(float(t), batch=1.0, step_s=s) for t, s in enumerate((0.001, 0.05) * 3)]
    advice = advise(windows, VLLM, PlainBaseline({1: 0.010}, "given"))
    (b,) = advice.bins
    at_k = b.options[3]
    assert b.step_s is not None and b.step_s.low == 0.0
    assert math.isinf(at_k.tok_s.high) and math.isinf(at_k.gain.high)
    text = "\n".join(advice_lines(advice))
    assert "k'=3" in text and ", unbounded]" in text
    assert not any(len(w) > 8 and w.strip("[],+-%").isdigit() for w in text.split())
    assert advice_json(advice)["bins"][0]["options"][3]["gain"]["high"] is None


def test_no_pays_is_said_while_the_advice_is_withheld_for_want_of_a_baseline() -> None:
    windows = [_window(float(t), batch=b) for b in (1, 4) for t in range(4)]
    lines = advice_lines(advise(windows, VLLM, None))
    assert lines[0].startswith("no recommendation: batch 1: no plain-decoding baseline")
    assert not any("pays" in line for line in lines)
    # with a baseline it is said, and only where the interval says it
    paid = advice_lines(advise(windows, VLLM, PlainBaseline({1: 0.030, 4: 0.040}, "slow")))
    assert "speculation still pays at the highest advised batch (4)" in paid


def test_the_chain_model_error_widens_every_length_but_the_one_counted() -> None:
    from specwatch.core.acceptance import CHAIN_MODEL_ERROR

    table = acceptance_table(pool_counts([_window(float(t)) for t in range(50)]), VLLM.spec)
    p_low = [e.low for e in table.p]
    e2, e3 = table.expected_len[1], table.expected_len[2]
    # k'=3 is K: the sampling bound only
    assert e3.low == pytest.approx(1.0 + sum(p_low))
    # k'=2 < K: the sampling bound, then the model's own error of the accepted drafts
    assert e2.low == pytest.approx(1.0 + (p_low[0] + p_low[1]) * (1.0 - CHAIN_MODEL_ERROR))
    assert e2.value - e2.low > (e2.value - 1.0) * CHAIN_MODEL_ERROR
    assert (
        f"±{CHAIN_MODEL_ERROR:.0%} of accepted drafts"
        in advise([_window(float(t)) for t in range(50)], VLLM, None).assumptions
    )


SGLANG = ServerInfo(
    "http://x",
    Dialect.SGLANG,
    spec=SpecConfig(enabled=True, algorithm="EAGLE", num_steps=3, num_draft_tokens=4, topk=1),
)


def _sglang_window(t: float, length: float, batch: float = 2.0) -> MetricsWindow:
    return MetricsWindow(
        t=t, dt=1.0, requests_running=batch, step_latency_s=0.020, accept_length=length
    )


def test_sglang_advice_from_the_accept_length_alone_under_a_constant_acceptance() -> None:
    from specwatch.core.acceptance import CONSTANT_MODEL, constant_acceptance

    # a = 0.6 at K=3: 1 + 0.6 + 0.36 + 0.216 = 2.176 tokens per verify step
    lengths = [2.176 + d for d in (-0.02, 0.01, 0.0, 0.02, -0.01, 0.0)]
    windows = [_sglang_window(float(t), x) for t, x in enumerate(lengths)]
    assert constant_acceptance(1.176, 3) == pytest.approx(0.6, abs=1e-9)
    advice = advise(windows, SGLANG, PlainBaseline({2: 0.012}, "given"))
    table = advice.acceptance
    assert table.reason is None and table.model == CONSTANT_MODEL and table.k_running == 3
    assert [round(e.value, 3) for e in table.expected_len] == [1.6, 1.96, 2.176]
    chain = acceptance_table(pool_counts([_window(float(t)) for t in range(50)]), VLLM.spec)
    # the stated model's interval is wider than the counted chain's
    assert table.expected_len[0].high - table.expected_len[0].low > (
        chain.expected_len[0].high - chain.expected_len[0].low
    )
    assert advice.recommendation is not None
    assert advice.recommendation.endswith(
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens "
        f"{(advice.bins[0].advised_k or 0) + 1}"
    )
    lines = advice_lines(advice)
    assert any(CONSTANT_MODEL in line for line in lines)
    assert any("no per-position counters" in line for line in advice.notes)


def test_sglang_without_enough_accept_lengths_or_with_a_tree_still_refuses() -> None:
    few = [_sglang_window(float(t), 2.0) for t in range(3)]
    assert (
        advise(few, SGLANG, None).reason
        == "3 windows with an accept length, fewer than the 5 needed"
    )
    tree = replace(SGLANG, spec=replace(SGLANG.spec, topk=4))
    many = [_sglang_window(float(t), 2.0) for t in range(8)]
    assert (advise(many, tree, None).reason or "").startswith("tree drafting (topk=4)")


def test_the_known_vllm_restart_falls_inside_the_stated_interval() -> None:
    # a real vLLM at K=4: E[L(2)] predicted 2.238 [2.210, 2.266] from sampling alone, then
    # 2.311 measured after a restart at K=2; the stated interval now carries the model's error
    drafts = 7000.0
    counts = AcceptanceCounts(
        drafts, (0.748 * drafts, 0.490 * drafts, 0.33 * drafts, 0.22 * drafts), None, 30
    )
    table = acceptance_table(counts, SpecConfig(enabled=True, num_draft_tokens=4))
    e2 = table.expected_len[1]
    assert e2.value == pytest.approx(2.238)
    sampled = 1.0 + table.p[0].high + table.p[1].high
    assert sampled < 2.311  # sampling error alone misses it
    assert e2.low <= 2.311 <= e2.high
