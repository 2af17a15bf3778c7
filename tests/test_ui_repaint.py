"""Partial repaints: the changed box must cover every cell that differs."""

from __future__ import annotations

import random

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from specwatch.ui.panes.base import changed_box, changed_span

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
