"""The live verdict: reference tracking on synthetic readings, and the story on the simulator."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import pytest
from rich.style import Style

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick
from specwatch.core.outcomes import Outcome
from specwatch.core.server import MetricsWindow
from specwatch.session.events import GpuTicked, MetricsScraped, ServerReady, VerdictChanged
from specwatch.session.live_verdict import REFERENCE_S, LiveVerdict
from specwatch.session.verdict_state import WAITING, LiveVerdictState
from specwatch.sim.demo import demo_world
from specwatch.sim.fake_nvml import FakeNvml
from specwatch.sim.server import SimServer
from specwatch.ui.panes.verdict import verdict_text
from tests.session_world import START_T, Collector, ManualSim, drive_until
from tests.sim_fixtures import ManualClock

MAX = 1980


def _inventory(n: int = 2) -> GpuInventory:
    return GpuInventory(True, gpus=tuple(GpuStatic(i, max_sm_clock_mhz=MAX) for i in range(n)))


def _tick(t: float, clock: int, reasons: int = 0) -> GpuTick:
    samples = tuple(
        GpuSample(i, t, sm_clock_mhz=clock, clock_event_reasons=reasons, util_gpu_pct=100)
        for i in range(2)
    )
    return GpuTick(t, t, samples, 0.1)


def _window(t: float, tok_s: float, running: float = 3.0, accept: float = 2.5) -> MetricsWindow:
    return MetricsWindow(
        t=t, dt=1.0, gen_tok_s=tok_s, requests_running=running, accept_length=accept
    )


def _feed(v: LiveVerdict, t0: float, seconds: int, tok_s: float, clock: int, **kw: float) -> None:
    for i in range(seconds):
        t = t0 + i
        wobble = (-1.0) ** i * 0.004 * tok_s  # a little noise, so Welch has a spread
        v.add_tick(_tick(t, clock))
        v.add_window(_window(t, tok_s + wobble, **kw))


def _steady(v: LiveVerdict) -> float:
    """Ready at 0, warm, and a reference collected; returns the time reached."""
    v.set_inventory(_inventory())
    v.server_ready(0.0)
    _feed(v, 1.0, 5 + int(REFERENCE_S), 800.0, MAX)
    return 6.0 + REFERENCE_S


def test_reference_is_the_first_steady_window_after_warmup() -> None:
    v = LiveVerdict()
    assert v.state().phase == "waiting"
    v.set_inventory(_inventory())
    v.server_ready(0.0)
    v.add_window(_window(1.0, 400.0))
    assert v.state().phase == "warmup"
    v.add_window(_window(2.0, 800.0))
    v.add_window(_window(3.0, 800.0))
    assert v.state().phase == "reference"
    assert "reference" in v.state().detail
    _feed(v, 4.0, int(REFERENCE_S) + 2, 800.0, MAX)
    state = v.state()
    assert state.reference is not None and state.reference.kind == "steady"
    assert state.outcome is Outcome.NO_CHANGE
    assert state.reference.figures.clock_deficit == 0.0


def test_boost_clock_seven_percent_lower_with_no_reason_is_gpu_state() -> None:
    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 800.0 * 0.94, round(MAX * 0.93))
    state = v.state()
    assert state.outcome is Outcome.GPU, state.judgement
    assert state.current is not None and state.current.clock_reasons == frozenset()
    deficit = state.current.clock_deficit
    assert deficit is not None and -0.08 < deficit < -0.06


def test_slower_at_the_same_clock_is_not_gpu_state() -> None:
    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 800.0 * 0.9, MAX)
    assert v.state().outcome is Outcome.CODE


def test_more_running_requests_is_not_blamed_on_the_code() -> None:
    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 800.0 * 0.8, MAX, running=8.0)
    state = v.state()
    assert state.outcome is Outcome.LOAD
    assert state.judgement is not None
    assert "load changed: running requests 3.0 → 8.0" in state.judgement.reason


def test_a_shorter_accept_length_is_acceptance_changed_in_compares_words() -> None:
    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 800.0 * 0.8, MAX, accept=2.0)
    state = v.state()
    assert state.outcome is Outcome.ACCEPTANCE
    assert state.judgement is not None
    assert "accept length 2.50 → 2.00 (-20.0%) accounts for it" in state.judgement.reason


def test_fewer_drafted_steps_at_the_same_accept_length_is_acceptance_changed() -> None:
    # the drafted steps accept as before, but a fifth of the steps now draft nothing
    # (an n-gram that stopped matching): tok/s follows the tokens per step
    v = LiveVerdict()
    t = _steady(v)
    for i in range(30):
        v.add_tick(_tick(t + i, MAX))
        w = _window(t + i, 800.0 * 0.8 + (-1.0) ** i * 3.2)
        v.add_window(dataclasses.replace(w, tokens_per_step=2.0, decode_steps=100.0))
    state = v.state()
    assert state.outcome is Outcome.ACCEPTANCE, state.judgement
    assert state.judgement is not None and "2.50 → 2.00" in state.judgement.reason


def test_a_mark_makes_the_last_window_the_reference() -> None:
    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 30, 700.0, round(MAX * 0.9))
    assert v.state().outcome is Outcome.GPU
    v.mark(t + 29)
    state = v.state()
    assert state.reference is not None and state.reference.kind == "marked"
    assert state.outcome is Outcome.NO_CHANGE


def test_no_traffic_is_idle_not_a_verdict() -> None:
    v = LiveVerdict()
    t = _steady(v)
    for i in range(40):
        v.add_window(MetricsWindow(t=t + i, dt=1.0, gen_tok_s=0.0, requests_running=0.0))
    assert v.state().phase == "idle" and v.state().outcome is None


def test_late_scrapes_under_traffic_are_too_few_readings_not_idle() -> None:
    """A monitor starved of CPU (seen beside a real vLLM CPU server that held both cores)
    scraped about every 10 s: three readings in 30 s, every one with traffic. That is too few
    to judge, and saying "no traffic" was false."""
    v = LiveVerdict()
    t = _steady(v)
    for i in range(1, 5):
        v.add_window(MetricsWindow(t=t + 10.0 * i, dt=10.0, gen_tok_s=790.0, requests_running=3.0))
    state = v.state()
    assert state.phase == "waiting" and state.outcome is None
    assert state.detail.startswith("too few readings to judge: 3 in 30 s, 10 s apart")
    # Scrapes on time again: judged as before.
    _feed(v, t + 41.0, int(REFERENCE_S) + 1, 800.0, MAX)
    assert v.state().phase == "judged"


def test_a_restart_warms_up_again_and_keeps_the_reference() -> None:
    v = LiveVerdict()
    t = _steady(v)
    v.add_window(MetricsWindow(t=t, dt=1.0, gen_tok_s=0.0, restarted=True))
    assert v.state().phase == "warmup"
    assert v.reference is not None and v.reference.kind == "steady"


async def _step(sim: ManualSim, seen: Collector) -> None:
    """One simulated second; returns once a scrape and a GPU tick have read the new time."""
    t = sim.advance(1.0)
    await drive_until(
        None,
        lambda: (
            (not seen.of(ServerReady) or any(e.window.t >= t for e in seen.of(MetricsScraped)[-3:]))
            and any(e.tick.t >= t for e in seen.of(GpuTicked)[-3:])
        ),
        10,
    )


@pytest.mark.parametrize(
    ("scenario", "outcome"),
    [
        ("drift", Outcome.GPU),
        ("regression", Outcome.CODE),
        ("eager", Outcome.CODE),
        ("memcap", Outcome.GPU),
    ],
)
@pytest.mark.slow
async def test_story_scenario_is_called_within_a_minute(
    scenario: str, outcome: Outcome, tmp_path: Path
) -> None:
    """The demo's scenarios on a manual clock, through HTTP and the fake NVML, judged by the
    headless session itself (its VerdictChanged events): the boost clock 8% lower with no
    reason set is GPU state; a slower step at the same clock is not; on a memory-bound decode a
    memory clock 9% lower with the SM clock steady is GPU state, and the line names the memory
    clock; a verify step that lost its CUDA graphs is not GPU state either, and the profile
    taken then says so."""
    clock = ManualClock(START_T)
    world, script = demo_world(gpus=4, clock=clock, scenario=scenario, seed=3)
    assert script is not None
    server = SimServer(world)
    url = server.start()
    sim = ManualSim(world, server, clock, url)
    seen = Collector()

    def state() -> LiveVerdictState:
        verdicts = seen.of(VerdictChanged)
        return verdicts[-1].state if verdicts else WAITING

    # The poller stamps a window with the clock when its request starts; the test moves the
    # clock right after it sees a scrape. A scrape already in flight at that moment would be
    # stamped before the step and served after it, a window with the wrong width. A scrape
    # interval well above the test's 20 ms polling keeps the poller asleep while time moves.
    session = sim.session(FakeNvml(world.gpus, clock=clock.now), metrics_interval_s=0.15)
    session.subscribe(seen)
    try:
        session.start()
        sim.advance(world.loaded_at - clock.now())
        # The poller's retry runs in real time: let it find the loaded server before time moves.
        await drive_until(None, lambda: bool(seen.of(ServerReady)), 20)
        while state().outcome is None:
            await _step(sim, seen)
        assert clock.now() < script.change_at, "the reference must come before the drift"
        while clock.now() < script.change_at:
            assert state().outcome is Outcome.NO_CHANGE, state().judgement
            await _step(sim, seen)
        while state().outcome is not outcome:
            assert clock.now() - script.change_at <= 60.0, state().judgement
            assert state().outcome in (Outcome.NO_CHANGE, None)
            await _step(sim, seen)
        judgement = state().judgement
        assert judgement is not None and judgement.outcome is outcome
        if scenario == "drift":
            assert judgement.outcome.wording == "explained by GPU state"
            assert judgement.term == "SM clock"
        if scenario == "memcap":
            assert judgement.term == "memory clock", judgement
            # Called while the window still straddles the cut: the mean lies between the clocks.
            # The fake NVML's GPM gives the DRAM activity the memory term is weighted by.
            assert re.search(
                r"memory clock 2619 → 2[34]\d\d MHz at \d+% DRAM activity", judgement.reason
            ), judgement
            assert "decode is memory-bound" in judgement.reason
            line = verdict_text(state(), {"text": Style(), "dim": Style()}).plain
            assert line.startswith(" explained by GPU state (memory clock) "), line
            assert re.search(r"memory clock 2[34]\d\d vs 2619 MHz", line), line
        assert session.verdict is not None and session.verdict.state() == state()
        if scenario == "eager":
            from specwatch.session.events import ProfileFinished
            from specwatch.session.profile_job import ProfileOptions

            assert session.start_profile(ProfileOptions(steps=6, out_dir=tmp_path)) is not None
            await drive_until(None, lambda: bool(seen.of(ProfileFinished)), 60)
            (done,) = seen.of(ProfileFinished)
            assert done.verdict.startswith("VERIFY ran eager: 0 graph launches"), done
        current = state().current
        assert current is not None and current.clock_reasons == frozenset()
        assert current.clock_deficit is not None
        if scenario == "drift":
            assert current.clock_deficit < -0.05
        else:
            assert current.clock_deficit == 0.0
    finally:
        await session.aclose()
        server.stop()
        await asyncio.sleep(0)


def test_a_snapshot_reference_judges_from_the_first_window() -> None:
    from specwatch.bench.snapshot import load_snapshot
    from specwatch.session.verdict_state import snapshot_reference

    snap = load_snapshot("tests/data/snapshot-v1.json")
    ref = snapshot_reference(snap, "snapshot-v1.json")
    assert ref.kind == "snapshot" and ref.figures.tok_s == tuple(snap.run_tok_s)
    assert ref.figures.slowest_sm_clock_mhz is not None
    v = LiveVerdict(ref)
    v.set_inventory(_inventory())
    v.server_ready(0.0)
    _feed(v, 1.0, 40, ref.figures.mean_tok_s or 0.0, round(ref.figures.slowest_sm_clock_mhz))
    state = v.state()
    assert state.reference is ref and state.phase == "judged"


def _own_benchmark(v: LiveVerdict, t: float, seconds: int) -> float:
    """The session's own benchmark: more load (running 3.8 against 3.0), tok/s +13%."""
    v.own_load_started(t)
    _feed(v, t, seconds, 800.0 * 1.13, MAX, running=3.8)
    v.own_load_ended(t + seconds)
    return t + seconds


def test_the_sessions_own_benchmark_is_never_judged_as_code() -> None:
    v = LiveVerdict()
    t = _steady(v)
    v.own_load_started(t)
    phases = []
    for i in range(40):
        _feed(v, t + i, 1, 800.0 * 1.13, MAX, running=3.8)
        phases.append(v.state().phase)
        assert v.state().outcome is None, v.state()
    assert set(phases) == {"benchmark"}
    assert "your benchmark is the load" in v.state().detail
    v.own_load_ended(t + 40)
    _feed(v, t + 40, int(REFERENCE_S) - 2, 800.0, MAX)
    assert v.state().phase == "benchmark"  # the benchmark is still inside the current window
    _feed(v, t + 38 + REFERENCE_S, 5, 800.0, MAX)
    assert v.state().outcome is Outcome.NO_CHANGE


def test_a_profile_taken_live_is_never_judged_and_ends_on_its_own_event() -> None:
    from specwatch.session.events import ProfileFinished, ProfileProgress

    v = LiveVerdict()
    t = _steady(v)
    # asking is not yet profiling: only an armed profiler slows the server's steps
    v.feed(ProfileProgress(t, "asking", "asking sglang to profile 20 steps"))
    assert v.state().phase == "judged"
    v.feed(ProfileProgress(t, "armed", "profiler armed"))
    for i in range(10):
        _feed(v, t + i, 1, 800.0 * 0.7, MAX)  # profiled steps are slower
        assert v.state().phase == "profiling" and v.state().outcome is None, v.state()
    assert "profiling the server" in v.state().detail
    # a benchmark's end does not end the profile
    v.own_load_ended(t + 10)
    _feed(v, t + 10, 1, 800.0 * 0.7, MAX)
    assert v.state().phase == "profiling"
    v.feed(ProfileFinished(t + 11, "finished", "VERIFY ran eager", None, None, None, None))
    _feed(v, t + 11, int(REFERENCE_S) + 2, 800.0, MAX)
    assert v.state().outcome is Outcome.NO_CHANGE


def test_a_mark_right_after_a_benchmark_waits_for_a_window_without_it() -> None:
    v = LiveVerdict()
    t = _own_benchmark(v, _steady(v), 40)
    v.mark(t)  # the last 30 s are the benchmark's load: not a reference
    assert v.state().phase == "reference"
    _feed(v, t, int(REFERENCE_S) + 2, 700.0, MAX)
    state = v.state()
    assert state.reference is not None and state.reference.kind == "marked"
    assert state.reference.figures.running_requests == pytest.approx(3.0)
    assert state.reference.figures.mean_tok_s == pytest.approx(700.0, rel=0.01)


def test_a_mark_during_a_benchmark_takes_the_window_after_it() -> None:
    v = LiveVerdict()
    t = _steady(v)
    v.own_load_started(t)
    _feed(v, t, 10, 900.0, MAX, running=3.8)
    v.mark(t + 10)
    assert "after your benchmark ends" in v.state().detail
    v.own_load_ended(t + 10)
    _feed(v, t + 10, int(REFERENCE_S) + 2, 700.0, MAX)
    state = v.state()
    assert state.reference is not None and state.reference.kind == "marked"
    assert state.reference.figures.running_requests == pytest.approx(3.0)


def test_a_server_without_traffic_is_idle_not_warming_up() -> None:
    # issue 21 item 15: `specwatch sim` (no traffic) watched read "server warming up" forever.
    v = LiveVerdict()
    v.set_inventory(_inventory())
    v.server_ready(0.0)
    for i in range(1, 200):
        v.add_window(MetricsWindow(t=float(i), dt=1.0, gen_tok_s=0.0, requests_running=0.0))
        assert v.state().phase == "idle", (i, v.state())
    assert "idle" in v.state().detail
    v.add_window(_window(200.0, 400.0))
    assert v.state().phase == "warmup"  # timed from its first traffic, not from t=0


def test_a_server_restarted_with_another_draft_length_is_configuration_changed() -> None:
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.server import Dialect, ServerInfo, SpecConfig
    from specwatch.session.events import ServerIdentified

    def process(draft: int, pid: int) -> ServerIdentity:
        argv = ("llama-server", "-m", "t.gguf", "-md", "d.gguf", "--spec-draft-n-max", str(draft))
        return ServerIdentity(pid=pid, cmdline=argv)

    info = ServerInfo("http://x:8080", Dialect.LLAMACPP, spec=SpecConfig(enabled=True))
    v = LiveVerdict()
    v.set_inventory(_inventory())
    v.feed(ServerReady(0.0, info))
    v.feed(ServerIdentified(0.5, process(4, 100)))
    _feed(v, 1.0, 5 + int(REFERENCE_S), 800.0, MAX)
    t = 6.0 + REFERENCE_S
    assert v.reference is not None
    v.feed(ServerReady(t, info))  # restarted: a new process, draft length 1
    v.feed(ServerIdentified(t + 0.5, process(1, 200)))
    _feed(v, t + 1, 40, 680.0, MAX)
    state = v.state()
    assert state.outcome is Outcome.CONFIG, state
    assert state.judgement is not None
    assert state.judgement.reasons[0] == (
        "configuration changed: draft length 4 → 1 (--spec-draft-n-max)"
    )
    line = verdict_text(state, {k: Style() for k in ("dim", "text", "load")}, width=100).plain
    assert line.startswith(" configuration changed  · draft length 4 → 1 (--spec-draft-n-max)")
    v.feed(ServerReady(t + 50, info))  # back at 4: like for like again
    v.feed(ServerIdentified(t + 50.5, process(4, 300)))
    _feed(v, t + 51, 40, 800.0, MAX)
    assert v.state().outcome is Outcome.NO_CHANGE, v.state()


def test_a_lost_server_is_not_judged_until_it_answers_again() -> None:
    from specwatch.core.server import Dialect, ServerInfo
    from specwatch.session.events import ServerLost
    from specwatch.session.live_verdict import AWAY

    v = LiveVerdict()
    t = _steady(v)
    _feed(v, t, 40, 800.0, MAX)
    assert v.state().phase == "judged"
    v.feed(ServerLost(t + 41, "connection refused"))
    state = v.state()
    assert (state.phase, state.detail, state.judgement) == ("waiting", AWAY, None)
    assert state.reference is not None  # kept for when it is back
    v.feed(ServerLost(t + 50, "connection refused"))  # each failed try says it again
    assert v.state().detail == AWAY
    v.feed(ServerReady(t + 60, ServerInfo("http://x", Dialect.VLLM)))
    assert v.state().detail != AWAY
    _feed(v, t + 61, 40, 800.0, MAX)
    assert v.state().phase == "judged"
    # never ready yet: a server refusing from the start is still waited for
    fresh = LiveVerdict()
    fresh.feed(ServerLost(1.0, "HTTP 401"))
    assert fresh.state() == WAITING
