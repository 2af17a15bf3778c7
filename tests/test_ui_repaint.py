"""Partial repaints: exactly the lines whose cells differ are repainted, whole."""

from __future__ import annotations

import dataclasses
import random

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from specwatch.core.gpu import GpuTick
from specwatch.ui.panes import GpusPane
from specwatch.ui.panes.line_changes import changed_lines
from tests.scene import build_scene
from tests.test_ui_app import make_app, settle

STYLES = [Style(color="red"), Style(color="blue"), Style(bold=True)]


def cells(strip: Strip) -> list[tuple[str, Style | None]]:
    return [(ch, seg.style) for seg in strip for ch in seg.text]


def random_line(rng: random.Random, width: int) -> list[Segment]:
    segs, left = [], width
    while left:
        n = rng.randint(1, min(left, 12))
        segs.append(Segment("".join(rng.choice("ab█▁ 12") for _ in range(n)), rng.choice(STYLES)))
        left -= n
    return segs


def mutate(rng: random.Random, segs: list[Segment]) -> list[Segment]:
    out = list(segs)
    for _ in range(rng.randint(0, 3)):
        i = rng.randrange(len(out))
        text, style = out[i].text, out[i].style
        if rng.random() < 0.3:
            style = rng.choice(STYLES)
        else:
            j = rng.randrange(len(text))
            text = text[:j] + rng.choice("xyz█") + text[j + 1 :]
        out[i] = Segment(text, style)
    return out


def test_equal_lines_are_not_changed() -> None:
    s = Strip([Segment("abc", STYLES[0])])
    assert changed_lines([s], [s]) == []
    assert changed_lines([s], [Strip([Segment("abc", STYLES[0])])]) == []


def test_a_line_added_or_removed_is_changed() -> None:
    s = Strip([Segment("abc", STYLES[0])])
    assert changed_lines([s], [s, s]) == [1]
    assert changed_lines([s, s], [s]) == [1]


def test_the_changed_lines_are_those_whose_cells_differ() -> None:
    rng = random.Random(2)
    for _ in range(300):
        width, height = rng.randint(1, 40), rng.randint(1, 8)
        old_lines = [random_line(rng, width) for _ in range(height)]
        old = [Strip(line) for line in old_lines]
        new = [Strip(mutate(rng, line)) for line in old_lines]
        differ = [y for y in range(height) if cells(old[y]) != cells(new[y])]
        assert changed_lines(old, new) == differ


async def test_a_redraw_repaints_only_the_lines_that_changed() -> None:
    """One GPU's clock moves: its row (and the straggler mark, trend) repaint, not the pane,
    and the unchanged title does not repaint the whole pane either."""
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
        after = gpus._strips or []
    assert calls and all(regions for regions in calls), calls  # never the whole pane
    lines = {r.y for regions in calls for r in regions}
    assert lines == {4}, lines  # the header, then GPUs 0..3
    assert all(r.width == gpus.outer_size.width for regions in calls for r in regions)
    assert len(after) == len(before)
    kept = [y for y in range(len(after)) if after[y] is before[y]]
    assert kept == [y for y in range(len(after)) if y != 4]


async def test_a_retitled_restyled_or_resized_pane_paints_again() -> None:
    """A new title redraws the border row only; a new theme or a resize paints the pane again."""
    from specwatch.ui.panes import VerifyPane

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
