"""The fleet's command-line options (``--prometheus``, ``--node``, ...): argparse only, so that
``--help`` stays light; :mod:`specwatch.session.fleet_probe` turns them into a fleet."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class ArgumentHolder(Protocol):
    """A parser or an argument group: anything with argparse's ``add_argument``."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """As :meth:`argparse.ArgumentParser.add_argument`."""
        ...


def add_fleet_arguments(p: ArgumentHolder) -> None:
    """Add ``--prometheus``, ``--server-match``, ``--gpu-match`` and ``--node`` (repeatable)."""
    p.add_argument(
        "--prometheus",
        default=None,
        metavar="URL",
        help="read servers and GPUs from this Prometheus (a bare host means port 9090)",
    )
    p.add_argument(
        "--server-match",
        default=None,
        metavar="'{job=\"vllm\"}'",
        help="Prometheus label matcher narrowing the servers",
    )
    p.add_argument(
        "--gpu-match",
        default=None,
        metavar="'{Hostname=~\"gpu-.*\"}'",
        help="Prometheus label matcher narrowing the dcgm-exporter series",
    )
    p.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="SERVER_URL=DCGM_URL",
        help="pair a server with its node's dcgm-exporter (repeatable; default: join by host)",
    )


__all__ = ["ArgumentHolder", "add_fleet_arguments"]
