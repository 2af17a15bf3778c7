"""``specwatch dcgm-counters`` (print the counters CSV specwatch reads) and ``--dcgm URL``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from specwatch.commands.fleet_arguments import ArgumentHolder

COUNTERS_FILE = "dcgm-counters.csv"


def counters_csv() -> str:
    """The counters CSV shipped with specwatch (dcgm-exporter ``-f`` format)."""
    from importlib import resources

    return (
        resources.files("specwatch.sources.dcgm")
        .joinpath(COUNTERS_FILE)
        .read_text(encoding="utf-8")
    )


def add_dcgm_argument(p: ArgumentHolder) -> None:
    """Add the repeatable ``--dcgm URL`` (GPUs read from dcgm-exporter instead of NVML)."""
    p.add_argument(
        "--dcgm",
        action="append",
        default=None,
        metavar="URL",
        help="read the GPUs from this dcgm-exporter instead of local NVML (repeatable; a bare "
        "host means http://host:9400/metrics; `specwatch dcgm-counters` prints its counters CSV)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the counters CSV; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="specwatch dcgm-counters",
        description=(
            "Print the dcgm-exporter counters CSV with every field specwatch reads. Save it and "
            "run the exporter with -f FILE (or DCGM_EXPORTER_COLLECTORS=FILE) and -c 1000."
        ),
    )
    parser.parse_args(list(argv) if argv is not None else None)
    sys.stdout.write(counters_csv())
    return 0
