"""The fleet screen against a real Prometheus scraping simulated nodes, and without one.

Three nodes (vLLM, vLLM, SGLang), each with the simulated dcgm-exporter; the apps run under
Pilot and the fleet session under them, as ``specwatch --prometheus URL`` runs them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot

from specwatch.core.fleet import target_of
from specwatch.session.fleet import FleetSession
from specwatch.session.fleet_probe import FleetOptions, build_fleet_source
from specwatch.sources.prometheus.fleet import FleetReading
from specwatch.ui.fleet_app import FleetApp, FleetChoice
from specwatch.ui.fleet_pane import FleetTable
from specwatch.ui.fleet_run import BACK, DrillApp, run_fleet_async
from specwatch.ui.renderables import fmt_num
from specwatch.ui.settings import AppSettings
from specwatch.ui.themes import repo_theme_dir
from tests.fleet_world import SimFleet, sim_fleet, sim_nodes
from tests.prometheus_fixture import PROMETHEUS, SKIP_REASON

needs_prometheus = pytest.mark.skipif(PROMETHEUS is None, reason=SKIP_REASON)
Step = Callable[[Pilot[object]], Awaitable[None]]


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("fleet-tui")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFleet]:
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    with sim_fleet(("vllm", "vllm", "sglang"), Path(tmp_path_factory.mktemp("prom"))) as f:
        yield f


async def until(pilot: Pilot[Any], check: Callable[[], bool], what: str, s: float = 20) -> None:
    """Let the app run until ``check()`` holds; fail with ``what`` at the deadline."""
    end = time.monotonic() + s
    while not check():
        assert time.monotonic() < end, f"not reached in {s} s: {what}"
        await pilot.pause(0.05)


def table_lines(app: FleetApp) -> list[str]:
    table = FleetTable(app.pane.rows, app.pane.totals, app.pane.gpus)
    return ["".join(seg.text for seg in line) for line in table.lines(140)]


def settings() -> AppSettings:
    return AppSettings(watch_terminal=False, live_cpu=False, theme_dirs=[repo_theme_dir()])


def assert_rows_match(app: FleetApp, reading: FleetReading) -> None:
    """Each row shows its server's figures from the session's reading, the totals are exact."""
    lines = table_lines(app)
    joins = {j.server: j for j in reading.joins}
    for s in reading.servers:
        (line,) = [x for x in lines if x.startswith(s.instance + " ")]
        cells = line.split()
        assert cells[1] == s.dialect.value and cells[2] == s.model
        assert cells[3] == fmt_num(s.window.gen_tok_s)
        assert cells[4] == fmt_num(s.window.accept_length, 2)
        assert line.rstrip().endswith(f"{len(joins[s.instance].gpus)} host")
    t = reading.totals
    steps = sum(s.rates.verify_steps_per_s or 0.0 for s in reading.servers)
    tokens = sum(s.rates.step_tokens_per_s or 0.0 for s in reading.servers)
    assert t.accept_length == pytest.approx(tokens / steps)
    assert t.gen_tok_s == pytest.approx(sum(s.window.gen_tok_s or 0.0 for s in reading.servers))
    total = lines[-1].split()
    assert total[:5] == ["all", "3", "servers", fmt_num(t.gen_tok_s), fmt_num(t.accept_length, 2)]


@needs_prometheus
async def test_fleet_rows_match_the_session(fleet: SimFleet) -> None:
    source, close = build_fleet_source(FleetOptions(prometheus=fleet.prom.url))
    # one refresh, then a long wait: the screen and session.latest are the same reading
    session = FleetSession(source, interval_s=300.0, history_s=0.0, close=close)
    app = FleetApp(session, fleet.prom.url, theme_dirs=[repo_theme_dir()], watch_terminal=False)
    try:
        async with app.run_test(size=(140, 20)) as pilot:
            await until(pilot, lambda: len(app.pane.rows) == 3, "three server rows")
            reading = session.latest
            assert reading is not None and app.reading is reading and not reading.errors
            assert_rows_match(app, reading)
            assert "3 servers · 6 GPUs" in str(app.status.render())
    finally:
        await session.aclose()


def scripted(
    steps: list[Step], seen: list[App[object]]
) -> Callable[[App[object]], Awaitable[object]]:
    """Runs each app under Pilot with the next step; returns what the app returned."""

    async def run(app: App[object]) -> object:
        seen.append(app)
        if isinstance(app, DrillApp):
            app.settings.watch_terminal = False
        step = steps.pop(0)
        async with app.run_test(size=(120, 36)) as pilot:
            await step(pilot)
            await pilot.pause()
        return app.return_value

    return run


@needs_prometheus
async def test_enter_drills_in_and_escape_returns(fleet: SimFleet) -> None:
    sglang = next(n for n in fleet.nodes if n.target.job == "sglang")
    chosen: list[FleetChoice] = []

    async def choose(pilot: Pilot[object]) -> None:
        app = pilot.app
        assert isinstance(app, FleetApp)
        await until(pilot, lambda: len(app.pane.rows) == 3, "three server rows")
        names = [r.server.instance for r in app.pane.rows]
        for _ in range(names.index(sglang.target.instance)):
            await pilot.press("down")
        await pilot.press("enter")
        assert isinstance(app.return_value, FleetChoice)
        chosen.append(app.return_value)

    async def single(pilot: Pilot[object]) -> None:
        app = pilot.app
        assert isinstance(app, DrillApp)
        model = app.model
        await until(pilot, lambda: model.server is not None, "the server detected")
        await until(
            pilot,
            lambda: (inv := model.inventory) is not None and len(inv.gpus) == 2,
            "the node's two GPUs",
        )
        assert model.server is not None and model.server.dialect.value == "sglang"
        assert model.server.model == chosen[0].model
        inv = model.inventory
        assert inv is not None and inv.available
        # exactly the GPUs the fleet joined with this server (keys are "exporter/UUID")
        assert {g.uuid for g in inv.gpus} == {k.split("/", 1)[1] for k in chosen[0].gpus}
        await pilot.press("escape")
        assert app.return_value == BACK

    async def back(pilot: Pilot[object]) -> None:
        app = pilot.app
        assert isinstance(app, FleetApp)
        # the session kept running: the rows are there at once, the cursor where it was
        assert len(app.pane.rows) == 3
        row = app.selected_row()
        assert row is not None and row.server.instance == sglang.target.instance
        await pilot.press("q")

    seen: list[App[object]] = []
    options = FleetOptions(prometheus=fleet.prom.url)
    code = await run_fleet_async(options, settings(), scripted([choose, single, back], seen), 0.2)
    assert code == 0 and [type(a).__name__ for a in seen] == ["FleetApp", "DrillApp", "FleetApp"]
    assert chosen[0].dialect == "sglang" and len(chosen[0].gpus) == 2


async def test_several_urls_without_prometheus() -> None:
    with sim_nodes(("vllm", "sglang")) as nodes:
        options = FleetOptions(
            urls=tuple(n.server_url for n in nodes),
            dcgm=(nodes[1].exporter.url,),
            nodes=(f"{nodes[1].server_url}={nodes[1].exporter.url}",),
        )
        seen: list[App[object]] = []

        async def choose(pilot: Pilot[object]) -> None:
            app = pilot.app
            assert isinstance(app, FleetApp)
            await until(
                pilot,
                lambda: (
                    len(app.pane.rows) == 2
                    and all(r.server.window.gen_tok_s for r in app.pane.rows)
                ),
                "two servers with a rate window",
            )
            assert app.reading is not None
            assert_direct(app.reading, [target_of(n.server_url) for n in nodes])
            names = [r.server.instance for r in app.pane.rows]
            for _ in range(names.index(target_of(nodes[1].server_url))):
                await pilot.press("down")
            await pilot.press("enter")

        async def single(pilot: Pilot[object]) -> None:
            app = pilot.app
            assert isinstance(app, DrillApp)
            model = app.model
            await until(
                pilot,
                lambda: (
                    model.server is not None
                    and (inv := model.inventory) is not None
                    and len(inv.gpus) == 2
                ),
                "the server and its paired exporter's GPUs",
            )
            assert model.server is not None and model.server.dialect.value == "sglang"
            await pilot.press("q")

        code = await run_fleet_async(options, settings(), scripted([choose, single], seen), 0.3)
    assert code == 0 and len(seen) == 2


def assert_direct(reading: FleetReading, instances: list[str]) -> None:
    assert sorted(s.instance for s in reading.servers) == sorted(instances)
    joins = {j.server: j for j in reading.joins}
    assert joins[instances[1]].via == "pair" and len(joins[instances[1]].gpus) == 2
    # the exporter serves on 127.0.0.1, the first server's host too: joined by host
    assert joins[instances[0]].via == "host" and len(joins[instances[0]].gpus) == 2
    assert reading.totals.gen_tok_s == pytest.approx(
        sum(s.window.gen_tok_s or 0.0 for s in reading.servers)
    )


async def test_a_drill_down_starts_from_the_fleets_history() -> None:
    """Issue 21 item 16: sit on the fleet screen, Enter: the server's screen judges at once
    against a reference from the windows the fleet read, instead of collecting one for 30-40 s."""
    with sim_nodes(("vllm",)) as nodes:
        options = FleetOptions(urls=(nodes[0].server_url,))
        chosen: list[FleetChoice] = []
        seen: list[App[object]] = []

        async def choose(pilot: Pilot[object]) -> None:
            app = pilot.app
            assert isinstance(app, FleetApp)
            instance = target_of(nodes[0].server_url)
            await until(pilot, lambda: len(app.history.get(instance, ())) >= 10, "fleet history")
            await pilot.press("enter")
            assert isinstance(app.return_value, FleetChoice)
            chosen.append(app.return_value)

        async def single(pilot: Pilot[object]) -> None:
            app = pilot.app
            assert isinstance(app, DrillApp)
            history = chosen[0].history
            assert len(history) >= 3 and history[-1].t == 0.0
            assert all(a.t < b.t for a, b in itertools.pairwise(history))
            await until(pilot, lambda: app.model.server is not None, "the server detected")
            assert app.model.verdict.phase not in ("warmup", "waiting"), app.model.verdict
            await pilot.press("q")

        code = await run_fleet_async(options, settings(), scripted([choose, single], seen), 0.3)
    assert code == 0 and len(seen) == 2


async def test_a_drill_down_seeded_with_the_fleets_windows_judges_without_a_warmup() -> None:
    from specwatch.core.server import Dialect, MetricsWindow
    from specwatch.ui.fleet_run import drill_session

    with sim_nodes(("vllm",)) as nodes:
        history = tuple(
            MetricsWindow(t=float(t), dt=1.0, gen_tok_s=500.0 + (t % 3), requests_running=4.0)
            for t in range(-59, 1)
        )
        choice = FleetChoice(
            target_of(nodes[0].server_url), Dialect.VLLM.value, None, (), (), history
        )
        options = FleetOptions(urls=(nodes[0].server_url,))
        live = await drill_session(choice, options, settings())
        verdict = live.verdict
        assert verdict is not None
        state = verdict.state()
        assert state.reference is not None and state.reference.kind == "steady", state
        verdict.server_ready(live.clock())  # the drill-down's server answers: no warmup
        assert verdict.state().phase != "warmup", verdict.state()
