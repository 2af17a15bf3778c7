"""Redraws: a pane whose lines did not change is not repainted; one that changed rebuilds only
the strips of the lines that differ (the strip cache) and repaints the Textual way."""

from __future__ import annotations

import dataclasses

from textual.geometry import Region

from specwatch.core.gpu import GpuTick
from specwatch.ui.panes.gpus import GpusPane
from tests.scene import build_scene
from tests.test_ui_app import make_app, settle


async def test_a_redraw_rebuilds_only_the_lines_that_changed() -> None:
    """One GPU's memory clock moves: only its row gets a new strip, and the pane repaints; a
    redraw whose lines are all the same does not repaint."""
    model = build_scene(seconds=200, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        gpus = app.query_one(GpusPane)
        before = list(gpus._strips or [])
        calls: list[tuple[Region, ...]] = []
        original = gpus.refresh

        def refresh(*regions: Region, **kw: bool) -> GpusPane:
            calls.append(regions)
            return original(*regions, **kw)

        gpus.refresh = refresh  # type: ignore[method-assign]
        tick = model.tick
        assert tick is not None
        samples = list(tick.samples)
        samples[3] = dataclasses.replace(samples[3], mem_clock_mhz=1234)
        model.add_tick(GpuTick(t=tick.t, wall_time=0, samples=tuple(samples), cost_ms=0.4))
        await settle(pilot)
        after = list(gpus._strips or [])
        assert calls == [()]  # the whole pane, once
        assert "1234" in after[4].text and "1234" not in before[4].text
        model.gpu_version += 1  # the model moved, the lines did not
        await settle(pilot)
        assert calls == [()]
        assert gpus._strips is not None and all(
            a is b for a, b in zip(gpus._strips, after, strict=True)
        )
    assert len(after) == len(before)
    kept = [y for y in range(len(after)) if after[y] is before[y]]
    assert kept == [y for y in range(len(after)) if y != 4]  # the header, then GPUs 0..3


async def test_a_retitled_restyled_or_resized_pane_paints_again() -> None:
    """A new title redraws the border row only; a new theme or a resize paints the pane again."""
    from specwatch.ui.panes.verify import VerifyPane

    model = build_scene(seconds=200, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        verify = app.query_one(VerifyPane)
        full = Region(0, 0, *verify.size)
        first = verify.render_lines(full)
        assert verify.render_lines(full) == first

        verify.set_title("Verify latency · stale")  # the border row is drawn again
        await pilot.pause()
        retitled = verify.render_lines(full)
        assert "stale" in retitled[0].text and "stale" not in first[0].text
        assert retitled[1:] == first[1:]

        app.theme = "light" if app.theme != "light" else "dark"
        await pilot.pause()
        assert verify.render_lines(full) != retitled
        await pilot.resize_terminal(150, 48)
        await pilot.pause()
        assert verify.render_lines(Region(0, 0, *verify.size))[0].cell_length == verify.size.width
