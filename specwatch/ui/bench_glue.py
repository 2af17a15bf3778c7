"""The benchmark's result and the comparison, as the TUI shows them.

The benchmark itself runs in the live session (``specwatch.session.bench_job``); this module
only turns what it measured into text, and compares the two newest snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.core.compare import Comparison
    from specwatch.core.snapshot_records import BenchResult, Snapshot


def result_text(result: BenchResult) -> str:
    """The benchmark's runs and results, as ``specwatch bench`` prints them."""
    from specwatch.bench.report import results_lines, run_lines

    return "\n".join([*run_lines(result), *results_lines(result)])


def finished_notice(body: str, snapshot: Path | None) -> str:
    """The notice of a finished benchmark: its overall line, where the snapshot went (file and
    folder: a folder left to the default is not where a newcomer looks), and ``o``."""
    overall = [line.strip() for line in body.splitlines() if "Overall:" in line]
    saved = f" · saved {snapshot.name} in {snapshot.parent}" if snapshot is not None else ""
    return (overall[0] if overall else "done") + saved + " · o: the whole result"


def latest_snapshots(directory: Path, n: int = 2) -> list[Path]:
    """The ``n`` newest benchmark snapshots (``*.json``, not the profiles kept beside them) in
    ``directory``, oldest first."""
    try:
        files = [
            p
            for p in directory.glob("*.json")
            if p.is_file() and not p.name.endswith("-profile.json")
        ]
    except OSError:
        return []
    files.sort(key=lambda p: (p.stat().st_mtime, p.name))
    return files[-n:]


def comparison_text(c: Comparison, a: Snapshot, b: Snapshot) -> str:
    """The comparison as ``specwatch compare`` prints it (``specwatch.bench.report``)."""
    from specwatch.bench.report import comparison_lines

    return "\n".join(comparison_lines(c, a, b))


def compare_latest(directory: Path) -> tuple[str, str]:
    """Compare the two newest snapshots in ``directory``: (title, text). Never raises."""
    files = latest_snapshots(directory)
    if len(files) < 2:
        return (
            "compare snapshots",
            f"need two snapshots in {directory} (found {len(files)}); press b to benchmark",
        )
    try:
        from specwatch.bench.report import no_finished_run
        from specwatch.bench.snapshot import load_snapshot
        from specwatch.core.compare import compare

        a = load_snapshot(files[0])
        b = load_snapshot(files[1])
        for path, snap in ((files[0], a), (files[1], b)):
            if snap.finished_runs == 0:
                return ("compare snapshots", no_finished_run(path.name))
        c = compare(a, b, a_name=files[0].name, b_name=files[1].name)
    except Exception as e:  # a malformed snapshot: one clear line instead of a crash
        return ("compare snapshots", f"cannot compare {files[0].name} and {files[1].name}: {e}")
    return (f"compare: {c.wording}", comparison_text(c, a, b))


__all__: Sequence[str] = ["compare_latest", "comparison_text", "finished_notice", "result_text"]
