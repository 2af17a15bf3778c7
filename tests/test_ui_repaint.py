"""Partial repaints: the changed box must cover every cell that differs."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from specwatch.core.gpu import GpuTick
from specwatch.ui.panes import GpusPane
from specwatch.ui.panes.line_changes import changed_box, changed_regions, changed_span
from specwatch.ui.scene import build_scene
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


def test_equal_lines_have_no_span() -> None:
    s = Strip([Segment("abc", STYLES[0])])
    assert changed_span(s, Strip([Segment("abc", STYLES[0])])) is None


def test_span_narrows_inside_a_segment() -> None:
    a = Strip([Segment("12345", STYLES[0]), Segment("xyz", STYLES[1])])
    b = Strip([Segment("12945", STYLES[0]), Segment("xyz", STYLES[1])])
    assert changed_span(a, b) == (2, 3)


def test_box_covers_every_changed_cell() -> None:
    rng = random.Random(1)
    for _ in range(300):
        width, height = rng.randint(1, 40), rng.randint(1, 8)
        old_lines = [random_line(rng, width) for _ in range(height)]
        new_lines = [mutate(rng, line) for line in old_lines]
        old = [Strip(line) for line in old_lines]
        new = [Strip(line) for line in new_lines]
        box = changed_box(old, new)
        diffs = [
            (x, y)
            for y in range(height)
            for x, (a, b) in enumerate(zip(cells(old[y]), cells(new[y]), strict=True))
            if a != b
        ]
        if not diffs:
            assert box is None
            continue
        assert box is not None
        for x, y in diffs:
            assert box.contains(x, y), (x, y, box)


def differing(a: Strip, b: Strip) -> list[int]:
    return [x for x, (p, q) in enumerate(zip(cells(a), cells(b), strict=True)) if p != q]


def test_regions_are_the_changed_lines_and_cover_their_cells() -> None:
    rng = random.Random(2)
    for _ in range(300):
        width, height = rng.randint(1, 40), rng.randint(1, 8)
        old_lines = [random_line(rng, width) for _ in range(height)]
        old = [Strip(line) for line in old_lines]
        new = [Strip(mutate(rng, line)) for line in old_lines]
        regions = changed_regions(old, new)
        changed = {
            y: [
                x
                for x, (a, b) in enumerate(zip(cells(old[y]), cells(new[y]), strict=True))
                if a != b
            ]
            for y in range(height)
        }
        assert sorted(r.y for r in regions) == [y for y, xs in changed.items() if xs]
        for r in regions:
            assert r.height == 1 and r.width >= 1
            for x in changed[r.y]:
                assert r.contains(x, r.y), (x, r)


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
    assert len(after) == len(before)
    kept = [y for y in range(len(after)) if after[y] is before[y]]
    assert kept == [y for y in range(len(after)) if y != 4]


async def test_framed_lines_equal_textuals_own() -> None:
    """Each pane's finished lines (padded and filtered once per change, ``panes/frame.py``)
    are the segments Textual's styles cache would build, for every theme, before and after a
    redraw, whole and cropped."""
    from textual.widget import Widget

    from specwatch.ui.panes import ModelPane
    from specwatch.ui.panes.frame import plain_frame

    model = build_scene(seconds=200, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(150, 44)) as pilot:
        for theme in app.theme_names:
            app.theme = theme
            await settle(pilot)
            for step in range(2):
                panes = list(app.screen.query(ModelPane))
                assert len(panes) >= 6
                for pane in panes:
                    assert plain_frame(pane) is not None, pane
                    w, h = pane.region.size
                    for crop in (Region(0, 0, w, h), Region(3, h // 2, w // 2, h - h // 2)):
                        ours = [list(s) for s in pane.render_lines(crop)]
                        pane._styles_cache.clear()
                        textual = [list(s) for s in Widget.render_lines(pane, crop)]
                        assert ours == textual, (theme, step, pane.id, crop)
                tick = model.tick
                assert tick is not None
                samples = [dataclasses.replace(s, sm_clock_mhz=1500 + step) for s in tick.samples]
                model.add_tick(dataclasses.replace(tick, t=tick.t + 1, samples=tuple(samples)))
                await settle(pilot)


def test_framed_lines_filter_ansi_colours_and_skip_truecolor_ones() -> None:
    """The ANSI-to-truecolor filter still converts an ANSI colour; a line of theme (truecolor)
    styles keeps its padded strip, and a row whose content strip is unchanged is not rebuilt."""
    from rich.terminal_theme import MONOKAI
    from textual.color import Color
    from textual.filter import ANSIToTruecolor

    from specwatch.ui.panes.frame import FramedLines

    ansi, true = Style(color="red", bold=True), Style(color="#336699", dim=False)
    content = [Strip([Segment("ab", ansi), Segment("cd", true)]), Strip([Segment("abcd", true)])]
    colors = (Color(0, 0, 0), Color(10, 20, 30))
    line_filter = ANSIToTruecolor(MONOKAI)
    framed = FramedLines()

    def render() -> list[Strip]:
        return framed.render(
            Region(0, 0, 6, 3),
            6,
            (1, 1, 1),
            colors,
            [line_filter],
            lambda y: content[y] if y < len(content) else Strip.blank(4),
            lambda region: [Strip.blank(6)] * region.height,
        )

    first = render()
    from textual.style import Style as TextualStyle

    pad = TextualStyle(background=colors[0] + colors[1]).rich_style  # as Textual pads
    for y, strip in enumerate(first[1:]):
        want = Strip([Segment(" ", pad), *content[y], Segment(" ", pad)], 6).apply_filter(
            line_filter, colors[1]
        )
        assert list(strip) == list(want)
    converted = list(first[1])[1].style
    assert converted is not None and converted.color is not None
    assert converted.color.triplet is not None  # red became MONOKAI's red
    assert list(first[2])[1].style is true  # left as it was
    assert render()[1] is first[1]  # kept while its content strip is the same object


def test_text_lines_render_only_the_lines_that_changed() -> None:
    from rich.console import Console
    from rich.text import Text

    from specwatch.ui.panes.text_lines import LineKey, text_lines

    console = Console(width=80)
    rendered: dict[LineKey, list[Segment]] = {}

    def text(value: str) -> Text:
        out = Text()
        out.append("tok/s ", STYLES[0])
        out.append(f"{value}\n", STYLES[1])
        out.append("accept 3.1\n", STYLES[2])
        out.append("a line far too long for the width", STYLES[0])
        return out

    first = text_lines(text("2200"), 20, console, rendered)
    second = text_lines(text("2210"), 20, console, rendered)
    assert second == text_lines(text("2210"), 20, console)  # as a fresh render
    assert second[0] != first[0] and "".join(s.text for s in second[2]).endswith("…")
    assert second[1] is first[1] and second[2] is first[2]  # kept, not rendered again
    assert len(rendered) == 3


RUNS = st.lists(
    st.tuples(
        st.text(alphabet="ab \n–é界…", max_size=12),
        st.sampled_from([None, Style(), *STYLES]),
    ),
    max_size=12,
)


@given(runs=RUNS, width=st.integers(1, 30))
def test_a_panes_text_reads_as_rich_renders_it(
    runs: list[tuple[str, Style | None]], width: int
) -> None:
    """The fast path for a text built by ``append`` gives Rich's own lines, cut alike."""
    from rich.console import Console
    from rich.text import Text

    from specwatch.ui.panes.text_lines import text_lines, text_pieces

    console = Console(width=80, color_system="truecolor")
    text = Text(no_wrap=True, overflow="ellipsis")
    for words, style in runs:
        text.append(words, style)
    assert text_pieces(text) is not None
    rich = []
    for line in text.split("\n", allow_blank=True):
        if line.cell_len > width:
            line.truncate(width, overflow="ellipsis")
        rich.append([s for s in line.render(console, end="") if s.text])
    fast = text_lines(text, width, console)
    assert [list(Segment.simplify(x)) for x in fast] == [list(Segment.simplify(x)) for x in rich]


def test_texts_rich_must_render_are_left_to_rich() -> None:
    from rich.text import Text

    from specwatch.ui.panes.text_lines import text_pieces

    styled = Text("tok/s 2200", style="bold")
    overlapping = Text("tok/s 2200")
    overlapping.stylize(STYLES[0], 0, 8)
    overlapping.stylize(STYLES[1], 4, 10)
    named = Text()
    named.append("tok/s", "bold red")
    assert text_pieces(styled) is None
    assert text_pieces(overlapping) is None
    assert text_pieces(named) is None


async def test_a_pane_nothing_dirtied_hands_back_its_lines_and_a_restyled_one_repaints() -> None:
    """The compositor asks every pane under the box of the screen's changes; one that did not
    change answers from its last paint, and a new theme or a resize paints it again."""
    from specwatch.ui.panes import VerifyPane

    model = build_scene(seconds=200, with_bench=False)
    app = make_app(model)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        verify = app.query_one(VerifyPane)
        painted: list[Region] = []
        original = verify._paint

        def paint(crop: Region) -> list[Strip]:
            painted.append(crop)
            return original(crop)

        verify._paint = paint  # type: ignore[method-assign]
        full = Region(0, 0, *verify.size)
        first = verify.render_lines(full)
        assert verify.render_lines(full) == first and len(painted) == 1
        gpus = app.query_one(GpusPane)
        gpus.refresh()  # a neighbour's repaint leaves this pane's lines as they were
        await pilot.pause()
        assert verify.render_lines(full) == first and len(painted) == 1

        verify.set_title("Verify latency · stale")  # the border row is drawn again
        await pilot.pause()
        retitled = verify.render_lines(full)
        assert "stale" in retitled[0].text and "stale" not in first[0].text
        assert retitled[1:] == first[1:]

        app.theme = "light" if app.theme != "light" else "dark"
        await pilot.pause()
        relit = verify.render_lines(full)
        assert len(painted) >= 3 and relit != first
        await pilot.resize_terminal(150, 48)
        await pilot.pause()
        assert verify.render_lines(Region(0, 0, *verify.size))[0].cell_length == verify.size.width
        assert len(painted) >= 4


async def test_the_screen_the_lower_row_and_the_footer_are_drawn_again_only_when_dirty() -> None:
    from textual.widgets import Footer

    from specwatch.ui.kept_paint import KeptPaint

    app = make_app(build_scene(seconds=200, with_bench=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        widgets = [app.screen, app.query_one("#lower"), app.query_one(Footer)]
        painted: dict[str, list[Region]] = {}
        for widget in widgets:
            assert isinstance(widget, KeptPaint)
            calls = painted[type(widget).__name__] = []
            original = widget._paint

            def paint(
                crop: Region,
                calls: list[Region] = calls,
                original: Callable[[Region], list[Strip]] = original,
            ) -> list[Strip]:
                calls.append(crop)
                return original(crop)

            widget._paint = paint  # type: ignore[method-assign]
        firsts = [w.render_lines(Region(0, 0, *w.size)) for w in widgets]
        drawn = {name: len(calls) for name, calls in painted.items()}
        assert all(n <= 1 for n in drawn.values()), drawn
        app.query_one(GpusPane).refresh()  # the compositor repaints a box over all three
        await pilot.pause()
        again = [w.render_lines(Region(0, 0, *w.size)) for w in widgets]
        assert again == firsts
        assert {name: len(calls) for name, calls in painted.items()} == drawn
        app.theme = "light" if app.theme != "light" else "dark"
        await pilot.pause()
        relit = [w.render_lines(Region(0, 0, *w.size)) for w in widgets]
        assert all(len(painted[name]) > n for name, n in drawn.items()), painted
        assert relit[0] != firsts[0]  # the screen's background follows the theme
