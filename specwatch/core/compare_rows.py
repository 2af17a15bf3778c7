"""The side-by-side table of ``specwatch compare``: one :class:`Row` per figure or setting.

Rows are plain strings plus the values behind them; which rows are shown is the report's
business (``specwatch.bench.report``). Strings here come from snapshots as they are: the report
sanitises them before they reach a terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specwatch.core import gpu as rules
from specwatch.core.config_differences import config_differences
from specwatch.core.energy import EnergyChange, energy_change
from specwatch.core.gpu_summary import GpuRunSummary
from specwatch.core.host import HostSpan
from specwatch.core.identity import ServerIdentity, identity_differences
from specwatch.core.launch_config import (
    DRAFT_LENGTH,
    SETTINGS,
    SPEC_METHOD,
    SPEC_OFF,
    LaunchConfig,
    server_launch_config,
)
from specwatch.core.server import SpecConfig
from specwatch.core.snapshot_figures import overall_gpus
from specwatch.core.snapshot_records import Snapshot
from specwatch.core.stats import Summary, mean

_IDLE_REASONS = rules.IDLE_REASONS


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the side-by-side table."""

    section: str
    """``"result"``, ``"load"``, ``"gpu"``, ``"host"``, ``"environment"``, ``"server"``,
    ``"launch"``, ``"code"`` or ``"config"`` (the benchmark's own settings)."""
    name: str
    a: str
    b: str
    differs: bool
    key: bool = False
    """Always shown, even when equal (the rows the verdict rests on)."""
    a_value: Any = None
    b_value: Any = None


def _fmt(x: float | None, spec: str = ".1f", unit: str = "") -> str:
    if x is None:
        return "—"
    return f"{x:{spec}}{unit}"


def _fmt_summary(s: Summary, scale: float = 1.0, spec: str = ".1f") -> str:
    if s.mean is None:
        return "—"
    out = f"{s.mean * scale:{spec}}"
    sd = s.std
    if sd is not None:
        out += f" ± {sd * scale:{spec}}"
    return out


def _text(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:g}"
    if isinstance(x, (list, tuple)):
        return ", ".join(_text(v) for v in x)
    if isinstance(x, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in x.items())
    return str(x)


def _unique(values: Iterable[Any]) -> Any:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else seen


REL_DIFFERS = 0.01
"""Numbers closer than this (relative) are shown as equal in the table: 1% is below what a
handful of runs resolves, and a table where every row differs says nothing."""


def _apart(va: float | None, vb: float | None, abs_tol: float = 0.0) -> bool:
    """Whether two table values differ enough to mark the row."""
    if va is None or vb is None:
        return va is not vb
    return abs(vb - va) > max(abs_tol, REL_DIFFERS * max(abs(va), abs(vb)))


def _agg(
    gpus: Sequence[GpuRunSummary], key: str, how: Callable[[list[float]], float]
) -> float | None:
    vals = [float(v) for g in gpus if (v := getattr(g, key)) is not None]
    return how(vals) if vals else None


def gpu_rows(
    a: Snapshot,
    b: Snapshot,
    clocks: tuple[float | None, float | None],
    stragglers: tuple[int | None, int | None],
) -> list[Row]:
    """The GPU section: the slowest GPU's clock, straggler, temperatures, power, clock events."""
    ga, gb = overall_gpus(a), overall_gpus(b)
    rows: list[Row] = []

    def num_row(
        name: str, va: float | None, vb: float | None, spec: str, unit: str, key: bool
    ) -> None:
        sa, sb = _fmt(va, spec, unit), _fmt(vb, spec, unit)
        differs = sa != sb and _apart(va, vb, abs_tol=2.0 if unit == "%" else 0.0)
        rows.append(Row("gpu", name, sa, sb, differs, key, va, vb))

    num_row("SM clock, slowest GPU (mean)", clocks[0], clocks[1], ".0f", " MHz", True)
    sa, sb = stragglers
    rows.append(Row("gpu", "straggler GPU", _text(sa), _text(sb), sa != sb, False, sa, sb))
    aggregates: tuple[tuple[str, str, Callable[[list[float]], float], str, str, bool], ...] = (
        ("SM clock, all GPUs (mean)", "sm_clock_mean_mhz", mean, ".0f", " MHz", True),
        ("SM clock (min)", "sm_clock_min_mhz", min, ".0f", " MHz", True),
        ("GPU temperature (max)", "temp_max_c", max, ".0f", " °C", True),
        ("HBM temperature (max)", "hbm_temp_max_c", max, ".0f", " °C", False),
        ("power per GPU (mean)", "power_mean_w", mean, ".0f", " W", True),
    )
    for name, key, how, spec, unit, is_key in aggregates:
        num_row(name, _agg(ga, key, how), _agg(gb, key, how), spec, unit, is_key)
    rows.extend(energy_rows(energy_change(a, b)))
    for name, key in (
        ("DRAM activity (mean)", "dram_active_mean"),
        ("tensor activity (mean)", "tensor_active_mean"),
    ):
        va, vb = _agg(ga, key, mean), _agg(gb, key, mean)
        num_row(
            name,
            None if va is None else va * 100,
            None if vb is None else vb * 100,
            ".0f",
            "%",
            va is not None or vb is not None,
        )

    reasons: list[str] = []
    for g in [*ga, *gb]:
        for name in g.reason_fractions:
            if name not in reasons and name not in _IDLE_REASONS:
                reasons.append(name)

    def worst_pct(gpus: Sequence[GpuRunSummary], reason: str) -> float | None:
        fractions = [g.reason_fractions.get(reason) or 0.0 for g in gpus]
        return max(fractions) * 100 if fractions else None

    for name in reasons:
        num_row(
            f"time under {name} (worst GPU)",
            worst_pct(ga, name),
            worst_pct(gb, name),
            ".0f",
            "%",
            True,
        )

    def link(gpus: Sequence[GpuRunSummary]) -> tuple[str, Any]:
        links = [(g.pcie_gen, g.pcie_width) for g in gpus if g.pcie_gen is not None]
        if not links:
            return "—", None
        worst = min(links, key=lambda lw: ((lw[0] or 0), (lw[1] or 0)))
        return f"Gen{worst[0]} x{worst[1]}", list(worst)

    la, lb = link(ga), link(gb)
    rows.append(
        Row("gpu", "PCIe link (worst GPU)", la[0], lb[0], la[0] != lb[0], True, la[1], lb[1])
    )
    return rows


def energy_rows(change: EnergyChange) -> list[Row]:
    """Joules per token and tokens per joule over the busy GPUs, judged as tok/s is (Welch over
    the runs, at least the verdict's smallest change); shown whenever either side has one."""
    ea, eb = change.a, change.b
    ja, jb = ea.joules_per_token, eb.joules_per_token
    ta, tb = ea.tokens_per_joule, eb.tokens_per_joule
    shown = ja is not None or jb is not None
    moved = change.beyond_noise
    return [
        Row(
            "gpu",
            "energy per token (busy GPUs)",
            _fmt(ja, ".3g", " J/tok"),
            _fmt(jb, ".3g", " J/tok"),
            moved or (ja is None) != (jb is None),
            shown,
            ja,
            jb,
        ),
        Row(
            "gpu",
            "tokens per joule (busy GPUs)",
            _fmt(ta, ".3g", " tok/J"),
            _fmt(tb, ".3g", " tok/J"),
            moved or (ta is None) != (tb is None),
            shown,
            ta,
            tb,
        ),
    ]


def host_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The host section: this host's CPU over the runs (none when neither snapshot has it)."""
    ha, hb = a.host_cpu, b.host_cpu
    if ha is None and hb is None:
        return []
    rows: list[Row] = []

    def num_row(
        name: str, key: str, scale: float, spec: str, unit: str, tol: float, shown: bool = True
    ) -> None:
        va = getattr(ha, key) if ha is not None else None
        vb = getattr(hb, key) if hb is not None else None
        va = None if va is None else va * scale
        vb = None if vb is None else vb * scale
        sa, sb = _fmt(va, spec, unit), _fmt(vb, spec, unit)
        rows.append(Row("host", name, sa, sb, sa != sb and _apart(va, vb, tol), shown, va, vb))

    num_row("server waited for a CPU", "server_wait_ratio", 100, ".0f", "%", 5.0)
    num_row("server CPU", "server_cpu_cores", 1, ".2f", " cores", 0.1)
    num_row("other processes' CPU", "others_cores", 1, ".2f", " cores", 0.1)
    num_row("run queue per core", "run_queue_per_core", 1, ".2f", "", 0.1)
    num_row("CPU busy", "busy_ratio", 100, ".0f", "%", 5.0, False)
    num_row("CPU steal", "steal_ratio", 100, ".0f", "%", 2.0, False)
    num_row("CPU frequency (mean)", "freq_mhz", 1, ".0f", " MHz", 0.0, False)
    ga, gb = (h.governor if h is not None else None for h in (ha, hb))
    rows.append(Row("host", "CPU governor", _text(ga), _text(gb), ga != gb, False, ga, gb))

    def beside(h: HostSpan | None) -> str:
        if h is None or not h.competitors:
            return "—"
        return ", ".join(f"{c.name} {c.cores:.1f}" for c in h.competitors)

    sa, sb = beside(ha), beside(hb)
    rows.append(Row("host", "beside the server (cores)", sa, sb, False, False, sa, sb))
    return rows


def env_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The env section."""
    ea, eb = a.gpu_environment, b.gpu_environment
    rows: list[Row] = []

    def row(name: str, va: Any, vb: Any, key: bool = False) -> None:
        rows.append(Row("environment", name, _text(va), _text(vb), va != vb, key, va, vb))

    row("driver", ea.driver_version, eb.driver_version, True)
    row("CUDA", ea.cuda_driver_version, eb.cuda_driver_version)
    sa, sb = ea.gpus, eb.gpus
    row("GPUs", len(sa), len(sb))
    for name, key in (
        ("GPU model", "name"),
        ("max SM clock", "max_sm_clock_mhz"),
        ("power limit (W)", "power_limit_w"),
        ("persistence mode", "persistence_mode"),
        ("application clock", "app_sm_clock_mhz"),
        ("PCIe max", "max_pcie_gen"),
    ):
        row(name, _unique(getattr(g, key) for g in sa), _unique(getattr(g, key) for g in sb))
    return rows


def server_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The server section."""
    sa, sb = a.server, b.server
    rows: list[Row] = []

    def row(name: str, va: Any, vb: Any, key: bool = False) -> None:
        rows.append(Row("server", name, _text(va), _text(vb), va != vb, key, va, vb))

    row("dialect", sa.dialect, sb.dialect)
    row("server version", sa.version, sb.version, True)
    row("model", sa.model, sb.model)
    spa = _spec_shown(sa.speculative, server_launch_config(sa))
    spb = _spec_shown(sb.speculative, server_launch_config(sb))
    for key in ("enabled", "algorithm", "num_steps", "num_draft_tokens", "topk", "draft_model"):
        va, vb = getattr(spa, key), getattr(spb, key)
        row(f"speculative {key.replace('_', ' ')}", va, vb, key == "algorithm")
    return rows


def _spec_shown(spec: SpecConfig, config: LaunchConfig | None) -> SpecConfig:
    """The speculative setup with what the server left unsaid taken from its arguments.

    A fresh llama-server's ``/slots`` names its draft type only after a request; its command
    line (``-md``, ``--spec-type``) said it all along.
    """
    method = None if config is None else config.value(SPEC_METHOD)
    if spec.algorithm is None and spec.enabled is not False and method not in (None, SPEC_OFF):
        spec = dataclasses.replace(spec, algorithm=method, enabled=True)
    return spec


def launch_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The launch section: each normalised setting either side knows, then each other argument
    that differs (:mod:`specwatch.core.launch_config`)."""
    ca, cb = server_launch_config(a.server), server_launch_config(b.server)
    if ca is None or cb is None or not (ca.known or cb.known):
        return []
    diffs = {d.name: d for d in config_differences(ca, cb)}
    rows: list[Row] = []
    for name in SETTINGS:
        va, vb = ca.value(name), cb.value(name)
        if va is None and vb is None:
            continue
        key = name in (SPEC_METHOD, DRAFT_LENGTH)
        rows.append(Row("launch", name, va or "—", vb or "—", name in diffs, key, va, vb))
    for name, d in diffs.items():
        if name not in SETTINGS:
            rows.append(
                Row("launch", name, d.before or "—", d.after or "—", True, True, d.before, d.after)
            )
    return rows


def config_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The config section."""
    ca, cb = a.config, b.config
    rows: list[Row] = []
    for key in (
        "max_tokens",
        "concurrency",
        "runs",
        "warmup",
        "prompts_source",
        "ignore_eos",
        "temperature",
    ):
        va, vb = ca.get(key), cb.get(key)
        rows.append(
            Row("config", key.replace("_", " "), _text(va), _text(vb), va != vb, False, va, vb)
        )
    return rows


def result_rows(a: Snapshot, b: Snapshot, beyond_noise: bool) -> list[Row]:
    """The result section (tok/s, latencies, accept length) and the load section."""
    oa, ob = a.overall, b.overall
    rows: list[Row] = []

    def row(name: str, key: str, scale: float, spec: str, unit: str, is_key: bool) -> None:
        fa, fb = getattr(oa, key), getattr(ob, key)
        sa = _fmt_summary(fa, scale, spec)
        sb = _fmt_summary(fb, scale, spec)
        va, vb = fa.mean, fb.mean
        if unit:
            sa, sb = (s + unit if s != "—" else s for s in (sa, sb))
        differs = beyond_noise if key == "tok_s" else sa != sb and _apart(va, vb)
        rows.append(Row("result", name, sa, sb, differs, is_key, va, vb))

    row("tok/s", "tok_s", 1.0, ".1f", "", True)
    row("decode tok/s (no TTFT)", "decode_tok_s", 1.0, ".1f", "", True)
    row("TTFT", "ttft_s", 1000.0, ".0f", " ms", False)
    row("step latency", "step_latency_s", 1000.0, ".2f", " ms", True)
    row("tokens per step", "tokens_per_step", 1.0, ".2f", "", False)
    row("accept length", "accept_length", 1.0, ".2f", "", True)
    # the authoritative one (bench says so): the stream's also counts steps that drafted
    # nothing and misses steps merged into one chunk
    va, vb = (_server_accept_length(s) for s in (a, b))
    if va is not None or vb is not None:
        ta, tb = _fmt(va, ".2f"), _fmt(vb, ".2f")
        rows.append(
            Row(
                "result",
                "accept length (server)",
                ta,
                tb,
                ta != tb and _apart(va, vb),
                True,
                va,
                vb,
            )
        )
    row("tokens per run", "completion_tokens", 1.0, ".0f", "", False)
    rows.extend(goodput_rows(a, b))
    for name, key, spec in (
        ("running requests (mean)", "running_requests", ".1f"),
        ("prompt tok/s (server)", "prompt_tok_s", ".0f"),
    ):
        va, vb = getattr(oa, key).mean, getattr(ob, key).mean
        if va is None and vb is None:
            continue
        ta, tb = _fmt(va, spec), _fmt(vb, spec)
        rows.append(Row("load", name, ta, tb, ta != tb and _apart(va, vb), True, va, vb))
    return rows


def _server_accept_length(snap: Snapshot) -> float | None:
    """The mean over the runs of the accept length the server's counters gave each run."""
    values = [r.server_accept_length for r in snap.runs if r.server_accept_length is not None]
    return sum(values) / len(values) if values else None


def goodput_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """Goodput, each side against the SLO it was run with (named when the two differ); none
    when neither snapshot kept per-request figures (schema 5)."""
    ga, gb = a.goodput, b.goodput
    if ga is None and gb is None:
        return []
    va = None if ga is None else ga.share()
    vb = None if gb is None else gb.share()
    words = {g.slo.words() for g in (ga, gb) if g is not None}
    name = f"goodput ({words.pop()})" if len(words) == 1 else "goodput (each side's SLO)"
    sa, sb = (
        _fmt(None if va is None else va * 100, ".1f", "%"),
        _fmt(None if vb is None else vb * 100, ".1f", "%"),
    )
    return [Row("result", name, sa, sb, sa != sb and _apart(va, vb, abs_tol=0.02), False, va, vb)]


def code_rows(a: Snapshot, b: Snapshot) -> list[Row]:
    """The code section: commit, uncommitted changes, NCCL, torch, each differing variable.

    Empty when neither snapshot recorded the server process's identity.
    """
    ia, ib = a.server.process, b.server.process
    if ia is None and ib is None:
        return []
    empty = ServerIdentity()
    xa, xb = ia or empty, ib or empty
    rows: list[Row] = []

    def row(name: str, va: str | None, vb: str | None, key: bool = True) -> None:
        rows.append(Row("code", name, va or "—", vb or "—", va != vb, key, va, vb))

    def dirty(i: ServerIdentity | None) -> str | None:
        if i is None or i.checkout is None or i.checkout.dirty is None:
            return None
        return "yes" if i.checkout.dirty else "no"

    row("commit", xa.short_commit, xb.short_commit)
    row("uncommitted changes", dirty(ia), dirty(ib))
    row("package", _pkg(xa), _pkg(xb), key=False)
    row("NCCL", xa.library("nccl"), xb.library("nccl"))
    row("torch", xa.library("torch"), xb.library("torch"))
    row("CUDA runtime", xa.library("cudart"), xb.library("cudart"), key=False)
    if ia is not None and ib is not None:
        names = set(ia.env()) | set(ib.env())
        for d in identity_differences(ia, ib).differences:
            if d.label in names:
                rows.append(Row("code", d.label, d.before, d.after, True, True, d.before, d.after))
    return rows


def _pkg(i: ServerIdentity) -> str | None:
    if i.package is None:
        return None
    return f"{i.package} {i.package_version}" if i.package_version else i.package


__all__ = [
    "Row",
    "code_rows",
    "config_rows",
    "env_rows",
    "gpu_rows",
    "launch_rows",
    "result_rows",
    "server_rows",
]
