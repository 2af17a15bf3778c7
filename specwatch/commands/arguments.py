"""What the commands share: the argument types, the options several commands declare alike
(the server address and ``--api-key``, where the GPUs and the demo come from, the fleet's) and
the one way a command prints an error.

Argparse only at import, so that ``specwatch --help`` stays light; what a type needs to parse
(a duration) is imported when a value is parsed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from specwatch.core.sanitize import sanitize_line

if TYPE_CHECKING:
    from specwatch.core.goodput import Slo
    from specwatch.session.factory import SourceOptions

ERROR_LIMIT = 400
"""Longest error message printed (the command's name aside)."""
MIN_INTERVAL_S = 0.1
"""Sampling faster than this costs more than it shows (the config file's floor too)."""
DIALECTS = ("sglang", "vllm", "llamacpp", "trtllm", "openai")
"""The servers the demo can simulate: every ``specwatch.core.server.Dialect`` value (spelt out
so that ``--help`` does not import the core; a test keeps the two equal)."""
API_KEY_HELP = "Bearer token (default: env SPECWATCH_API_KEY, else OPENAI_API_KEY); never stored"
SHARED_HELP = {
    "--baseline-itl": "per-token latency without speculation (the plain decode step), ms",
    "--gpu-interval": "seconds between GPU samples",
    "--metrics-interval": "seconds between /metrics scrapes",
    "--interval": "seconds between GPU samples and /metrics scrapes",
    "--timeout": "seconds to wait for any byte of an answer from the server",
    "--deadline": "wall-clock limit of each request, its stream included, in seconds",
    "--wait": "wait up to S seconds for a server that is starting or loading",
    "--no-gpu": "read no GPUs: the server only (no NVML, no dcgm-exporter)",
    "--max-tokens": "tokens to generate per request",
    "--out": "directory the files go into (bench: snapshots; profile: profiles, SGLang's traces)",
    "--record": "also record the session into FILE (replay it with: specwatch replay FILE)",
    "--slo-ttft": "goodput's objective for the time to first token, ms (0: none)",
    "--slo-tpot": "goodput's objective for the time per output token after the first, ms (0: none)",
}
"""One wording per concept: every command taking one of these options says it in these words,
then ``(default: X)`` where it has one (``tests/test_cli_wording.py``)."""


def shared_help(option: str, default: object = None) -> str:
    """The shared wording of ``option``, with ``(default: default)`` where one is given."""
    text = SHARED_HELP[option]
    return text if default is None else f"{text} (default: {default})"


def error_line(prefix: str, message: object) -> str:
    """``prefix: message`` with the message sanitised and bounded to :data:`ERROR_LIMIT`."""
    return f"{prefix}: {sanitize_line(str(message), ERROR_LIMIT)}"


def say_error(prefix: str, message: object, file: TextIO | None = None) -> None:
    """Print :func:`error_line` to ``file`` (standard error by default)."""
    print(error_line(prefix, message), file=file or sys.stderr)


# --- argument types ---------------------------------------------------------------------------


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def count(text: str) -> int:
    """An integer of at least 0."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive(text: str) -> float:
    """A number above 0 (seconds, milliseconds, a factor)."""
    value = _number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    return value


def _not_too_fast(value: float) -> float:
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"sampling faster than every {MIN_INTERVAL_S:g} s costs more than it shows"
        )
    return value


def interval(text: str) -> float:
    """Seconds between samples: at least :data:`MIN_INTERVAL_S`."""
    return _not_too_fast(positive(text))


def duration(text: str) -> float:
    """A duration above 0: ``90``, ``90s``, ``10m``, ``2h`` (seconds)."""
    from specwatch.record.timespec import parse_duration

    try:
        value = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    return value


def duration_interval(text: str) -> float:
    """A :func:`duration` of at least :data:`MIN_INTERVAL_S`."""
    return _not_too_fast(duration(text))


def concurrencies(text: str) -> list[int]:
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


LISTEN_HOST = "127.0.0.1"
LISTEN_PORT = 9877
"""Where the exporter listens unless told otherwise."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1); ``[::1]:PORT`` for IPv6.

    Raises:
        ValueError: Not a host and a port in 0..65535.
    """
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "", text.strip()
    host = host.strip("[]") or LISTEN_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host, port


def listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (:func:`parse_listen`)."""
    try:
        return parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# --- options several commands share -------------------------------------------------------------


class ArgumentHolder(Protocol):
    """A parser or an argument group: anything with argparse's ``add_argument``."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """As :meth:`argparse.ArgumentParser.add_argument`."""
        ...


SLO_DEFAULTS_MS = {"--slo-ttft": 1000, "--slo-tpot": 50}
"""vllmstat's goodput objectives (``specwatch.core.goodput.DEFAULT_SLO``, in ms)."""


def add_slo_arguments(p: ArgumentHolder) -> None:
    """``--slo-ttft MS`` and ``--slo-tpot MS``: goodput's objectives (``None`` when not given,
    so the config file can set them; the defaults are :data:`SLO_DEFAULTS_MS`)."""
    for option, default in SLO_DEFAULTS_MS.items():
        p.add_argument(
            option,
            type=float,
            default=None,
            metavar="MS",
            help=shared_help(option, default),
        )


def slo_of(args: argparse.Namespace) -> Slo:
    """Goodput's objectives from the parsed ``--slo-ttft`` / ``--slo-tpot`` (the defaults for a
    parser without them)."""
    from specwatch.core.goodput import slo_from_ms

    return slo_from_ms(getattr(args, "slo_ttft", None), getattr(args, "slo_tpot", None))


def add_api_key(p: ArgumentHolder) -> None:
    """``--api-key``: every command that talks to a server takes it alike."""
    p.add_argument("--api-key", default=None, help=API_KEY_HELP)


def add_server_arguments(p: ArgumentHolder, fleet: bool = True, positional: bool = True) -> None:
    """The servers: positional ``URL``s (``positional``), ``-u/--url`` and ``--api-key``;
    ``fleet``: more than one is a fleet."""
    more = " (several: a fleet)" if fleet else ""
    if positional:
        p.add_argument(
            "target",
            nargs="*",
            metavar="URL",
            help="server address: localhost:8000, host:port, http://... or https://..."
            f"{more}; default: $SPECWATCH_URL, the config file's url, else http://localhost:8000",
        )
    p.add_argument(
        "-u",
        "--url",
        action="append",
        help="server address, as URL (repeatable" + ("; several: a fleet)" if fleet else ")"),
    )
    add_api_key(p)


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


def add_fleet_arguments(p: ArgumentHolder) -> None:
    """Add ``--prometheus``, ``--server-match``, ``--gpu-match`` and ``--node`` (repeatable);
    :mod:`specwatch.session.fleet_probe` turns them into a fleet."""
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


def add_source_arguments(g: ArgumentHolder) -> None:
    """Where a watching command (the monitor, ``record``, ``exporter``) reads from: the demo's
    options, ``--dcgm``, ``--no-gpu`` and the fleet's.
    ``--url``, ``--api-key`` and ``--demo`` are the caller's: their help differs."""
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
        choices=("drift", "regression", "eager", "memcap"),
        default=None,
        help="replay the story in the demo: the GPUs stay cold, then warm up (drift), the "
        "verify step gets 8%% slower (regression), loses its CUDA graphs (eager: 12 -> 29 ms, "
        "then P shows why) or a memory-bound decode's memory clock "
        "drops 9%% (memcap) about 50 s after loading",
    )
    g.add_argument("--demo-seed", type=int, default=0, help=argparse.SUPPRESS)
    add_dcgm_argument(g)
    g.add_argument(
        "--no-gpu",
        action="store_true",
        help=shared_help("--no-gpu"),
    )
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


__all__ = [
    "DIALECTS",
    "ERROR_LIMIT",
    "LISTEN_HOST",
    "LISTEN_PORT",
    "MIN_INTERVAL_S",
    "ArgumentHolder",
    "add_api_key",
    "add_dcgm_argument",
    "add_fleet_arguments",
    "add_server_arguments",
    "add_source_arguments",
    "concurrencies",
    "count",
    "duration",
    "duration_interval",
    "error_line",
    "interval",
    "listen",
    "parse_listen",
    "positive",
    "positive_int",
    "say_error",
    "shared_help",
    "slo_of",
    "source_options",
]
