"""The host's CPU: the /proc parsers against captured files, the sampler over a /proc tree, the
spans, and the contention rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specwatch.core.host import (
    Competitor,
    CpuTimes,
    HostReading,
    HostSpan,
    ProcessCpu,
    ServerCpu,
    combine_spans,
    competitors_between,
    contention,
    host_contention,
    host_span,
)
from specwatch.core.judge import Figures, judge
from specwatch.core.outcomes import Outcome
from specwatch.sources.host import (
    HostSampler,
    parse_loadavg,
    parse_pid_stat,
    parse_schedstat,
    parse_stat,
)

# Captured from the 2-core VM these tests were written on (the intr line shortened).
PROC_STAT = """cpu  236036 0 36913 1684667 884 0 513 4897 0 0
cpu0 110823 0 20032 848049 187 0 138 2470 0 0
cpu1 125213 0 16881 836618 696 0 375 2427 0 0
intr 4815209 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 3479103
btime 1796286842
processes 8372
procs_running 3
procs_blocked 0
softirq 1897713 0 529120 6 231977 0 0 1 542339 0 594270
"""
LOADAVG = "2.86 1.37 0.55 5/106 8184\n"
PID_STAT = (
    "1 (process_api) S 0 0 0 0 -1 4194560 33498 27616899 0 3061 598 3171 191227 26843 10 -10 "
    "14 0 25 47624192 3483 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0\n"
)
SCHEDSTAT = "189282043 38674017 394\n"


def test_proc_stat_gives_the_cpu_times_the_run_queue_and_the_cores() -> None:
    cpu, running, cores = parse_stat(PROC_STAT)
    assert cpu == CpuTimes(busy=236036 + 36913 + 513, idle=1684667 + 884, steal=4897)
    assert running == 3 and cores == 2


def test_an_old_kernel_without_steal_still_reads() -> None:
    cpu, running, cores = parse_stat("cpu  10 0 5 100\ncpu0 10 0 5 100\n")
    assert cpu == CpuTimes(busy=15, idle=100, steal=0)
    assert running is None and cores == 1


def test_loadavg_and_schedstat() -> None:
    assert parse_loadavg(LOADAVG) == 2.86
    assert parse_loadavg("") is None and parse_loadavg("x y") is None
    assert parse_schedstat(SCHEDSTAT) == (189282043, 38674017)
    assert parse_schedstat("garbage") is None


def test_pid_stat_takes_the_name_between_the_outer_parentheses_and_bounds_it() -> None:
    assert parse_pid_stat(PID_STAT) == ("process_api", 598 + 3171)
    # A process may name itself anything: parentheses, spaces, escapes.
    evil = PID_STAT.replace("(process_api)", "(a) R (\x1b[2J" + "x" * 80 + ")")
    parsed = parse_pid_stat(evil)
    assert parsed is not None
    name, ticks = parsed
    assert ticks == 598 + 3171 and "\x1b" not in name and len(name) <= 32
    assert parse_pid_stat("12 (short) S 1 2") is None


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_sampler_turns_two_readings_into_a_span(tmp_path: Path) -> None:
    proc, cpu_sys, clock = tmp_path / "proc", tmp_path / "cpu", _Clock()
    _write(proc, "stat", "cpu  100 0 0 100 0 0 0 0\ncpu0 1\ncpu1 1\nprocs_running 5\n")
    _write(proc, "loadavg", "3.00 1 1 3/100 1\n")
    for tid in ("42", "43"):
        _write(proc, f"42/task/{tid}/schedstat", "1000000000 0 1\n")
    _write(proc, "42/stat", PID_STAT.replace("1 (process_api)", "42 (llama-server)"))
    _write(proc, "7/stat", PID_STAT.replace("1 (process_api)", "7 (hog)"))
    _write(cpu_sys, "cpu0/cpufreq/scaling_cur_freq", "2000000\n")
    _write(cpu_sys, "cpu1/cpufreq/scaling_cur_freq", "3000000\n")
    _write(cpu_sys, "cpu0/cpufreq/scaling_governor", "powersave\n")
    sampler = HostSampler(proc=proc, cpu_sys=cpu_sys, clock=clock, scan_interval_s=5.0)
    sampler.clock_ticks = 100
    sampler.set_server([42])
    assert sampler.sample() is None
    # Ten seconds later: 8 s of the 20 core-seconds busy, the server 2 × 3 s on a CPU and
    # 2 × 1.5 s waiting, the hog 10 s of CPU.
    clock.t += 10.0
    _write(proc, "stat", "cpu  850 0 0 1150 0 0 0 50\ncpu0 1\ncpu1 1\nprocs_running 5\n")
    for tid in ("42", "43"):
        _write(proc, f"42/task/{tid}/schedstat", "4000000000 1500000000 9\n")
    _write(
        proc, "7/stat", PID_STAT.replace("1 (process_api)", "7 (hog)").replace(" 598 ", " 1598 ")
    )
    span = sampler.sample()
    assert span is not None
    assert span.duration_s == 10.0 and span.cores == 2 and span.server_local
    assert span.busy_ratio == pytest.approx(750 / 1850)
    assert span.steal_ratio == pytest.approx(50 / 1850)
    assert span.server_cpu_cores == pytest.approx(0.6)
    assert span.server_wait_ratio == pytest.approx(3.0 / 9.0)
    assert span.run_queue == 4 and span.load_per_core == 1.5
    assert span.freq_mhz == 2500 and span.governor == "powersave"
    # The server is not its own competitor.
    assert span.competitors == (Competitor("hog", 7, pytest.approx(1.0)),)  # type: ignore[arg-type]
    assert span.others_cores == pytest.approx(750 / 1850 * 2 - 0.6)


def test_a_host_without_cpufreq_says_so(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    _write(proc, "stat", PROC_STAT)
    reading = HostSampler(proc=proc, cpu_sys=tmp_path / "none").read()
    assert reading.freq_mhz is None and "cpufreq" in reading.missing["freq_mhz"]
    assert reading.server is None and reading.processes is None


def test_the_real_host_reads() -> None:
    sampler = HostSampler(scan_interval_s=0.0)
    sampler.set_server([os.getpid()])
    assert sampler.sample() is None
    sum(i * i for i in range(200_000))
    span = sampler.sample()
    assert span is not None and span.cores == os.cpu_count()
    assert span.server_cpu_cores is not None and span.server_cpu_cores > 0


def test_competitors_are_the_top_three_by_cpu() -> None:
    a = [ProcessCpu(p, f"p{p}", 0) for p in range(1, 7)]
    b = [ProcessCpu(p, f"p{p}", p * 10) for p in range(1, 7)]
    top = competitors_between(a, b, 2.0, 100, exclude=frozenset({6}))
    assert [c.pid for c in top] == [5, 4, 3]
    assert top[0].cores == pytest.approx(0.25)


def _span(
    wait: float | None = None, queue: float | None = None, steal_ratio: float | None = None
) -> HostSpan:
    return HostSpan(
        duration_s=10.0,
        server_local=True,
        cores=2,
        server_wait_ratio=wait,
        run_queue=queue,
        steal_ratio=steal_ratio,
    )


def test_the_rule_needs_the_slower_side_short_and_the_faster_side_not() -> None:
    assert contention(_span(wait=0.5))[0].figure == "server_wait_ratio"
    assert contention(_span(wait=0.1)) == ()
    assert contention(HostSpan(duration_s=1.0, server_local=False, server_wait_ratio=0.9)) == ()
    words = host_contention(_span(wait=0.55), _span(wait=0.1), slower_name="B", faster_name="A")
    assert words is not None and "host CPU contention in B" in words and "55%" in words
    # Equally starved on both sides: the host explains nothing.
    assert host_contention(_span(wait=0.55), _span(wait=0.5)) is None
    assert host_contention(_span(queue=5.0), _span(queue=1.0)) is not None
    assert host_contention(_span(queue=5.0), _span(queue=4.5)) is None
    assert host_contention(_span(steal_ratio=0.2), _span(steal_ratio=0.0)) is not None
    assert host_contention(_span(wait=0.5), None) is None


def test_judge_names_host_contention_before_load() -> None:
    quiet = Figures(tok_s=(100.0, 101.0, 99.0), prompt_tok_s=1000.0, host=_span(wait=0.05))
    hogged = Figures(tok_s=(50.0, 52.0, 49.0), prompt_tok_s=500.0, host=_span(wait=0.6))
    j = judge(quiet, hogged, reference_name="A", current_name="B")
    assert j.outcome is Outcome.HOST and j.host is not None
    assert "host CPU contention in B" in j.reason
    # Faster with the hogs gone: the slower side is the reference.
    assert judge(hogged, quiet).outcome is Outcome.HOST
    # Without host figures the same change reads as a load change, as before.
    plain = judge(
        Figures(tok_s=quiet.tok_s, prompt_tok_s=1000.0),
        Figures(tok_s=hogged.tok_s, prompt_tok_s=500.0),
    )
    assert plain.outcome is Outcome.LOAD


def test_a_contended_side_spread_within_noise_is_named_host_contention_not_no_change() -> None:
    quiet = Figures(tok_s=(100.0, 101.0, 99.0), host=_span(wait=0.05))
    # beside hogs one run crawled and two did not: the spread hides the change
    hogged = Figures(tok_s=(100.0, 20.0, 98.0), host=_span(wait=0.6))
    j = judge(quiet, hogged, reference_name="A", current_name="B")
    assert j.outcome is Outcome.HOST
    assert "within noise, but host CPU contention in B" in j.reason
    assert "benchmark again on a quiet host" in j.reason
    # the same spread with no contention read stays within noise
    calm = Figures(tok_s=hogged.tok_s, host=_span(wait=0.05))
    assert judge(quiet, calm).outcome is Outcome.NO_CHANGE


def test_spans_combine_weighted_by_duration() -> None:
    a = HostSpan(
        duration_s=1.0,
        server_local=True,
        cores=2,
        server_wait_ratio=0.0,
        competitors=(Competitor("x", 1, 2.0),),
    )
    b = HostSpan(duration_s=3.0, server_local=True, cores=2, server_wait_ratio=0.4)
    pooled = combine_spans([a, b])
    assert pooled is not None
    assert pooled.duration_s == 4.0 and pooled.server_wait_ratio == pytest.approx(0.3)
    assert pooled.competitors == (Competitor("x", 1, 2.0),)
    assert combine_spans([]) is None


def test_a_span_between_readings_without_a_server() -> None:
    a = HostReading(t=0.0, cores=4, cpu=CpuTimes(0, 0, 0), procs_running=1)
    b = HostReading(
        t=2.0, cores=4, cpu=CpuTimes(400, 400, 0), procs_running=9, server=ServerCpu(1, 1, 1)
    )
    span = host_span(a, b)
    assert span.busy_ratio == 0.5 and span.run_queue == 8 and span.run_queue_per_core == 2
    assert span.server_cpu_cores is None and not span.server_local


def test_the_session_source_emits_spans_and_follows_the_identified_server() -> None:
    import threading

    from specwatch.core.identity import ServerIdentity
    from specwatch.record.codec import decode, encode
    from specwatch.session import events as ev
    from specwatch.session.host_source import HostSource

    got: list[ev.HostSampled] = []
    two = threading.Event()
    source = HostSource(interval_s=0.05)
    source.follow(ev.ServerIdentified(0.0, ServerIdentity(pid=os.getpid(), pids=(os.getpid(),))))
    assert source.sampler.server_pids == {os.getpid()} and source.sampler.server_local

    def emit(event: ev.SessionEvent) -> None:
        assert isinstance(event, ev.HostSampled)
        got.append(event)
        if len(got) >= 2:
            two.set()

    source.start(emit)
    try:
        assert two.wait(10.0)
    finally:
        source.stop()
    span = got[-1].span
    assert span.server_local and span.server_cpu_cores is not None
    # A recording keeps the event as it was.
    kind, data, z = encode(got[-1])
    assert kind == "HostSampled" and decode(kind, data, z) == got[-1]


def test_the_live_verdict_names_host_contention_from_the_sessions_host_readings() -> None:
    from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
    from specwatch.core.server import MetricsWindow
    from specwatch.session import events as ev
    from specwatch.session.live_verdict import REFERENCE_S, LiveVerdict

    v = LiveVerdict()
    v.set_inventory(GpuInventory(True, gpus=(GpuStatic(0, max_sm_clock_mhz=1980),)))
    v.server_ready(0.0)

    def feed(t0: float, seconds: int, tok_s: float, wait: float) -> None:
        for i in range(seconds):
            t = t0 + i
            sample = GpuSample(0, t, sm_clock_mhz=1980, util_gpu_pct=100)
            v.feed(ev.GpuTicked(GpuTick(t, t, (sample,), 0.1)))
            v.feed(ev.HostSampled(t, _span(wait=wait)))
            rate = tok_s + (-1.0) ** i * 0.004 * tok_s
            v.feed(ev.MetricsScraped(MetricsWindow(t=t, dt=1.0, gen_tok_s=rate)))

    feed(1.0, 5 + int(REFERENCE_S), 800.0, 0.05)
    feed(6.0 + REFERENCE_S, 30, 400.0, 0.6)
    state = v.state()
    assert state.outcome is Outcome.HOST, state.judgement
    assert state.current is not None and state.current.host is not None
    assert state.current.host.server_wait_ratio == pytest.approx(0.6)
    assert state.judgement is not None and "waited for a CPU 60%" in state.judgement.reason
    # A recording of the verdict keeps the host figures it rested on.
    from specwatch.record.codec import decode, encode

    changed = ev.VerdictChanged(v.now, state)
    assert decode(*encode(changed)) == changed


def test_the_gpu_pane_shows_dram_and_tensor_activity() -> None:
    from specwatch.core.gpu import GpuSample
    from specwatch.ui.panes.gpus import prof_cell

    assert prof_cell(GpuSample(0, 0.0, dram_active=0.812, tensor_active=0.153)).text == "81/15%"
    assert prof_cell(GpuSample(0, 0.0, dram_active=0.5)).text == "50/–%"
    assert prof_cell(GpuSample(0, 0.0)).text == "–"
