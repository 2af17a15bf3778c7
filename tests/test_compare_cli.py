"""``specwatch compare``: one exit code per verdict, refusals in one line."""

from __future__ import annotations

import argparse
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from specwatch.bench import snapshot
from specwatch.bench.report import DIFFERS, comparison_lines
from specwatch.bench.snapshot import build_snapshot, load_snapshot, write_snapshot
from specwatch.commands.compare import add_compare_arguments, run_compare
from specwatch.core.compare import compare
from specwatch.core.outcomes import EXIT_ERROR, EXIT_USAGE, Outcome
from specwatch.ui.bench_glue import comparison_text
from tests.test_compare import STORY_AFTER, STORY_BEFORE, snap_dict, synthetic_result


def args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_compare_arguments(p)
    return p.parse_args(argv)


def test_every_verdict_has_its_own_documented_exit_code() -> None:
    codes = {o: o.exit_code for o in Outcome}
    assert codes == {
        Outcome.NO_CHANGE: 0,
        Outcome.GPU: 3,
        Outcome.CODE: 4,
        Outcome.UNKNOWN: 5,
        Outcome.LOAD: 6,
        Outcome.ACCEPTANCE: 7,
        Outcome.CONFIG: 8,
        Outcome.HOST: 9,
    }
    assert EXIT_ERROR == 1 and EXIT_USAGE == 2
    assert Outcome.GPU.value == "explained by GPU state" and str(Outcome.GPU) == Outcome.GPU.wording
    p = argparse.ArgumentParser()
    add_compare_arguments(p)
    helptext = " ".join((p.epilog or "").split())
    page = (Path(__file__).parent.parent / "docs" / "bench-compare.md").read_text()
    for o in Outcome:
        assert f"{o.exit_code} {o.wording.split(':')[0]}" in helptext
        assert f"| {o.exit_code} | {o.wording.split(':')[0]}" in page


CASES: list[tuple[dict[str, Any], dict[str, Any], Outcome]] = [
    ({"tok_s": STORY_BEFORE}, {"tok_s": STORY_BEFORE}, Outcome.NO_CHANGE),
    (
        {"tok_s": STORY_BEFORE, "clocks": (1980.0, 1965.0)},
        {"tok_s": STORY_AFTER, "clocks": (1950.0, 1830.0)},
        Outcome.GPU,
    ),
    ({"tok_s": STORY_BEFORE}, {"tok_s": STORY_AFTER}, Outcome.CODE),
    (
        {"tok_s": STORY_BEFORE, "clocks": None},
        {"tok_s": STORY_AFTER, "clocks": None},
        Outcome.UNKNOWN,
    ),
]


@pytest.mark.parametrize(("a", "b", "outcome"), CASES)
def test_compare_exits_with_the_verdicts_code(
    tmp_path: Path, a: dict[str, Any], b: dict[str, Any], outcome: Outcome
) -> None:
    pa = write_snapshot(snap_dict(**a), tmp_path)
    pb = write_snapshot(snap_dict(**b), tmp_path)
    out = io.StringIO()
    assert run_compare(args([str(pa), str(pb)]), stdout=out) == outcome.exit_code
    assert f"Verdict: {outcome.wording}" in out.getvalue()


def test_a_snapshot_with_no_finished_run_is_refused(tmp_path: Path) -> None:
    good = write_snapshot(snap_dict(STORY_BEFORE), tmp_path)
    empty = build_snapshot(synthetic_result([], interrupted=True))
    bad = write_snapshot(empty, tmp_path / "empty")
    for argv in ([str(good), str(bad)], [str(bad), str(good)]):
        err = io.StringIO()
        assert run_compare(args(argv), stdout=io.StringIO(), stderr=err) == EXIT_ERROR
        assert err.getvalue() == f"specwatch compare: cannot compare: {bad} has no finished run\n"


def test_a_fifo_nobody_writes_to_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write_snapshot(snap_dict(STORY_BEFORE), tmp_path)
    fifo = tmp_path / "never.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(snapshot, "READ_TIMEOUT_S", 0.2)
    err = io.StringIO()
    assert run_compare(args([str(good), str(fifo)]), stderr=err) == EXIT_USAGE
    assert err.getvalue().count("\n") == 1
    assert f"cannot read snapshot {fifo}: not complete after 0.2 s" in err.getvalue()


def test_cli_and_tui_print_the_same_comparison(tmp_path: Path) -> None:
    pa = write_snapshot(snap_dict(STORY_BEFORE, (1980.0, 1965.0)), tmp_path)
    pb = write_snapshot(snap_dict(STORY_AFTER, (1950.0, 1830.0)), tmp_path)
    a, b = load_snapshot(pa), load_snapshot(pb)
    c = compare(a, b, a_name=pa.name, b_name=pb.name)
    out = io.StringIO()
    run_compare(args([str(pa), str(pb)]), stdout=out)
    assert comparison_text(c, a, b) + "\n" == out.getvalue()
    lines = comparison_lines(c, a, b)
    assert f"  ({DIFFERS} differs)" in lines
    assert any(line.endswith(f"  {DIFFERS}") for line in lines)
    assert not any("≠" in line for line in lines)
