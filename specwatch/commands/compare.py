"""``specwatch compare A.json B.json``: "GPU or code?", with one exit code per verdict."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from specwatch.bench.report import comparison_lines, no_finished_run
from specwatch.bench.snapshot import SnapshotError, load_snapshot
from specwatch.commands.arguments import say_error
from specwatch.core.compare import compare
from specwatch.core.outcomes import EXIT_ERROR, EXIT_USAGE, Outcome
from specwatch.core.snapshot_records import Snapshot


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch compare``."""
    p.add_argument("a", metavar="A.json", help="the baseline snapshot (e.g. the 89 tok/s one)")
    p.add_argument("b", metavar="B.json", help="the snapshot to explain")
    codes = ", ".join(f"{o.exit_code} {o.wording.split(':')[0]}" for o in Outcome)
    p.epilog = (
        "Either side may be a time range of a recording: FILE@2026-12-01T14:00/2026-12-01T14:05 "
        "(ISO 8601, local zone unless given), FILE@-2h/-1h55m (before the recording's end) or "
        "FILE@-1m/end (start and end name the recording's own); "
        "its load is reported as it was, not controlled. "
        f"Exit status: the verdict's ({codes}); {EXIT_ERROR} error, {EXIT_USAGE} usage."
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--all", action="store_true", help="also show rows that are equal")


def _load_side(path: str) -> Snapshot:
    """A snapshot file, or a recording's time range (``FILE@FROM/TO``) as a snapshot."""
    from specwatch.record.compare_range import load_range, parse_range_spec
    from specwatch.record.reader import RecordingError

    spec = parse_range_spec(path)
    if spec is None or not spec.path.is_file() or Path(path).exists():
        _not_a_recording(path)
        return load_snapshot(path)
    try:
        return load_range(spec)
    except RecordingError as e:
        raise SnapshotError(str(e)) from None


SQLITE_MAGIC = b"SQLite format 3\x00"
RANGE_EXAMPLE = "FILE@FROM/TO, e.g. {name}@-2h/-1h55m"


def _not_a_recording(path: str) -> None:
    """Say plainly when ``path`` is a recording, or half a range of one, not a snapshot.

    Raises:
        SnapshotError: ``path`` is a recording without a range, or ``FILE@FROM`` alone.
    """
    head, at, _ = path.rpartition("@")
    if at and head and not Path(path).exists() and Path(head).is_file():
        example = RANGE_EXAMPLE.format(name=Path(head).name)
        raise SnapshotError(f"{path}: a range needs both ends: {example}")
    if not Path(path).is_file():
        return  # a FIFO would block here; load_snapshot reads it with a limit
    try:
        with open(path, "rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
    except OSError:
        return  # load_snapshot says why
    if magic == SQLITE_MAGIC:
        example = RANGE_EXAMPLE.format(name=Path(path).name)
        raise SnapshotError(f"{path} is a recording: compare a time range of it, {example}")


def _side_name(path: str) -> str:
    from specwatch.record.compare_range import parse_range_spec

    spec = parse_range_spec(path)
    if spec is not None and not Path(path).exists():
        return f"{spec.path.name}@{spec.start}/{spec.end}"
    return Path(path).name


def run_compare(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run ``specwatch compare A.json B.json``; returns the exit status.

    The status is the verdict's (``specwatch.core.outcomes.Outcome.exit_code``: 0 no
    significant change, 3 explained by GPU state, 4 not explained, 5 GPU state unknown, 6 load
    changed, 7 acceptance changed, 8 configuration changed, 9 host CPU contention); 2 when
    a file is not a readable snapshot, 1 when one holds no finished run.
    """
    # sys.stdout is None when the process started with its stdout closed (``>&-``)
    out = stdout or sys.stdout or open(os.devnull, "w")  # noqa: SIM115
    err = stderr or sys.stderr or open(os.devnull, "w")  # noqa: SIM115
    snaps: list[Snapshot] = []
    try:
        for path in (args.a, args.b):
            snaps.append(_load_side(path))
    except SnapshotError as exc:
        # a profile is no snapshot: looked for only then, so a snapshot pair is read once
        profiles = _profiles(args.a, args.b, out, err)
        if profiles is not None:
            return profiles
        say_error("specwatch compare", exc, err)
        return EXIT_USAGE
    a, b = snaps
    for path, snap in ((args.a, a), (args.b, b)):
        if snap.finished_runs == 0:
            say_error("specwatch compare", no_finished_run(path), err)
            return EXIT_ERROR
    c = compare(a, b, a_name=_side_name(args.a), b_name=_side_name(args.b))
    if args.json:
        import orjson

        out.write(orjson.dumps(c.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write("\n".join(comparison_lines(c, a, b, args.all)) + "\n")
    out.flush()
    return c.verdict.exit_code


def _profile_doc(path: str) -> dict[str, object] | None:
    """The document of a ``specwatch profile`` file; ``None`` for anything else."""
    import orjson

    p = Path(path)
    try:
        # a regular file only: a FIFO or a device is left to the snapshot reader's deadline
        if not p.is_file() or p.stat().st_size > 16 * 1024 * 1024:
            return None
        doc = orjson.loads(p.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "profile" else None


def _profiles(a: str, b: str, out: TextIO, err: TextIO) -> int | None:
    """Compare two profile files (what moved, per step kind); ``None`` unless both are."""
    da, db = _profile_doc(a), _profile_doc(b)
    if da is None and db is None:
        return None
    if da is None or db is None:
        say_error(
            "specwatch compare", "compare a profile with a profile, a snapshot with a snapshot", err
        )
        return EXIT_USAGE
    from specwatch.core.profile import compare_profiles, profile_from_json

    try:
        pa, pb = profile_from_json(da), profile_from_json(db)
    except (ValueError, TypeError) as exc:
        say_error("specwatch compare", exc, err)
        return EXIT_USAGE
    lines = [f"profiles {_side_name(a)} → {_side_name(b)}", *compare_profiles(pa, pb)]
    for name, doc in ((_side_name(a), da), (_side_name(b), db)):
        lines.append(f"{name}: {str(doc.get('verdict', ''))[:400]}")
    out.write("\n".join(lines) + "\n")
    out.flush()
    return 0


__all__ = ["add_compare_arguments", "run_compare"]
