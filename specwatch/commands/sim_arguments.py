"""``specwatch sim``'s options: argparse only, so that ``specwatch sim --help`` does not load
the simulated server (aiohttp); :mod:`specwatch.commands.sim` runs it."""

from __future__ import annotations

import argparse

from specwatch.commands.source_arguments import DIALECTS

DEFAULT_VERSIONS: dict[str, str] = {
    "sglang": "0.5.23",
    "vllm": "0.33.0",
    "llamacpp": "b6500-0c1e570",
    "openai": "1.0.0",
}
"""The version each simulated server imitates when none is given: ``sim.servers``'s, spelt out
(a test keeps the two equal)."""


class _VersionOrOld(argparse.Action):
    """``--version`` alone prints specwatch's version; ``--version V`` is ``--server-version``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            from specwatch import __version__

            print(f"specwatch {__version__}")
            parser.exit()
        setattr(namespace, self.dest, values)


DEFAULT_BACKGROUND = 3
"""Simulated users by default: a simulator is watchable as started (the demo's number)."""
DCGM_DEFAULT_PORT = 9400
"""dcgm-exporter's own default port (``sources.dcgm.parse.DEFAULT_PORT``, spelt out so that
``--help`` stays light)."""

HOSTILE_CASES = (
    "escape",
    "endless",
    "quiet",
    "trickle",
    "dcgm-trickle",
    "huge-metrics",
    "huge-event",
    "huge-json",
    "banner",
    "redirect",
    "loading",
    "unauthorised",
    "prom-labels",
    "prom-values",
    "prom-type",
    "prom-error",
    "prom-gzip",
    "prom-series",
)
"""``sim.hostile.CASES``, spelt out (a test keeps the two equal)."""


def add_sim_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``specwatch sim``."""
    p.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="sglang",
        help="which server to imitate (default: sglang)",
    )
    p.add_argument(
        "--server-version",
        dest="sim_version",
        default=None,
        metavar="VERSION",
        help="server version to imitate (default: "
        + ", ".join(f"{d} {v}" for d, v in DEFAULT_VERSIONS.items())
        + ")",
    )
    # The old spelling, hidden; alone, ``--version`` is specwatch's own version, as everywhere.
    p.add_argument(
        "--version",
        dest="sim_version_old",
        nargs="?",
        action=_VersionOrOld,
        default=None,
        help=argparse.SUPPRESS,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 = any free)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument(
        "--load-time",
        type=float,
        default=0.0,
        help="seconds of model loading before it answers (default: 0)",
    )
    p.add_argument("--gpus", type=int, default=8, help="simulated GPUs (default: 8)")
    p.add_argument(
        "--background",
        type=int,
        default=DEFAULT_BACKGROUND,
        help=f"simulated concurrent users generating traffic (default: {DEFAULT_BACKGROUND};"
        " 0 = an idle server)",
    )
    p.add_argument("--model", default=None, help="served model name")
    p.add_argument("--no-spec", action="store_true", help="no speculative decoding")
    p.add_argument(
        "--no-metrics",
        action="store_true",
        help="start without metrics (SGLang --enable-metrics, llama.cpp --metrics off)",
    )
    p.add_argument(
        "--dcgm-port",
        type=int,
        default=None,
        metavar="N",
        help="serve a dcgm-exporter /metrics for the simulated GPUs on this port (default:"
        f" {DCGM_DEFAULT_PORT}, dcgm-exporter's own, where a monitor without NVML looks;"
        " 0 = any)",
    )
    p.add_argument(
        "--no-dcgm",
        action="store_true",
        help="serve no dcgm-exporter for the simulated GPUs",
    )
    p.add_argument(
        "--dcgm-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="the simulated exporter's collection interval, seconds (default: 1; real: 30)",
    )
    p.add_argument(
        "--hostile",
        default=None,
        metavar="CASE",
        choices=HOSTILE_CASES,
        help="serve a hostile server instead, one fault per case (for testing clients): "
        + ", ".join(HOSTILE_CASES),
    )
    p.add_argument(
        "--trickle",
        type=float,
        default=1.0,
        metavar="S",
        help="with --hostile trickle or dcgm-trickle: seconds between two bytes (default: 1)",
    )
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="require the API key held in this environment variable",
    )


__all__ = [
    "DCGM_DEFAULT_PORT",
    "DEFAULT_BACKGROUND",
    "DEFAULT_VERSIONS",
    "HOSTILE_CASES",
    "add_sim_arguments",
]
