#!/usr/bin/env python3
"""CPU ms per dcgm-exporter poll parse: the full ``prometheus_client`` parse beside the reader.

    .venv/bin/python tests/tools/dcgm_parse_cost.py [--quick] [--gpus 8 64]

Texts from the simulator's dcgm-exporter twin (what ``specwatch sim`` serves on 9400: 33
fields, 10 labels a series), for 8 GPUs (about 70 KB) and 64 (about 550 KB), with the boards
under load so that values move between two polls. Per exposition, as CPU time of this process
(``time.process_time``, best of several rounds):

- ``full parse``: every DCGM line through ``prometheus_client``, each series' labels
  sanitised, then grouped into GPUs (what every poll cost before the reader);
- ``1st poll``: a new :class:`~specwatch.sources.dcgm.parse.DcgmReader` (every series new);
- ``later poll``: the same reader on the next answer (the steady state of a live watch);
- ``all moved``: a later poll where every value moved (the worst case for the reader);
- ``ratio``: full parse / later poll.

Target: a later poll of 8 GPUs costs at most a tenth of the full parse. With a 1 s poll, the
share of a core is the ms figure / 10.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 10.0


def full_parse(text: str) -> object:
    """The parse every poll paid before :class:`DcgmReader`: the whole text through
    ``prometheus_client`` (specwatch 6b16ae6's ``parse_dcgm``, its happy path)."""
    from prometheus_client.parser import text_string_to_metric_families

    from specwatch.core.sanitize import clean_labels
    from specwatch.sources.dcgm.parse import group_gpus

    kept = [
        ln
        for ln in text.splitlines()
        if ln.startswith("DCGM_") or ln.startswith(("# TYPE DCGM_", "# HELP DCGM_"))
    ]
    samples: list[tuple[str, Mapping[str, str], float]] = []
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for s in family.samples:
            samples.append((s.name.removesuffix("_total"), clean_labels(s.labels) or {}, s.value))
    return group_gpus(samples)


def _best_ms(fn: Callable[[], object], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t0) / n)
    return best * 1e3


def sim_answers(gpus: int) -> tuple[str, str]:
    """Two consecutive answers of the simulator's exporter for ``gpus`` boards under load."""
    from specwatch.sim.dcgm_exporter import render_dcgm
    from specwatch.sim.gpus import SimGpus

    box = SimGpus(gpus, seed=1)
    box.advance_to(20.0, 0.8)
    before = render_dcgm(box, 20.0)
    box.advance_to(21.0, 0.3)
    return before, render_dcgm(box, 21.0)


def _all_moved(text: str, step: float) -> str:
    """``text`` with ``step`` added to every DCGM value."""
    out = []
    for line in text.splitlines():
        if line.startswith("DCGM_"):
            series, _, value = line.rpartition(" ")
            line = f"{series} {float(value) + step}"
        out.append(line)
    return "\n".join(out) + "\n"


def measure(gpu_counts: list[int], quick: bool = False) -> list[dict[str, Any]]:
    """One row per GPU count: sizes and CPU ms per parse for each way of reading it."""
    from specwatch.sources.dcgm.parse import DcgmReader

    rows = []
    for count in gpu_counts:
        before, text = sim_answers(count)
        n = max(1, (40 if quick else 200) // count)
        reader = DcgmReader()
        reader.parse(before)
        texts = [before, text]

        def later(reader: DcgmReader = reader, texts: list[str] = texts) -> object:
            texts.reverse()
            return reader.parse(texts[0])

        moved = [_all_moved(before, 1.0), _all_moved(before, 2.0)]
        worst = DcgmReader()
        worst.parse(moved[1])

        def all_moved(reader: DcgmReader = worst, texts: list[str] = moved) -> object:
            texts.reverse()
            return reader.parse(texts[0])

        def first(text: str = text) -> object:
            return DcgmReader().parse(text)

        def full(text: str = text) -> object:
            return full_parse(text)

        changed = sum(a != b for a, b in zip(before.splitlines(), text.splitlines(), strict=True))
        rows.append(
            {
                "gpus": count,
                "bytes": len(text.encode()),
                "series": sum(1 for ln in text.splitlines() if ln.startswith("DCGM_")),
                "changed": changed,
                "full_ms": _best_ms(full, max(1, n // 4), 3),
                "first_ms": _best_ms(first, max(1, n // 4), 3),
                "later_ms": _best_ms(later, n * 4, 5),
                "worst_ms": _best_ms(all_moved, n * 4, 5),
            }
        )
    return rows


def print_rows(rows: list[dict[str, Any]]) -> bool:
    """The figures as a table; whether the 8-GPU (or smallest) row meets the target."""
    print(
        f"{'GPUs':>5}{'KB':>6}{'series':>8}{'moved':>7}{'full parse':>12}{'1st poll':>11}"
        f"{'later poll':>12}{'all moved':>11}{'ratio':>8}{'core @1s':>18}"
    )
    for r in rows:
        ratio = r["full_ms"] / r["later_ms"]
        r["ratio"] = ratio
        share = f"{r['full_ms'] / 10:.2f}% -> {r['later_ms'] / 10:.3f}%"
        print(
            f"{r['gpus']:>5}{r['bytes'] / 1024:>6.0f}{r['series']:>8}{r['changed']:>7}"
            f"{r['full_ms']:>10.2f}ms{r['first_ms']:>9.2f}ms{r['later_ms']:>10.3f}ms"
            f"{r['worst_ms']:>9.3f}ms"
            f"{ratio:>7.1f}x{share:>18}"
        )
    small = min(rows, key=lambda r: r["gpus"])
    ok = bool(small["ratio"] >= TARGET_RATIO)
    print(
        f"{small['gpus']} GPUs, later poll vs full parse: {small['ratio']:.1f}x "
        f"(target >= {TARGET_RATIO:.0f}x): " + ("PASS" if ok else "MISS")
    )
    return ok


def main() -> int:
    """Measure and print; exit 1 on a miss."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    p.add_argument("--gpus", type=int, nargs="+", default=[8, 64], help="GPU counts")
    args = p.parse_args()
    return 0 if print_rows(measure(args.gpus, args.quick)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
