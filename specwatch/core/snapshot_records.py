"""A benchmark snapshot as typed, frozen objects: what ``compare`` and the reports read.

``specwatch.bench.snapshot`` validates a file against its JSON schema, then builds a
:class:`Snapshot` here once; nothing downstream reads the raw dict. Every version of the
snapshot schema is read into the same objects (version 1 named the board's maximum SM clock
``sm_clock_max_mhz``; version 2 calls it ``board_max_sm_clock_mhz``; version 3 adds the server
process's code identity, ``server.process``, and the load of each run, ``runs[].load``, which
for older versions is worked out again from the runs' counter deltas where they allow it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from specwatch.core import identity as identity_json
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.identity import ServerIdentity
from specwatch.core.load import RunLoad, load_from_counters
from specwatch.core.stats import mean, sample_std
from specwatch.core.values import as_float

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _map(v: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(v)) if isinstance(v, Mapping) else _EMPTY


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def gpu_summary_from_dict(d: Mapping[str, Any]) -> GpuRunSummary:
    """One GPU's run summary as a snapshot stores it (any schema version)."""
    board_max = d.get("board_max_sm_clock_mhz", d.get("sm_clock_max_mhz"))
    fractions = d.get("reason_fractions")
    return GpuRunSummary(
        index=_int(d.get("index")) or 0,
        name=_str(d.get("name")),
        sm_clock_mean_mhz=as_float(d.get("sm_clock_mean_mhz")),
        sm_clock_min_mhz=_int(d.get("sm_clock_min_mhz")),
        board_max_sm_clock_mhz=_int(board_max),
        temp_max_c=_int(d.get("temp_max_c")),
        hbm_temp_max_c=_int(d.get("hbm_temp_max_c")),
        power_mean_w=as_float(d.get("power_mean_w")),
        reason_fractions=MappingProxyType(
            {
                str(k): f
                for k, v in (fractions.items() if isinstance(fractions, Mapping) else ())
                if (f := as_float(v)) is not None
            }
        ),
        pcie_gen=_int(d.get("pcie_gen")),
        pcie_width=_int(d.get("pcie_width")),
        pcie_max_gen=_int(d.get("pcie_max_gen")),
        pcie_max_width=_int(d.get("pcie_max_width")),
        energy_j=as_float(d.get("energy_j")),
        joules_per_token=as_float(d.get("joules_per_token")),
        samples=_int(d.get("samples")) or 0,
        reason_samples=_int(d.get("reason_samples")) or 0,
        lost_samples=_int(d.get("lost_samples")) or 0,
        power_violation_s=as_float(d.get("power_violation_s")),
        thermal_violation_s=as_float(d.get("thermal_violation_s")),
        util_mean_pct=as_float(d.get("util_mean_pct")),
    )


def _gpus(v: Any) -> tuple[GpuRunSummary, ...]:
    if not isinstance(v, Sequence):
        return ()
    return tuple(gpu_summary_from_dict(g) for g in v if isinstance(g, Mapping))


def _figure(values: list[float | None]) -> Figure:
    known = [v for v in values if v is not None]
    return Figure(mean(known) if known else None, sample_std(known))


def _run(r: Mapping[str, Any]) -> SnapshotRun:
    wall = as_float(r.get("wall_s"))
    load = r.get("load")
    if isinstance(load, Mapping):
        run_load = RunLoad(
            as_float(load.get("running_requests")), as_float(load.get("prompt_tok_s"))
        )
    else:
        counters = r.get("server_counters")
        run_load = load_from_counters(
            {str(k): f for k, v in counters.items() if (f := as_float(v)) is not None}
            if isinstance(counters, Mapping)
            else {},
            wall,
        )
    return SnapshotRun(
        index=_int(r.get("index")) or 0,
        tok_s=as_float(r.get("tok_s")),
        wall_s=wall,
        gpus=_gpus(r.get("gpus")),
        load=run_load,
    )


@dataclass(frozen=True, slots=True)
class Figure:
    """One overall figure: its mean and standard deviation over the runs."""

    mean: float | None
    std: float | None


@dataclass(frozen=True, slots=True)
class SnapshotRun:
    """One measured run."""

    index: int
    tok_s: float | None
    wall_s: float | None
    gpus: tuple[GpuRunSummary, ...]
    load: RunLoad = field(default_factory=lambda: RunLoad(None, None))
    """The server's load during the run (``specwatch.core.load``)."""


@dataclass(frozen=True, slots=True)
class SnapshotServer:
    """The server the benchmark ran against."""

    dialect: str | None
    version: str | None
    model: str | None
    speculative: Mapping[str, Any]
    launch_args: Mapping[str, Any]
    process: ServerIdentity | None = None
    """The code identity of the server process (schema 3); ``None`` when not recorded."""
    process_note: str | None = None
    """Why there is no identity (remote server, older snapshot...)."""


@dataclass(frozen=True, slots=True)
class SnapshotEnvironment:
    """Driver and per-GPU fixed facts (``GpuStatic`` fields, by name)."""

    driver_version: str | None
    cuda_driver_version: str | None
    gpus: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A validated benchmark snapshot (see ``specwatch/bench/snapshot.schema.json``)."""

    schema_version: int
    created: str
    label: str | None
    interrupted: bool
    config: Mapping[str, Any]
    """The benchmark's settings (``max_tokens``, ``concurrency``, ``runs``...)."""
    server: SnapshotServer
    environment: SnapshotEnvironment
    runs: tuple[SnapshotRun, ...]
    overall: Mapping[str, Figure]
    """Overall figures by name (``tok_s``, ``decode_tok_s``, ``ttft_s``...)."""
    overall_gpus: tuple[GpuRunSummary, ...]
    """Each GPU over all runs."""

    @property
    def run_tok_s(self) -> list[float]:
        """Per-run tok/s (runs without a figure are skipped)."""
        return [r.tok_s for r in self.runs if r.tok_s is not None]

    @property
    def finished_runs(self) -> int:
        """Measured runs that produced a tok/s figure."""
        return len(self.run_tok_s)

    @property
    def accept_length(self) -> float | None:
        """Mean accept length over the runs (tokens per verify step, as the bench reports it)."""
        figure = self.overall.get("accept_length")
        return figure.mean if figure is not None else None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        """Build from a dict that passed schema validation (any supported version)."""
        server = _map(d.get("server"))
        env = _map(d.get("gpu_environment"))
        overall = _map(d.get("overall"))
        figures = {
            k: Figure(as_float(v.get("mean")), as_float(v.get("std")))
            for k, v in overall.items()
            if k != "gpus" and isinstance(v, Mapping)
        }
        runs = tuple(_run(r) for r in (d.get("runs") or ()) if isinstance(r, Mapping))
        for key in ("running_requests", "prompt_tok_s"):
            if key not in figures:
                figures[key] = _figure([getattr(r.load, key) for r in runs])
        env_gpus = env.get("gpus")
        process_raw = server.get("process")
        process = (
            identity_json.from_json(dict(process_raw)) if isinstance(process_raw, Mapping) else None
        )
        note = _str(server.get("process_note"))
        if process is None and note is None:
            note = (
                "not recorded (snapshot schema version < 3)"
                if (_int(d.get("schema_version")) or 0) < 3
                else "not recorded"
            )
        return cls(
            schema_version=_int(d.get("schema_version")) or 0,
            created=str(d.get("created", "?")),
            label=_str(d.get("label")),
            interrupted=bool(d.get("interrupted")),
            config=_map(d.get("config")),
            server=SnapshotServer(
                dialect=_str(server.get("dialect")),
                version=_str(server.get("version")),
                model=_str(server.get("model")),
                speculative=_map(server.get("speculative")),
                launch_args=_map(server.get("launch_args")),
                process=process,
                process_note=note,
            ),
            environment=SnapshotEnvironment(
                driver_version=_str(env.get("driver_version")),
                cuda_driver_version=_str(env.get("cuda_driver_version")),
                gpus=tuple(
                    _map(g)
                    for g in (env_gpus if isinstance(env_gpus, Sequence) else ())
                    if isinstance(g, Mapping)
                ),
            ),
            runs=runs,
            overall=MappingProxyType(figures),
            overall_gpus=_gpus(overall.get("gpus")),
        )


__all__ = [
    "Figure",
    "Snapshot",
    "SnapshotEnvironment",
    "SnapshotRun",
    "SnapshotServer",
    "gpu_summary_from_dict",
]
