"""What the fleet screen shows of each server: its figures and its node's GPUs in one row.

Pure: no I/O, no drawing. A server's node is the GPUs it was joined with
(:func:`specwatch.core.fleet.join_gpus`); of those, the row carries the slowest SM clock as a
fraction of its board maximum (in tensor parallelism the slowest rank sets the pace) and the
hottest temperature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from specwatch.core.fleet import FleetGpu, FleetServer, NodeJoin
from specwatch.core.gpu import GpuSample, clock_fraction, held_busy, sample_busy


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One server's line on the fleet screen."""

    server: FleetServer
    gpus: tuple[str, ...]
    """:attr:`~specwatch.core.fleet.FleetGpu.key` of its node's GPUs."""
    joined_by: str | None
    """``"pair"``, ``"pod"``, ``"host"``, or ``None`` (no GPUs joined)."""
    slowest_clock: float | None
    """The node's lowest SM clock / board maximum (1.0 at the maximum)."""
    hottest_c: float | None
    stale: bool = False
    """The server was in an earlier reading but not in the latest: its last figures."""


def node_pace(gpus: Sequence[FleetGpu]) -> tuple[float | None, float | None]:
    """``(slowest SM clock fraction, hottest temperature)`` of a node's GPUs (lost ones aside)."""
    live = [g for g in gpus if not g.sample.lost]
    fractions = [
        f
        for g in live
        if (f := clock_fraction(g.sample.sm_clock_mhz, g.static.max_sm_clock_mhz)) is not None
    ]
    temps = [g.sample.temp_c for g in live if g.sample.temp_c is not None]
    return (min(fractions) if fractions else None, max(temps) if temps else None)


def held_gpus(gpus: Sequence[FleetGpu], last_busy: dict[str, GpuSample]) -> list[FleetGpu]:
    """``gpus`` with a short idle spell shown as each GPU's last busy sample, as the
    single-server GPU pane shows it (:func:`~specwatch.core.gpu.held_busy`): one idle
    sample between batches is not the node's pace. ``last_busy`` (by GPU key) is updated."""
    out: list[FleetGpu] = []
    for g in gpus:
        if sample_busy(g.sample):
            last_busy[g.key] = g.sample
        shown = held_busy(g.sample, last_busy.get(g.key))
        out.append(g if shown is g.sample else replace(g, sample=shown))
    return out


def fleet_rows(
    servers: Sequence[FleetServer], gpus: Sequence[FleetGpu], joins: Sequence[NodeJoin]
) -> list[FleetRow]:
    """A row per server, in the order given."""
    by_key: Mapping[str, FleetGpu] = {g.key: g for g in gpus}
    by_server = {j.server: j for j in joins}
    rows: list[FleetRow] = []
    for s in servers:
        join = by_server.get(s.instance)
        keys = join.gpus if join is not None else ()
        slowest, hottest = node_pace([by_key[k] for k in keys if k in by_key])
        rows.append(FleetRow(s, keys, join.via if join else None, slowest, hottest))
    return rows


def with_gone(rows: Sequence[FleetRow], before: Sequence[FleetRow]) -> list[FleetRow]:
    """``rows`` followed by the rows of ``before`` whose server is missing now, marked stale."""
    present = {r.server.instance for r in rows}
    gone = [r for r in before if r.server.instance not in present]
    return [*rows, *(replace(r, stale=True) for r in gone)]


__all__ = ["FleetRow", "fleet_rows", "held_gpus", "node_pace", "with_gone"]
