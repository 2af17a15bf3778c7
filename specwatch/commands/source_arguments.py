"""The options that say where a session reads from, the same in every command that watches a
server (the monitor, ``record``): the demo's, ``--dcgm``, ``--no-gpu`` and the fleet's.
Argparse only, so that ``--help`` stays light; :func:`source_options` turns them into the
:class:`~specwatch.session.factory.SourceOptions` the session factory takes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specwatch.commands.fleet_arguments import ArgumentHolder

if TYPE_CHECKING:
    from specwatch.session.factory import SourceOptions

DIALECTS = ("sglang", "vllm", "llamacpp", "openai")
"""The servers the demo can simulate: every ``specwatch.core.server.Dialect`` value (spelt out
so that ``--help`` does not import the core; a test keeps the two equal)."""


def add_source_arguments(g: ArgumentHolder, no_gpu: str) -> None:
    """Add the demo's options, ``--dcgm``, ``--no-gpu`` (``no_gpu``: what it does instead) and
    the fleet's (``--prometheus``, ``--node``, ...). ``--url``, ``--api-key`` and ``--demo``
    are the caller's: their help differs between commands."""
    g.add_argument(
        "--demo-dialect",
        choices=DIALECTS,
        default="sglang",
        help="which server the demo simulates (default: sglang)",
    )
    g.add_argument(
        "--demo-dcgm",
        action="store_true",
        help="the demo's GPUs read over HTTP from a simulated dcgm-exporter instead of NVML",
    )
    g.add_argument(
        "--demo-scenario",
        choices=("drift", "regression", "memcap"),
        default=None,
        help="replay the story in the demo: the GPUs stay cold, then warm up (drift), the "
        "verify step gets 8%% slower (regression) or a memory-bound decode's memory clock "
        "drops 9%% (memcap) about 50 s after loading",
    )
    g.add_argument("--demo-seed", type=int, default=0, help=argparse.SUPPRESS)
    from specwatch.commands.dcgm_counters import add_dcgm_argument

    add_dcgm_argument(g)
    g.add_argument(
        "--no-gpu",
        action="store_true",
        help=f"{no_gpu}: read no GPUs (no NVML, no exporter)",
    )
    from specwatch.commands.fleet_arguments import add_fleet_arguments

    add_fleet_arguments(g)


def _urls(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value)  # type: ignore[attr-defined]


def source_options(
    args: argparse.Namespace, interval_s: float, metrics_interval_s: float
) -> SourceOptions:
    """The source options of parsed arguments (a command may lack some: their defaults)."""
    from specwatch.session.factory import SourceOptions

    return SourceOptions(
        urls=_urls(getattr(args, "url", None)),
        api_key=getattr(args, "api_key", None),
        demo=bool(getattr(args, "demo", False)),
        demo_dialect=getattr(args, "demo_dialect", "sglang"),
        demo_seed=getattr(args, "demo_seed", 0),
        demo_scenario=getattr(args, "demo_scenario", None),
        demo_dcgm=bool(getattr(args, "demo_dcgm", False)),
        dcgm=_urls(getattr(args, "dcgm", None)),
        prometheus=getattr(args, "prometheus", None),
        gpu_match=getattr(args, "gpu_match", None),
        nodes=_urls(getattr(args, "node", None)),
        no_gpu=bool(getattr(args, "no_gpu", False)),
        interval_s=interval_s,
        metrics_interval_s=metrics_interval_s,
    )


__all__ = ["DIALECTS", "add_source_arguments", "source_options"]
