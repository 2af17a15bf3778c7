"""The options of ``specwatch bench``: argparse only, so ``--help`` stays light."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DIR = "specwatch-snapshots"
"""Where snapshots go without ``--out`` (the same constant as ``bench.snapshot.DEFAULT_DIR``)."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _concurrencies(text: str) -> list[int]:
    """``4`` or ``1,4,16``: each a positive integer, repeats dropped, order kept."""
    out: list[int] = []
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a concurrency: {part.strip()!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
        if value not in out:
            out.append(value)
    return out


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch bench`` (the lead adds ``--url`` and ``--api-key``)."""
    p.add_argument("-n", "--runs", type=_positive_int, default=5, help="measured runs (5)")
    p.add_argument("--warmup", type=_count, default=2, help="warmup requests first (2)")
    p.add_argument("--max-tokens", type=_positive_int, default=2048, help="tokens per run (2048)")
    p.add_argument(
        "--steady",
        action="store_true",
        help="after the warmups, keep warming up until the GPUs' SM clock, memory clock and"
        " temperature are steady (see --steady-window), at most --steady-limit seconds",
    )
    p.add_argument(
        "--steady-limit",
        type=_seconds,
        default=300.0,
        metavar="S",
        help="longest --steady wait before measuring anyway (300 s)",
    )
    p.add_argument(
        "--steady-window",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="window of the steady-state slopes (10 s; thresholds per second: SM and memory"
        " clock 2 MHz, temperature 0.1 °C)",
    )
    p.add_argument(
        "--lock-clocks",
        metavar="base|max|MHZ|SM,MEM",
        default=None,
        help="root only: lock the GPU and memory clocks for the benchmark and restore them"
        " afterwards (for A/B tests of code, not capacity claims); MHZ sets the SM clock, the"
        " memory clock goes to its default",
    )
    p.add_argument("--label", default=None, help="a name for this benchmark (in the file name)")
    p.add_argument(
        "-c",
        "--concurrency",
        type=_concurrencies,
        default=[1],
        metavar="N[,N...]",
        help="parallel streams per run (1); a list (1,4,16) runs one benchmark per value, "
        "each saved as its own snapshot (label suffix -cN)",
    )
    p.add_argument(
        "--prompts",
        metavar="FILE",
        default=None,
        help="prompts, one per line or a JSON list (default: a built-in varied set)",
    )
    p.add_argument("--seed", type=int, default=0, help="order of the built-in prompts (0)")
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help=f"snapshot directory (default ./{DEFAULT_DIR})",
    )
    p.add_argument("--json", action="store_true", help="print the snapshot on stdout")
    p.add_argument("--no-gpu", action="store_true", help="do not read the GPUs through NVML")
    p.add_argument(
        "--gpu-interval",
        type=_seconds,
        default=0.5,
        metavar="S",
        help="GPU sampling period during the benchmark (0.5 s)",
    )
    p.add_argument(
        "--wait",
        type=_seconds,
        default=None,
        metavar="S",
        help="wait up to S seconds for a server that is still loading",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        metavar="S",
        help="longest wait for any byte from the server (120 s)",
    )
    p.add_argument(
        "--deadline",
        type=_seconds,
        default=None,
        metavar="S",
        help="wall-clock limit of each request and run (default: 60 s, and 60 s + 0.25 s per"
        " token for a run's stream)",
    )
    from specwatch.commands.fleet_arguments import add_fleet_arguments

    add_fleet_arguments(
        p.add_argument_group("GPUs from Prometheus (the benchmarked server's node, by host)")
    )
    demo = p.add_argument_group("demo (the story on the simulator, instead of --url)")
    demo.add_argument(
        "--demo",
        choices=("cold", "hot", "warming"),
        default=None,
        help="benchmark a simulated server whose 8 simulated GPUs are held cold or hot, or"
        " start cold and heat up under load (warming)",
    )
    demo.add_argument(
        "--demo-step-factor",
        type=_seconds,
        default=1.0,
        metavar="F",
        help="make the simulated verify step F times slower (imitates a code regression)",
    )


__all__ = ["DEFAULT_DIR", "add_bench_arguments"]
