"""``specwatch bench`` progress: one line per run updated in place on a terminal, plain lines
elsewhere, and which accept-length figure is authoritative."""

from __future__ import annotations

import io
import re
from pathlib import Path

from specwatch.bench.progress_line import MIN_REDRAW_S, ProgressLine
from specwatch.commands.main import build_parser


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_off_a_terminal_nothing_is_drawn() -> None:
    out = io.StringIO()
    line = ProgressLine(out)
    assert not line.live
    line.show("  Run 1/5: 10 tokens", force=True)
    line.clear()
    assert out.getvalue() == ""


def test_on_a_terminal_the_line_is_redrawn_in_place_and_throttled() -> None:
    out, clock = _Tty(), _Clock()
    line = ProgressLine(out, clock=clock)
    assert line.live
    line.show("  Run 1/5: 100 tokens")
    line.show("  Run 1/5: 120 tokens")  # within MIN_REDRAW_S: dropped
    clock.t += 2 * MIN_REDRAW_S
    line.show("  Run 1/5: 9 tokens")
    assert out.getvalue() == "\r  Run 1/5: 100 tokens\r  Run 1/5: 9 tokens  "
    line.clear()
    assert out.getvalue().endswith("\r" + " " * len("  Run 1/5: 9 tokens") + "\r")
    assert "\n" not in out.getvalue()


def _run(tmp_path: Path, stdout: io.StringIO) -> str:
    from specwatch.commands.bench import run_bench

    argv = ["bench", "-n", "2", "--warmup", "0", "--max-tokens", "64", "--out", str(tmp_path)]
    argv += ["--demo", "hot", "--demo-step-factor", "0.3"]
    args = build_parser().parse_args(argv)
    assert run_bench(args, argv=argv, stdout=stdout, stderr=io.StringIO()) == 0
    return stdout.getvalue()


def test_bench_on_a_terminal_shows_tokens_so_far_and_keeps_the_run_lines(
    tmp_path: Path,
) -> None:
    text = _run(tmp_path, _Tty())
    assert "\r  Run 1/2: waiting for the first token" in text
    assert re.search(r"\r  Run 1/2: \d+ tokens in \d+\.\ds, [\d.]+ tok/s", text)
    final = [x for x in text.split("\n") if "(prompt:" in x]
    assert len(final) == 2
    for x in final:  # the drawn line is cleared, then the story's line printed whole
        assert x.startswith("\r")
        assert re.fullmatch(
            r"  Run \d/2: 64 tokens in \d+\.\d\ds = [\d.]+ tok/s \(prompt: \d+ toks\)",
            x.rsplit("\r", 1)[-1],
        )


def test_bench_off_a_terminal_prints_plain_lines_and_names_the_authority(
    tmp_path: Path,
) -> None:
    text = _run(tmp_path, io.StringIO())
    assert "\r" not in text
    runs = re.findall(r"^  Run \d/2: 64 tokens in \d+\.\d\ds = [\d.]+ tok/s \(prompt: \d+ toks\)$",
                      text, re.M)  # fmt: skip
    assert len(runs) == 2
    assert "Accept length: the server's counters are authoritative" in text
    lines = text.splitlines()
    note = next(i for i, x in enumerate(lines) if x.startswith("  Accept length:"))
    assert "Server counters: accept length" in lines[note - 1]
