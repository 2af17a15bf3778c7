"""Issue 21 item 10: at 80×24, ``i`` cycled through all four intervals and then ``b`` left a
corrupt screen (the time-axis row drawn twice, a pane's border gone, stale text), every time.

The exact sequence runs against ``specwatch --demo`` in a real pty read by a terminal emulator;
what the incremental updates left on screen must have the layout a full repaint (a resize there
and back) draws: each pane border on its row, one time axis, the footer last. On d3a9b3d (the
screen's paint cache, ui/kept_paint.py, over Textual's ``_set_dirty``) the benchmark bar
arriving under the interval notices left the axis row twice and a border a row off, 3 of 3
runs; c1241b2 (the cache removed) is the first commit where this passes, and c1241b2^ with the
cache's lookup turned off passes too.
"""

from __future__ import annotations

import re

from tests.pty_screen import PtyScreen

AXIS = re.compile(r"^ (1m|5m|15m|1h) ")
INTERVAL_NOTICE = re.compile(r"sampling every ([\d.]+)s")
BORDER = re.compile(r"^─([A-Za-z][A-Za-z ]*)")


def layout(lines: list[str]) -> dict[str, object]:
    """What a repaint must agree on: pane borders by row, time-axis rows, the footer's row.

    Data (numbers, bars, notices at the right) may move between two frames; the layout may not.
    """
    borders = [(y, m.group(1).strip()) for y, row in enumerate(lines) if (m := BORDER.match(row))]
    return {
        "borders": borders,
        "axis_rows": [y for y, row in enumerate(lines) if AXIS.match(row)],
        "footer_row": next((y for y, row in enumerate(lines) if "q Quit" in row), None),
    }


def whole(shape: dict[str, object]) -> bool:
    """One time axis and the footer on the last row (24 rows)."""
    axis = shape["axis_rows"]
    return isinstance(axis, list) and len(axis) == 1 and shape["footer_row"] == 23


def ready(lines: list[str]) -> bool:
    text = "\n".join(lines)
    return "GPUs  SM" in text and "step " in text and any(AXIS.match(r) for r in lines)


def benchmark_bar(lines: list[str]) -> bool:
    return lines[-2].startswith(" benchmark ")


def intervals_noticed(lines: list[str]) -> set[str]:
    return {m.group(1) for row in lines for m in INTERVAL_NOTICE.finditer(row)}


def test_80x24_after_cycling_intervals_and_a_benchmark_matches_a_full_repaint() -> None:
    term = PtyScreen(["--demo"], cols=80, rows=24)
    try:
        # Connected, the GPUs listed and a verify step seen: the layout of a running demo.
        assert term.wait_for(lambda ls: ls[0].startswith(" connected") and ready(ls), 40), (
            term.text()
        )
        seen: set[str] = set()
        for n in range(1, 5):  # all four intervals, back to the first
            term.press("i")

            def noticed(lines: list[str], n: int = n, seen: set[str] = seen) -> bool:
                return len(seen | intervals_noticed(lines)) >= n

            assert term.wait_for(noticed, 15), (seen, term.text())
            seen |= intervals_noticed(term.lines())
            term.pump(1.0)  # as a user presses: the notices stack up, the oldest fade
        term.press("b")  # while the four notices are still up
        assert term.wait_for(benchmark_bar, 20), term.text()
        frames = []
        for _ in range(8):  # the notices time out and the benchmark runs: 4 s of updates
            term.pump(0.5)
            frames.append(term.lines())
        assert benchmark_bar(frames[-1]), "the benchmark ended too soon"

        term.resize(81, 24)
        assert term.wait_for(lambda ls: ls[2].endswith("──"), 15), term.text()
        term.resize(80, 24)  # the emulator keeps the 80 columns; the app paints them all again
        assert term.wait_for(lambda ls: whole(layout(ls)), 15), term.text()
        fresh = term.lines()
        want = layout(fresh)
        for frame in frames:
            assert layout(frame) == want, "\n".join(["incremental:", *frame, "fresh:", *fresh])
    finally:
        term.close()
