"""One way from a command's source options to a live session: the TUI, ``record``, ``bench``
(its GPU source) and the fleet screen's drill-down all build here, so ``--no-gpu``, ``--dcgm``,
``--prometheus`` and the demo options mean the same in every command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specwatch.session.gpu_source import GpuSource
    from specwatch.session.live import LiveSession
    from specwatch.sources.http.endpoint import Endpoint


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Where a session reads its server and GPUs from (the options every command shares)."""

    urls: tuple[str, ...] = ()
    api_key: str | None = None
    demo: bool = False
    """A simulated server with 8 simulated GPUs, started in-process, instead of ``urls``."""
    demo_dialect: str = "sglang"
    demo_seed: int = 0
    demo_scenario: str | None = None
    demo_dcgm: bool = False
    """The demo's GPUs read over HTTP from a simulated dcgm-exporter instead of a fake NVML."""
    dcgm: tuple[str, ...] = ()
    """dcgm-exporter addresses: the GPUs read from them instead of NVML."""
    prometheus: str | None = None
    """The GPUs of the server's node read from this Prometheus (joined by host or ``nodes``)."""
    gpu_match: str | None = None
    nodes: tuple[str, ...] = ()
    no_gpu: bool = False
    interval_s: float = 1.0
    """Seconds between GPU samples."""
    metrics_interval_s: float = 1.0
    """Seconds between ``/metrics`` scrapes."""


def gpu_source(
    options: SourceOptions, server_url: str | None = None, nvml: object | None = None
) -> GpuSource:
    """The GPUs ``options`` ask for: none with ``no_gpu``, else the ``dcgm`` exporters, else the
    server's node from ``prometheus``, else NVML (``nvml``: a fake one for a demo or tests);
    where the real NVML is unavailable, a dcgm-exporter on ``server_url``'s host at its default
    port (``specwatch sim`` serves one there).

    Raises:
        ValueError: ``no_gpu`` with ``dcgm``, or a Prometheus address that cannot be parsed.
    """
    from specwatch.session.gpu_source import NoGpus, NvmlGpuSource

    if options.no_gpu and options.dcgm:
        raise ValueError("--no-gpu reads no GPUs: give --dcgm or --no-gpu, not both")
    if options.no_gpu:
        return NoGpus("GPUs not read (--no-gpu)")
    if options.dcgm:
        from specwatch.session.gpu_source import DcgmExporterGpuSource

        return DcgmExporterGpuSource(options.dcgm, options.interval_s)
    if options.prometheus is not None and server_url is not None:
        from specwatch.core.fleet import parse_node_pair
        from specwatch.session.gpu_source import PrometheusGpuSource
        from specwatch.sources.prometheus.api import prometheus_endpoint
        from specwatch.sources.prometheus.gpus import PrometheusGpuSampler, gpus_of_server

        pairs = [parse_node_pair(p) for p in options.nodes]
        return PrometheusGpuSource(
            PrometheusGpuSampler(
                prometheus_endpoint(options.prometheus),
                gpus_of_server(server_url, pairs),
                options.gpu_match,
                interval_s=options.interval_s,
            )
        )
    if server_url is not None and nvml is None:
        from urllib.parse import urlsplit

        from specwatch.session.gpu_source import NvmlOrNodeExporter
        from specwatch.sources.http.endpoint import parse_endpoint

        host = urlsplit(parse_endpoint(server_url).base_url).hostname
        if host:
            return NvmlOrNodeExporter(host, options.interval_s)
    return NvmlGpuSource(options.interval_s, nvml=nvml)


def session_for(
    endpoints: Sequence[Endpoint],
    gpus: GpuSource | None,
    options: SourceOptions,
) -> LiveSession:
    """A live session of ``endpoints`` and ``gpus`` at the intervals ``options`` give."""
    from specwatch.session.live import LiveSession

    return LiveSession(list(endpoints), gpus, metrics_interval_s=options.metrics_interval_s)


def live_session(options: SourceOptions) -> LiveSession:
    """The live session ``options`` describe: the demo (started here) or every server of
    ``urls`` (the first one's node for ``prometheus``).

    Raises:
        ValueError: No server, an address that cannot be parsed (one line, without the key),
            or GPU options that contradict each other.
    """
    from specwatch.sources.http.endpoint import parse_endpoint

    if options.demo:
        return _demo_session(options)
    if not options.urls:
        raise ValueError("give a server with --url URL, or --demo")
    endpoints = [parse_endpoint(u, options.api_key) for u in options.urls]
    return session_for(endpoints, gpu_source(options, server_url=options.urls[0]), options)


def _demo_session(options: SourceOptions) -> LiveSession:
    from specwatch.session.live import LiveSession
    from specwatch.sim.demo import start_demo
    from specwatch.sim.fake_nvml import FakeNvml
    from specwatch.sources.http.endpoint import parse_endpoint

    demo = start_demo(
        dialect=options.demo_dialect,
        seed=options.demo_seed,
        gpus=8,
        scenario=options.demo_scenario,
        dcgm=options.demo_dcgm and not options.dcgm,
    )
    try:
        gpus: GpuSource
        if demo.dcgm_url:
            from specwatch.session.gpu_source import DcgmExporterGpuSource

            gpus = DcgmExporterGpuSource([demo.dcgm_url], options.interval_s)
        else:
            gpus = gpu_source(options, nvml=FakeNvml(demo.world.gpus))
        return LiveSession(
            [parse_endpoint(demo.url)],
            gpus,
            metrics_interval_s=options.metrics_interval_s,
            demo=demo,
        )
    except BaseException:
        demo.stop()
        raise


__all__ = ["SourceOptions", "gpu_source", "live_session", "session_for"]
