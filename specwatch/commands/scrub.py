"""``specwatch scrub FILE...``: rewrite snapshots written before the secret rule, in place."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO

import orjson

from specwatch.bench.snapshot import SnapshotError, dumps, read_snapshot, validate
from specwatch.commands.arguments import say_error


def add_scrub_arguments(p: argparse.ArgumentParser) -> None:
    """The ``scrub`` subcommand's arguments."""
    p.add_argument("files", nargs="+", metavar="FILE", help="snapshots to rewrite in place")


def scrub_file(path: Path) -> bool:
    """Rewrite one snapshot with every secret withheld; ``True`` when something was withheld.

    Raises:
        SnapshotError: The file is not a readable snapshot, or cannot be replaced.
    """
    scrubbed = read_snapshot(path)
    raw = validate(orjson.loads(path.read_bytes()), str(path))
    if scrubbed == raw:
        return False
    fd, tmp = tempfile.mkstemp(prefix=".scrub-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(dumps(scrubbed))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise SnapshotError(f"cannot rewrite {path}: {e.strerror or e}") from None
    return True


def run_scrub(args: argparse.Namespace, stdout: TextIO = sys.stdout) -> int:
    """Scrub each file; exit status 2 when any could not be read or written."""
    status = 0
    for name in args.files:
        path = Path(name)
        try:
            changed = scrub_file(path)
        except (SnapshotError, OSError) as e:
            say_error("specwatch scrub", e)
            status = 2
            continue
        print(f"{path}: {'secrets withheld' if changed else 'nothing to withhold'}", file=stdout)
    return status


__all__ = ["add_scrub_arguments", "run_scrub", "scrub_file"]
