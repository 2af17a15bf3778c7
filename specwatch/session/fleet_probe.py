"""Fleet options to a fleet source, and the passive fleet probe document.

``specwatch probe --prometheus URL --json`` and ``specwatch probe --url A --url B [--dcgm D]
--json`` read the fleet without sending a completion (production replicas stay untouched);
``--stream`` asks for one completion per server.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specwatch import __version__
from specwatch.core.fleet import FleetGpu, FleetServer, parse_node_pair, target_of
from specwatch.core.sanitize import sanitize_line
from specwatch.session.fleet import FleetSource
from specwatch.sources.http.endpoint import Endpoint, parse_endpoint, unnamed_endpoint
from specwatch.sources.prometheus.fleet import FleetReading

SERVER_FIELDS = (
    "gen_tok_s",
    "accept_length",
    "draft_acceptance_rate",
    "step_latency_s",
    "requests_running",
    "requests_waiting",
)
"""The metrics-window names each server entry carries."""


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """Where a fleet comes from (the ``--prometheus``/``--url``/``--dcgm``/``--node`` options)."""

    prometheus: str | None = None
    urls: tuple[str, ...] = ()
    dcgm: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    """``SERVER_URL=DCGM_URL`` pairings."""
    server_match: str | None = None
    gpu_match: str | None = None
    api_key: str | None = None
    timeout_s: float = 5.0

    @property
    def is_fleet(self) -> bool:
        """A fleet view applies: a Prometheus, or more than one server."""
        return self.prometheus is not None or len(self.urls) > 1


def _as_tuple(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)  # type: ignore[attr-defined]


def fleet_options(args: argparse.Namespace, timeout_s: float = 5.0) -> FleetOptions:
    """The fleet options of parsed arguments (``--url`` and ``--dcgm`` one or many)."""
    return FleetOptions(
        prometheus=getattr(args, "prometheus", None),
        urls=_as_tuple(getattr(args, "url", None)),
        dcgm=_as_tuple(getattr(args, "dcgm", None)),
        nodes=_as_tuple(getattr(args, "node", None)),
        server_match=getattr(args, "server_match", None),
        gpu_match=getattr(args, "gpu_match", None),
        api_key=getattr(args, "api_key", None),
        timeout_s=timeout_s,
    )


def server_endpoint(address: str, options: FleetOptions) -> Endpoint:
    """The endpoint of a fleet server at ``address``: with the API key only where the user
    named that address (``--url``), never where only a Prometheus label names it.

    Raises:
        ValueError: A bad address.
    """
    wanted = target_of(address)
    if any(target_of(url) == wanted for url in options.urls):
        return parse_endpoint(address, options.api_key)
    return unnamed_endpoint(address)


def build_fleet_source(
    options: FleetOptions,
) -> tuple[FleetSource, Callable[[], Awaitable[None]]]:
    """The fleet source and the coroutine function that closes it.

    Raises:
        ValueError: A bad address, matcher or ``--node`` pairing.
    """
    pairs = [parse_node_pair(p) for p in options.nodes]
    if options.prometheus is not None:
        from specwatch.sources.prometheus.api import PrometheusClient, prometheus_endpoint
        from specwatch.sources.prometheus.fleet import PrometheusSource
        from specwatch.sources.prometheus.model_names import ModelNames

        client = PrometheusClient(
            prometheus_endpoint(options.prometheus), deadline_s=options.timeout_s
        )
        models = ModelNames()
        source = PrometheusSource(
            client, options.server_match, options.gpu_match, pairs, models=models
        )

        async def close() -> None:
            await models.aclose()
            await client.aclose()

        return source, close
    from specwatch.sources.direct_fleet import DirectFleetSource

    endpoints = [parse_endpoint(u, options.api_key) for u in options.urls]
    dcgm = None
    if options.dcgm:
        from specwatch.sources.dcgm.source import DcgmGpuSource

        dcgm = DcgmGpuSource(list(options.dcgm))
    direct = DirectFleetSource(endpoints, dcgm, pairs, timeout_s=options.timeout_s)
    return direct, direct.aclose


def server_entry(
    server: FleetServer, gpus: Sequence[str], joined_by: str | None = None
) -> dict[str, Any]:
    """One server of the probe document."""
    w = server.window
    out: dict[str, Any] = {
        "instance": server.instance,
        "job": server.job,
        "dialect": server.dialect.value,
        "model": server.model,
        "model_note": server.model_note,
    }
    out.update({name: getattr(w, name) for name in SERVER_FIELDS})
    out["window_s"] = w.dt
    out["gpus"] = list(gpus)
    out["joined_by"] = joined_by
    out["notes"] = dict(w.notes)
    return out


def gpu_entry(gpu: FleetGpu) -> dict[str, Any]:
    """One GPU of the probe document: the single-server probe's entry plus where it is."""
    from specwatch.sources.probe_gpus import gpu_entry as probe_gpu_entry

    out = probe_gpu_entry(
        gpu.static, gpu.sample, gpu.static.index, gpu.hostname or gpu.instance, gpu.source
    )
    out.update(key=gpu.key, exporter=gpu.instance)
    return out


def fleet_document(reading: FleetReading, where: str, gpu_entries: bool = True) -> dict[str, Any]:
    """The fleet probe document (``servers``, ``gpus``, exact ``totals``).

    Without ``gpu_entries``, ``gpus`` lists only the GPUs' keys: the text form counts them, and
    80,000 full entries cost it 2 s of CPU.
    """
    joins = {j.server: j for j in reading.joins}
    t = reading.totals
    return {
        "specwatch": __version__,
        "ok": not reading.errors and bool(reading.servers),
        "fleet": where,
        "servers": [
            server_entry(s, joins[s.instance].gpus, joins[s.instance].via)
            if s.instance in joins
            else server_entry(s, ())
            for s in reading.servers
        ],
        "gpus": [gpu_entry(g) for g in reading.gpus]
        if gpu_entries
        else [g.key for g in reading.gpus],
        "totals": {
            "servers": t.servers,
            "gen_tok_s": t.gen_tok_s,
            "accept_length": t.accept_length,
            "draft_acceptance_rate": t.draft_acceptance_rate,
            "requests_running": t.requests_running,
            "requests_waiting": t.requests_waiting,
        },
        "window_s": reading.window_s,
        "queries": reading.queries,
        "errors": list(reading.errors),
        "skipped": reading.skipped,
    }


async def fleet_probe(
    options: FleetOptions,
    stream: bool = False,
    max_tokens: int = 256,
    prompt: str | None = None,
    settle_s: float = 1.0,
    gpu_entries: bool = True,
) -> dict[str, Any]:
    """Read the fleet once (passively) and return the document (``gpu_entries``: as in
    :func:`fleet_document`).

    Servers read directly need two scrapes for a window: the second comes ``settle_s`` later.
    With ``stream``, each server also gets one streamed completion (``stream`` in its entry).
    """
    source, close = build_fleet_source(options)
    try:
        reading = await source.refresh()
        if options.prometheus is None:
            await asyncio.sleep(settle_s)
            reading = await source.refresh()
    finally:
        await close()
    where = options.prometheus or "direct"
    doc = fleet_document(reading, where, gpu_entries)
    if stream:
        await _stream_each(doc, options, max_tokens, prompt)
    return doc


async def _stream_each(
    doc: dict[str, Any], options: FleetOptions, max_tokens: int, prompt: str | None
) -> None:
    from specwatch.sources.probe import DEFAULT_PROMPT, probe, probe_to_dict

    for entry in doc["servers"]:
        try:
            endpoint = server_endpoint(entry["instance"], options)
            result = await probe(
                endpoint,
                max_tokens=max_tokens,
                timeout_s=max(options.timeout_s, 30.0),
                prompt=prompt or DEFAULT_PROMPT,
                read_gpus=False,
            )
            entry["stream"] = probe_to_dict(result)["stream"]
        except Exception as exc:  # one unreachable replica must not sink the document
            entry["stream"] = {"ok": False, "error": str(exc)}


def fleet_text(doc: dict[str, Any]) -> str:
    """The document as a few lines of text (``probe`` without ``--json``); its ``gpus`` are
    only counted."""

    def f(v: object, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    lines = [f"fleet: {doc['fleet']}  ({len(doc['servers'])} servers, {len(doc['gpus'])} GPUs)"]
    for s in doc["servers"]:
        model = s["model"] or s.get("model_note") or "—"
        lines.append(
            f"  {s['instance']:<24} {s['dialect']:<8} "
            f"{f(s['gen_tok_s'], '8.1f')} tok/s  accept {f(s['accept_length'], '.2f')}  "
            f"{len(s['gpus'])} GPUs  {sanitize_line(str(model), 200)}"
        )
    t = doc["totals"]
    lines.append(
        f"  total: {f(t['gen_tok_s'], '.1f')} tok/s, accept length {f(t['accept_length'], '.2f')}"
    )
    lines += [f"  error: {sanitize_line(e, 400)}" for e in doc["errors"]]
    if doc.get("skipped"):
        lines.append(f"  {doc['skipped']}")
    return "\n".join(lines)


__all__ = [
    "SERVER_FIELDS",
    "FleetOptions",
    "build_fleet_source",
    "fleet_document",
    "fleet_options",
    "fleet_probe",
    "fleet_text",
    "gpu_entry",
    "server_endpoint",
    "server_entry",
]
