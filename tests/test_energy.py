"""Energy per token: the window's figure, the simulator's GPUs live, the bench line, ``compare``
and the exporter's gauges."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from specwatch.bench.aggregate import overall_of
from specwatch.bench.report import energy_line
from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.core.compare import compare
from specwatch.core.energy import PowerLog, rejected_share, snapshot_energy
from specwatch.core.gpu import GpuInventory, GpuSample, GpuTick
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.server import MetricsWindow
from specwatch.core.snapshot_records import BenchResult, Snapshot
from specwatch.exporter.readings import Readings
from specwatch.session import events as ev
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.gpus import energy_segments, summary_lines
from specwatch.ui.renderables import TableStyles
from tests.session_world import Collector, drive_until, manual_sim
from tests.test_compare import gpu_summary, synthetic_result
from tests.test_exporter import _scrape


def _tick(t: float, *powers: float | None, why: str = "n/s: not supported") -> GpuTick:
    samples = tuple(
        GpuSample(i, t, power_w=p, missing={} if p is not None else {"power_w": why})
        for i, p in enumerate(powers)
    )
    return GpuTick(t, 1.7e9 + t, samples, 0.1)


def _window(
    t: float, dt: float = 2.0, tokens: float | None = 1000.0, **kw: object
) -> MetricsWindow:
    return MetricsWindow(t=t, dt=dt, tokens=tokens, **kw)  # type: ignore[arg-type]


def test_a_window_integrates_the_power_of_every_gpu_over_its_interval() -> None:
    log = PowerLog()
    log.add(_tick(9.0, 100.0, 300.0))
    log.add(_tick(10.0, 999.0, 999.0))  # at its start: it covers the window before
    log.add(_tick(11.0, 200.0, 300.0))
    log.add(_tick(12.0, 300.0, 300.0))
    e = log.energy(_window(12.0, dt=2.0, tokens=1000.0))
    # Each reading covers the second before it: GPU 0 200 + 300 J, GPU 1 300 + 300 J.
    assert e.joules == pytest.approx(1100.0) and e.power_w == pytest.approx(550.0)
    assert e.tokens_per_joule == pytest.approx(1000.0 / 1100.0)
    assert e.joules_per_token == pytest.approx(1100.0 / 1000.0)
    assert e.gpus == (0, 1) and "GPUs 0,1 (all read)" in e.words()


def test_no_power_reading_says_why_and_gives_no_number() -> None:
    log = PowerLog()
    log.add(_tick(1.0, 100.0, None))
    log.add(_tick(2.0, 100.0, None))
    e = log.energy(_window(2.0, dt=1.0))
    assert e.joules is None and e.tokens_per_joule is None
    assert e.reason == "GPU 1 gives no power reading (n/s: not supported)"
    assert e.words().startswith("unknown: GPU 1 gives no power reading")
    none = PowerLog().energy(_window(2.0), "NVML unavailable: NVML Shared Library Not Found")
    assert none.tokens_per_joule is None and none.reason is not None
    assert none.reason.startswith("NVML unavailable")
    held = PowerLog()
    held.add(_tick(0.5, 250.0))  # the GPU ticks slower than the scrape: held over the window
    assert held.energy(_window(2.0, dt=1.0)).joules == pytest.approx(250.0)
    stale = PowerLog()
    stale.add(_tick(1.0, 100.0))
    assert stale.energy(_window(60.0, dt=1.0)).reason == "no GPU readings over the window"
    counted = PowerLog()
    counted.add(_tick(2.0, 100.0))
    no_tokens = counted.energy(_window(2.0, dt=1.0, tokens=None))
    assert no_tokens.reason == "the server reports no generated-token count"
    idle = counted.energy(_window(2.0, dt=1.0, tokens=0.0))
    assert idle.tokens_per_joule is None and idle.power_w == pytest.approx(100.0)
    assert (
        idle.words() == "unknown: no tokens generated in the window (100 W over GPU 0 (all read))"
    )


def test_rejected_share_is_rejected_over_drafted_plus_one_per_step() -> None:
    # 3 drafts a step at 50% acceptance: 1.5 of 4 verified positions rejected.
    rate = _window(1.0, draft_acceptance_rate=0.5, per_position_acceptance=(0.7, 0.5, 0.3))
    share, why = rejected_share(rate)
    assert why is None and share == pytest.approx(1.5 / 4)
    # With the counts, plain decode steps join the denominator at one position each.
    counts = _window(
        1.0,
        per_position_acceptance=(0.8, 0.5, 0.2),
        spec_drafts=100.0,
        spec_accepted_per_pos=(80.0, 50.0, 20.0),
        decode_steps=150.0,
    )
    share, why = rejected_share(counts)
    assert why is None and share == pytest.approx((300 - 150) / (400 + 50))
    assert rejected_share(_window(1.0)) == (None, "the server reports no draft acceptance")
    assert rejected_share(_window(1.0, accept_length=2.0)) == (
        None,
        "the server reports no draft length",
    )


async def test_the_simulated_gpus_give_tokens_per_joule_that_match_their_energy_counters() -> None:
    """Live on the simulator (SGLang, 2 GPUs with power): the model's figure per window agrees
    with the simulated boards' own energy counters over the same window, and the exporter's
    gauge carries the same figure."""
    with manual_sim(background_concurrency=16) as sim:
        seen = Collector()
        readings = Readings([parse_endpoint(sim.url)])
        session = sim.session()
        session.subscribe(seen)
        session.subscribe(readings)
        async with session:

            def windows() -> list[MetricsWindow]:
                return [
                    e.window
                    for e in seen.of(ev.MetricsScraped)
                    if e.window.dt > 0.5 and e.window.tokens
                ]

            # Real time for several ticks and a scrape at each simulated second.
            await drive_until(
                sim,
                lambda: len(windows()) >= 4,
                step_s=1.0,
                timeout_s=30.0,
                pause=lambda: asyncio.sleep(0.2),
            )
        model = MonitorModel()
        for event in seen.events:
            if isinstance(event, ev.GpuInventoryChanged):
                model.set_inventory(event.inventory)
            elif isinstance(event, ev.ServerReady):
                model.set_ready(event.t, event.info)
            elif isinstance(event, ev.GpuTicked):
                model.add_tick(event.tick)
            elif isinstance(event, ev.MetricsScraped):
                model.add_window(event.window)
        e = model.energy
        assert e is not None and e.tokens_per_joule is not None, e
        assert e.gpus == (0, 1)
        w = model.window
        assert w is not None and w.tokens
        # The boards' power readings alone (their energy counters withheld) integrate to the
        # same power over the window under this steady load.
        readings_only = PowerLog()
        for k in seen.of(ev.GpuTicked):
            samples = tuple(dataclasses.replace(x, energy_j=None) for x in k.tick.samples)
            readings_only.add(dataclasses.replace(k.tick, samples=samples))
        from_power = readings_only.energy(w)
        assert from_power.power_w is not None and e.power_w is not None
        assert from_power.power_w == pytest.approx(e.power_w, rel=0.1)
        assert e.power_w > 2 * 70.0  # both boards above idle: the load is on them
        assert (e.rejected_share is None) == (w.accept_length is None), e
        got = _scrape(readings)
        exported = readings.view().servers[0].energy
        assert exported is not None and exported.tokens_per_joule is not None
        assert got["specwatch_tokens_per_joule"][0][1] == pytest.approx(exported.tokens_per_joule)
        assert got["specwatch_joules_per_token"][0][1] == pytest.approx(exported.joules_per_token)
        assert "specwatch_rejected_draft_power_watts" in got


def test_the_gpu_pane_shows_the_energy_line_or_why_not() -> None:
    from tests.scene import build_scene

    m = build_scene()

    def line() -> str:
        assert m.energy is not None
        return "".join(seg.text for seg in energy_segments(m.energy, 160, TableStyles()))

    text = line()
    assert text.startswith("energy ") and "tok/J" in text and "J/tok" in text
    assert "over GPUs 0–7 (all read)" in text and "rejected drafts" in text
    assert any("tok/J" in cell.text for cell in summary_lines(m)[0])
    m.add_tick(_tick(m.now + 1.0, *([None] * 8)))
    m.add_window(_window(m.now + 1.0, dt=1.0))
    assert line().startswith("energy unknown: GPU 0 gives no power reading")
    assert not any("tok/J" in cell.text for cell in summary_lines(m)[0])


def _with_power(result: BenchResult, powers: Sequence[float]) -> Snapshot:
    """``result`` with run ``i``'s GPUs drawing ``powers[i]`` W (energy and J/token to match)."""

    def powered(gpus: Sequence[GpuRunSummary], power: float) -> tuple[GpuRunSummary, ...]:
        return tuple(gpu_summary(g.index, g.sm_clock_mean_mhz or 0.0, power=power) for g in gpus)

    runs = tuple(
        dataclasses.replace(r, gpus=powered(r.gpus, p))
        for r, p in zip(result.runs, powers, strict=True)
    )
    mean = sum(powers) / len(powers)
    overall = tuple(
        dataclasses.replace(
            g,
            power_mean_w=mean,
            energy_j=mean * 2.0 * len(runs),
            joules_per_token=mean * 2.0 / 2048,
        )
        for g in result.gpus
    )
    result = dataclasses.replace(result, runs=runs, overall=overall_of(list(runs)), gpus=overall)
    return Snapshot.from_dict(validate(build_snapshot(result, ["specwatch", "bench"])))


LEVEL = [82.4, 82.5, 82.5, 84.0, 82.6]


def test_compare_rows_and_note_for_energy_per_token_at_level_tok_s() -> None:
    a = _with_power(synthetic_result(LEVEL), [500.0, 505.0, 498.0, 502.0, 500.0])
    b = _with_power(synthetic_result(LEVEL), [600.0, 604.0, 598.0, 601.0, 603.0])
    c = compare(a, b)
    assert not c.beyond_noise
    rows = {r.name: r for r in c.rows}
    jt, tj = rows["energy per token (busy GPUs)"], rows["tokens per joule (busy GPUs)"]
    assert jt.differs and jt.key and tj.differs
    assert jt.a_value == pytest.approx(2 * 501.0 * 2.0 / 2048)
    assert tj.b_value == pytest.approx(1 / jt.b_value)
    notes = [n for n in c.notes if n.startswith("energy per token")]
    assert len(notes) == 1 and "at level tok/s" in notes[0] and "+20%" in notes[0]
    same = compare(a, _with_power(synthetic_result(LEVEL), [501.0, 499.0, 503.0, 500.0, 502.0]))
    rows = {r.name: r for r in same.rows}
    assert rows["energy per token (busy GPUs)"].key
    assert not rows["energy per token (busy GPUs)"].differs
    assert not any(n.startswith("energy per token") for n in same.notes)


def test_snapshot_energy_and_the_bench_line() -> None:
    result = synthetic_result(LEVEL)
    e = snapshot_energy(Snapshot.from_dict(validate(build_snapshot(result, ["specwatch"]))))
    # Two busy GPUs at 500 W, 1000 J each over 2048 tokens a GPU's J/token was taken over.
    assert e.joules == pytest.approx(2000.0) and e.tokens == pytest.approx(2048.0)
    # accept length 2.9 with 3 drafts a step (SGLang's 3 steps; its 4 draft tokens count the
    # root): (4 − 2.9) / 4 of the verified positions rejected.
    assert e.rejected_share == pytest.approx(1.1 / 4)
    line = energy_line(result)
    assert line.startswith("  Energy: 2 kJ over the runs, 1.02 tok/J · 0.977 J/tok")
    blind = synthetic_result(LEVEL, clocks=None)
    assert energy_line(blind) == "  Energy: unknown: no busy GPU readings"
    no_power = dataclasses.replace(
        result, gpus=tuple(dataclasses.replace(g, energy_j=None) for g in result.gpus)
    )
    assert "GPU 0 has no energy counter reading" in energy_line(no_power)
    assert isinstance(result.inventory, GpuInventory)
